package verify

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// oldRecords are the records a server running the earlier reading of
// user IDs (the last <...>) wrote for a key whose one user ID is uid,
// linking it to addr: the user ID's link (pgp.uid-selfsig) and its
// verification by mail (email.verified), chained from seq 1, in the
// form records had before keys were private artifacts (the whole key
// as SignerKey).
func oldRecords(t *testing.T, uid, addr string) []*identity.Evidence {
	t.Helper()
	h := gpgtest.New(t)
	fpr := h.NewKey(uid, "sign")
	k, err := pgp.ParseKey(h.Run("", "--export", fpr))
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Truncate(time.Second)
	applied, _, err := policyAt(created).Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	stmt, sigs := componentPackets(applied, pgp.Packet{Tag: pgp.TagUserID, Body: []byte(uid)})
	if sigs = selfSignatures(sigs, applied.Describe()); len(sigs) == 0 {
		t.Fatalf("no self-signature on %q", uid)
	}
	key, email := identity.PGPFactor(applied.Fingerprint()), identity.EmailFactor(addr)
	link := &identity.Evidence{Seq: 1, Method: identity.MethodPGPUIDSelfSig, From: key, To: email,
		SignerKey: applied.Bytes(), Statement: stmt, Signature: sigs, Created: created}
	verified := &identity.Evidence{Seq: 2, Method: identity.MethodEmailVerified, From: key, To: email,
		SignerKey: applied.Bytes(), Created: created,
		Statement: identity.EmailStatement("Kith <https://keys.example.org>", identity.EmailVerify, key, email, created, created)}
	var prev []byte
	for _, e := range []*identity.Evidence{link, verified} {
		e.PrevHash = prev
		if prev == nil {
			e.PrevHash = make([]byte, 32)
		}
		e.Hash = e.ComputeHash()
		prev = e.Hash
	}
	return []*identity.Evidence{link, verified}
}

// TestAmbiguousUserIDRecordsOfAnHonestOldLogAreUncheckedNotFailed: an
// honest server that read "CEO <ceo@example.org> <mallory@example.org>"
// as mallory's linked and verified the key for her. Today that user ID
// carries no address, so neither record verifies, but neither fails the
// log: each is unchecked, as made under an earlier reading.
func TestAmbiguousUserIDRecordsOfAnHonestOldLogAreUncheckedNotFailed(t *testing.T) {
	recs := oldRecords(t, "CEO <ceo@example.org> <mallory@example.org>", "mallory@example.org")
	var v LogVerifier
	for _, e := range recs {
		if err := Record(e); !errors.Is(err, ErrEarlierReading) {
			t.Errorf("record %d (%s): %v, want ErrEarlierReading", e.Seq, e.Method, err)
		}
		fs := v.Add(e)
		if len(fs) != 1 || !fs[0].Unchecked || !strings.Contains(fs[0].Reason, "earlier reading") {
			t.Errorf("record %d in the log: %+v, want it unchecked as made under an earlier reading", e.Seq, fs)
		}
	}
	if v.Count() != 2 || v.Unchecked() != 2 {
		t.Errorf("%d records, %d unchecked", v.Count(), v.Unchecked())
	}
	// Under today's reading the key carries no link at all.
	links, err := linksAt(mustParse(t, recs[0].SignerKey), recs[0].Created, true)
	if err != nil || len(links) != 0 {
		t.Errorf("links of the ambiguous user ID today: %+v, %v", links, err)
	}
}

// TestEarlierReadingCoversNoForgery: a record of an address the user ID
// does not name, or of a user ID that carries its address today, still
// fails: only what the earlier reading could have taken is excused.
func TestEarlierReadingCoversNoForgery(t *testing.T) {
	forged := oldRecords(t, "CEO <ceo@example.org> <mallory@example.org>", "eve@example.org")
	for _, e := range forged {
		if err := Record(e); err == nil || errors.Is(err, ErrEarlierReading) {
			t.Errorf("record %d (%s) of an address the user ID does not name: %v, want a failure", e.Seq, e.Method, err)
		}
	}
	// The earlier reading took the last <...>: a record of the first
	// address is none it could have made.
	for _, e := range oldRecords(t, "CEO <ceo@example.org> <mallory@example.org>", "ceo@example.org") {
		if err := Record(e); err == nil || errors.Is(err, ErrEarlierReading) {
			t.Errorf("record %d (%s) of the first bracketed address: %v, want a failure", e.Seq, e.Method, err)
		}
	}
	// The link's statement must be the user ID the key carries.
	other := oldRecords(t, "CEO <ceo@example.org> <mallory@example.org>", "mallory@example.org")[0]
	other.Statement = bytes.Replace(other.Statement, []byte("CEO"), []byte("CFO"), 1)
	if err := Record(other); err == nil || errors.Is(err, ErrEarlierReading) {
		t.Errorf("a link whose statement is not the key's user ID: %v, want a failure", err)
	}
	// One reading: a plain user ID's records verify as ever.
	for _, e := range oldRecords(t, "Alice <alice@example.org>", "alice@example.org") {
		if err := Record(e); err != nil {
			t.Errorf("record %d (%s) of a plain user ID: %v", e.Seq, e.Method, err)
		}
	}
}

func mustParse(t *testing.T, b []byte) *pgp.Key {
	t.Helper()
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
