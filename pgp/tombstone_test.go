package pgp

import (
	"errors"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

func TestTombstoneKeepsOnlyThePrimaryAndItsRevocations(t *testing.T) {
	owner := genEntity(t, "Owner", "owner@example.org", 1)
	stranger := genEntity(t, "Stranger", "stranger@example.org", 2)
	if err := owner.SignIdentity("Owner <owner@example.org>", stranger, sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	full, _ := mustApply(t, mustParse(t, entityBytes(t, owner)))
	if err := owner.RevokeKey(packet.KeyRetired, "gone", sigConfig(testTime.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	revoked, _ := mustApply(t, mustParse(t, entityBytes(t, owner)))

	bare, err := Policy{}.Tombstone(full)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(bare.Packets()); n != 1 || bare.Packets()[0].Tag != TagPublicKey {
		t.Fatalf("tombstone of an unrevoked key has %d packets, want the primary alone", n)
	}
	if d := bare.Describe(); len(d.UserIDs) != 0 || len(d.Subkeys) != 0 || d.Revoked {
		t.Fatalf("bare tombstone describes as %+v", d)
	}

	withRev, err := Policy{}.Tombstone(bare, revoked)
	if err != nil {
		t.Fatal(err)
	}
	ps := withRev.Packets()
	if len(ps) != 2 || ps[1].Tag != TagSignature || !withRev.Describe().Revoked {
		t.Fatalf("tombstone merged with a revoked copy: %d packets, revoked %v; want primary and revocation", len(ps), withRev.Describe().Revoked)
	}
	// Merging the full key again adds nothing; the order does not matter.
	again, err := Policy{}.Tombstone(full, withRev, revoked)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest() != withRev.Digest() {
		t.Fatal("merging the full key into a tombstone changed it")
	}
	// The tombstone survives the policy and a second pass unchanged.
	reapplied, _ := mustApply(t, mustParse(t, withRev.Bytes()))
	if reapplied.Digest() != withRev.Digest() {
		t.Fatal("the policy changes a tombstone")
	}

	// Another key cannot be merged into a tombstone.
	other := genEntity(t, "Other", "other@example.org", 3)
	if _, err := (Policy{}).Tombstone(full, mustParse(t, entityBytes(t, other))); !errors.Is(err, ErrFingerprintMismatch) {
		t.Fatalf("tombstone of two different keys: %v, want ErrFingerprintMismatch", err)
	}
}

func TestWithoutPacketsRemovesABlockedUserIDOrCertification(t *testing.T) {
	owner := genEntity(t, "Owner", "owner@example.org", 4)
	stranger := genEntity(t, "Stranger", "stranger@example.org", 5)
	if err := owner.AddUserId("Poison", "", "poison@example.org", sigConfig(testTime)); err != nil {
		t.Fatal(err)
	}
	if err := owner.SignIdentity("Owner <owner@example.org>", stranger, sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	k, _ := mustApply(t, mustParse(t, entityBytes(t, owner)))
	var poison, cert [32]byte
	for _, bp := range BlockablePackets(k) {
		switch {
		case bp.Tag == TagUserID && bp.UserID == "Poison <poison@example.org>":
			poison = bp.Hash
		case bp.Tag == TagSignature && bp.Issuer == stranger.PrimaryKey.KeyId:
			cert = bp.Hash
		}
	}
	if poison == ([32]byte{}) || cert == ([32]byte{}) {
		t.Fatalf("BlockablePackets did not list the user ID and the certification: %+v", BlockablePackets(k))
	}
	if poison != PacketHash([]byte("Poison <poison@example.org>")) {
		t.Fatal("a user ID's hash is not the SHA-256 of its text")
	}

	out, removed, err := Policy{}.WithoutPackets(k, func(h [32]byte) bool { return h == poison || h == cert })
	if err != nil || !removed {
		t.Fatalf("WithoutPackets: removed %v, err %v", removed, err)
	}
	if got := userIDs(out); len(got) != 1 || got[0] != "Owner <owner@example.org>" {
		t.Fatalf("user IDs left: %q", got)
	}
	for _, bp := range BlockablePackets(out) {
		if bp.Hash == cert {
			t.Fatal("the blocked certification is still there")
		}
	}
	same, removed, err := Policy{}.WithoutPackets(out, func(h [32]byte) bool { return h == poison || h == cert })
	if err != nil || removed || same != out {
		t.Fatalf("a key without blocked packets: removed %v, err %v", removed, err)
	}
	// Blocking every user ID leaves nothing self-signed.
	all := func(h [32]byte) bool {
		return h == poison || h == PacketHash([]byte("Owner <owner@example.org>"))
	}
	if _, _, err := (Policy{}).WithoutPackets(k, all); !errors.Is(err, ErrBlockedAway) {
		t.Fatalf("every user ID blocked: %v, want ErrBlockedAway", err)
	}
}
