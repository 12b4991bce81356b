package pgp

import (
	"crypto"
	"encoding/binary"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

func TestDescribeV4Key(t *testing.T) {
	alice := genEntity(t, "Alice Example", "Alice@Example.ORG", 1)
	if err := alice.AddUserId("alice", "", "", sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	life := uint32(3600 * 24)
	cfg := sigConfig(testTime.Add(2 * time.Hour))
	cfg.KeyLifetimeSecs = life
	if err := alice.AddSigningSubkey(cfg); err != nil {
		t.Fatal(err)
	}
	k, _ := mustApply(t, mustParse(t, entityBytes(t, alice)))
	d := k.Describe()
	fp := alice.PrimaryKey.Fingerprint
	if d.Version != 4 || len(d.Fingerprint) != 20 || string(d.Fingerprint) != string(fp) ||
		d.KeyID != binary.BigEndian.Uint64(fp[12:]) || d.KeyID32() != binary.BigEndian.Uint32(fp[16:]) {
		t.Errorf("identity: %+v", d)
	}
	if d.Algorithm != packet.PubKeyAlgoEdDSA || d.Curve != "ed25519" || d.Bits != 255 || !d.Created.Equal(testTime) {
		t.Errorf("algorithm: %v %q %d %v", d.Algorithm, d.Curve, d.Bits, d.Created)
	}
	if !d.Capabilities.Certify || !d.Capabilities.Sign || d.Capabilities.Encrypt {
		t.Errorf("primary capabilities %v", d.Capabilities)
	}
	if len(d.UserIDs) != 2 {
		t.Fatalf("user IDs %+v", d.UserIDs)
	}
	primaries := 0
	for _, u := range d.UserIDs {
		switch u.Text {
		case "Alice Example <Alice@Example.ORG>":
			if u.Email != "alice@example.org" {
				t.Errorf("email %q", u.Email)
			}
		case "alice":
			if u.Email != "" {
				t.Errorf("email of %q: %q", u.Text, u.Email)
			}
		}
		if u.Primary {
			primaries++
		}
	}
	if primaries != 1 {
		t.Errorf("%d primary user IDs", primaries)
	}
	if len(d.Subkeys) != 2 {
		t.Fatalf("%d subkeys", len(d.Subkeys))
	}
	for _, s := range d.Subkeys {
		switch {
		case s.Algorithm == packet.PubKeyAlgoECDH:
			if !s.Capabilities.Encrypt || s.Capabilities.Sign || s.Curve != "cv25519" || !s.Expires.IsZero() {
				t.Errorf("encryption subkey %+v", s)
			}
		default:
			if !s.Capabilities.Sign || s.Capabilities.Encrypt || !s.Expires.Equal(s.Created.Add(24*time.Hour)) {
				t.Errorf("signing subkey %+v", s)
			}
		}
		if s.PublicKey() == nil || string(s.PublicKey().Fingerprint) != string(s.Fingerprint) || s.KeyID != binary.BigEndian.Uint64(s.Fingerprint[12:]) {
			t.Errorf("subkey public key does not match its fingerprint")
		}
	}
}

func TestDescribeV6Key(t *testing.T) {
	cfg := &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519, Time: func() time.Time { return testTime }, DefaultHash: crypto.SHA256}
	e, err := openpgp.NewEntity("Vee Six", "", "v6@example.org", cfg)
	if err != nil {
		t.Fatal(err)
	}
	k, rep := mustApply(t, mustParse(t, entityBytes(t, e)))
	d := k.Describe()
	if d.Version != 6 || len(d.Fingerprint) != 32 || d.KeyID != binary.BigEndian.Uint64(d.Fingerprint[:8]) {
		t.Errorf("v6 identity: version %d, fingerprint %x, key ID %x (report %v)", d.Version, d.Fingerprint, d.KeyID, rep)
	}
	if len(d.UserIDs) != 1 || len(d.Subkeys) != 1 || d.Curve != "ed25519" || d.Subkeys[0].Curve != "cv25519" {
		t.Errorf("v6 description %+v", d)
	}
}

// TestDescribeRevocationDateAndReason: a revoked key and a revoked subkey
// say when and why, from their revocation signatures.
func TestDescribeRevocationDateAndReason(t *testing.T) {
	alice := genEntity(t, "Alice Example", "alice@example.org", 1)
	revokedAt := testTime.Add(3 * time.Hour)
	if err := alice.RevokeSubkey(&alice.Subkeys[0], packet.KeySuperseded, "new laptop", sigConfig(revokedAt)); err != nil {
		t.Fatal(err)
	}
	if err := alice.RevokeKey(packet.KeyCompromised, "the laptop was stolen", sigConfig(revokedAt.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	d := mustParse(t, entityBytes(t, alice)).Describe()
	if !d.Revoked || !d.Revocation.At.Equal(revokedAt.Add(time.Hour)) || d.Revocation.Reason == nil ||
		d.Revocation.Reason.Code != 2 || d.Revocation.Reason.Text != "the laptop was stolen" ||
		d.Revocation.Reason.CodeName() != "key material has been compromised" {
		t.Errorf("key revocation %v %+v", d.Revoked, d.Revocation)
	}
	if len(d.Subkeys) != 1 {
		t.Fatalf("%d subkeys", len(d.Subkeys))
	}
	s := d.Subkeys[0]
	if !s.Revoked || !s.Revocation.At.Equal(revokedAt) || s.Revocation.Reason == nil || s.Revocation.Reason.Code != 1 || s.Revocation.Reason.Text != "new laptop" {
		t.Errorf("subkey revocation %v %+v", s.Revoked, s.Revocation)
	}
	for _, u := range d.UserIDs {
		if u.Revoked || !u.Revocation.At.IsZero() {
			t.Errorf("user ID %q revoked: %+v", u.Text, u.Revocation)
		}
	}
}

// TestDescribeRevokedUserIDIsNeverPrimary: a newer user ID flagged
// primary that its holder then revoked (with a reason) says when and
// why, and the older one that stands is the primary user ID, as gpg
// picks it.
func TestDescribeRevokedUserIDIsNeverPrimary(t *testing.T) {
	alice := genEntity(t, "Alice Example", "alice@example.org", 1)
	if err := alice.AddUserId("Alice at work", "", "alice@work.example", sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	work := alice.Identities["Alice at work <alice@work.example>"]
	// The newer user ID even carries the primary-user-ID flag.
	flag := true
	work.SelfSignature.IsPrimaryId = &flag
	if err := work.SelfSignature.SignUserId(work.UserId.Id, alice.PrimaryKey, alice.PrivateKey, sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	revokedAt := testTime.Add(2 * time.Hour)
	reason := packet.UserIDNotValid
	rev := &packet.Signature{
		Version: 4, SigType: packet.SigTypeCertificationRevocation, PubKeyAlgo: alice.PrimaryKey.PubKeyAlgo, Hash: crypto.SHA256,
		CreationTime: revokedAt, IssuerKeyId: &alice.PrimaryKey.KeyId, IssuerFingerprint: alice.PrimaryKey.Fingerprint,
		RevocationReason: &reason, RevocationReasonText: "I left",
	}
	if err := rev.SignUserId(work.UserId.Id, alice.PrimaryKey, alice.PrivateKey, sigConfig(revokedAt)); err != nil {
		t.Fatal(err)
	}
	work.Revocations = append(work.Revocations, rev)
	d := mustParse(t, entityBytes(t, alice)).Describe()
	for _, u := range d.UserIDs {
		switch u.Text {
		case "Alice at work <alice@work.example>":
			if !u.Revoked || u.Primary || !u.Revocation.At.Equal(revokedAt) || u.Revocation.Reason == nil || u.Revocation.Reason.Code != 32 || u.Revocation.Reason.Text != "I left" {
				t.Errorf("the revoked user ID: %+v", u)
			}
		default:
			if u.Revoked || !u.Primary {
				t.Errorf("the standing user ID %q: revoked %v, primary %v", u.Text, u.Revoked, u.Primary)
			}
		}
	}
}
