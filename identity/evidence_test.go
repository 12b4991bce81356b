package identity

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestHashChainDetectsAnyChangedField(t *testing.T) {
	var recs []*Evidence
	prev, seq := []byte(nil), int64(0)
	for i := range 3 {
		e := &Evidence{Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: Handle("h" + string(rune('a'+i))),
			From: testSSHFactor(), Statement: []byte("s"), Signature: []byte("sig"), Created: time.Now()}
		e.Seal(seq, prev)
		prev, seq = e.Hash, e.Seq
		recs = append(recs, e)
	}
	check := func() error {
		var p []byte
		for i, e := range recs {
			if err := CheckLink(e, int64(i), p); err != nil {
				return err
			}
			p = e.Hash
		}
		return nil
	}
	if err := check(); err != nil {
		t.Fatalf("good chain: %v", err)
	}
	changes := map[string]func(e *Evidence){
		"statement": func(e *Evidence) { e.Statement = []byte("t") },
		"signature": func(e *Evidence) { e.Signature[0] ^= 1 },
		"handle":    func(e *Evidence) { e.Handle = "mallory" },
		"key":       func(e *Evidence) { e.From.Data[len(e.From.Data)-1] ^= 1 },
		"created":   func(e *Evidence) { e.Created = e.Created.Add(time.Microsecond) },
		"expires":   func(e *Evidence) { e.Expires = time.Now() },
		"revokes":   func(e *Evidence) { e.Revokes = 1 },
		"method":    func(e *Evidence) { e.Method = MethodPGPChallenge },
	}
	for name, change := range changes {
		orig := *recs[1]
		orig.From.Data = bytes.Clone(orig.From.Data)
		orig.Signature = bytes.Clone(orig.Signature)
		change(recs[1])
		var ce *ChainError
		if err := check(); !errors.As(err, &ce) || ce.Seq != 2 {
			t.Errorf("%s changed: %v, want a chain error at record 2", name, err)
		}
		*recs[1] = orig
	}
}

func TestCanonicalBytesAreStable(t *testing.T) {
	e := &Evidence{Seq: 1, Method: MethodSSHChallenge, Handle: "alice", From: Factor{Kind: KindSSH, Value: "v", Data: []byte{1}},
		Created: time.UnixMicro(1), PrevHash: ZeroHash()}
	want := "kith evidence v1\x00" + "\x00\x00\x00\x00\x00\x00\x00\x01" +
		"\x00\x00\x00\x0dssh.challenge" + "\x00\x00\x00\x00" + "\x00\x00\x00\x05alice" +
		"\x00\x00\x00\x03ssh" + "\x00\x00\x00\x01v" + "\x00\x00\x00\x01\x01" +
		"\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + // to: kind, value, data
		"\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + // label, statement, signature, signer key
		"\x00\x00\x00\x00\x00\x00\x00\x01" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" +
		"\x00\x00\x00\x20" + string(make([]byte, 32))
	if got := string(e.CanonicalBytes()); got != want {
		t.Fatalf("canonical bytes changed:\n%q\nwant\n%q", got, want)
	}
}

// TestConsentChangesTheEncoding: a record with a consent salt is encoded
// as version 2, ending with the salt and its commitments, which its hash
// covers; one without keeps version 1's bytes.
func TestConsentChangesTheEncoding(t *testing.T) {
	e := &Evidence{Seq: 1, Method: MethodOIDCLogin, Handle: "alice", From: OIDCFactor("https://id.example.org", "a"),
		Created: time.UnixMicro(1), PrevHash: ZeroHash()}
	v1 := e.CanonicalBytes()
	e.Consent = bytes.Repeat([]byte{7}, ConsentSaltSize)
	v2 := e.CanonicalBytes()
	tail := append(append([]byte{0, 0, 0, 32}, e.Consent...), 0, 0, 0, 0) // the salt, no commitments
	if !bytes.HasPrefix(v2, []byte("kith evidence v2\x00")) || !bytes.HasSuffix(v2, tail) ||
		!bytes.Equal(v2[len("kith evidence v2\x00"):len(v2)-len(tail)], v1[len("kith evidence v1\x00"):]) {
		t.Fatalf("version 2 is not version 1's fields and the salt:\n%q\n%q", v1, v2)
	}
	h := e.ComputeHash()
	e.Consent[0] ^= 1
	if bytes.Equal(h, e.ComputeHash()) {
		t.Error("the hash does not cover the consent salt")
	}
}

func TestConsentNonce(t *testing.T) {
	salt := bytes.Repeat([]byte{1}, ConsentSaltSize)
	n := ConsentNonce([]byte("statement"), salt)
	if len(n) != 43 || n == ConsentNonce([]byte("statement2"), salt) || n == ConsentNonce([]byte("statement"), bytes.Repeat([]byte{2}, ConsentSaltSize)) {
		t.Errorf("ConsentNonce %q does not bind statement and salt", n)
	}
}

// TestCommittedArtifactsLeaveTheHashAlone: a record's hash is the same
// with its private artifacts in place, left out (the public form) or
// erased; revealing them checks them against the commitments.
func TestCommittedArtifactsLeaveTheHashAlone(t *testing.T) {
	e := &Evidence{Seq: 1, Method: MethodOIDCEmailVerified, Handle: "alice", From: OIDCFactor("https://id.example.org", "a"),
		To: EmailFactor("alice@example.org"), Signature: []byte("header.payload.sig"), Created: time.UnixMicro(1), PrevHash: ZeroHash()}
	if err := e.makePrivate(bytes.NewReader(bytes.Repeat([]byte{9}, 64)), true); err != nil {
		t.Fatal(err)
	}
	h := e.ComputeHash()
	pub := e.Public()
	if len(pub.Signature) != 0 || pub.To.Value != "" || pub.Artifacts != nil || !bytes.Equal(pub.ComputeHash(), h) {
		t.Fatalf("public form %+v hashes differently or keeps an artifact", pub)
	}
	if bytes.Contains(pub.CanonicalBytes(), []byte("alice@example.org")) || bytes.Contains(pub.CanonicalBytes(), []byte("payload")) {
		t.Error("the entry's bytes hold the email or the token")
	}
	bad := e.Artifacts[1]
	bad.Value = []byte("mallory@example.org")
	if err := pub.Reveal([]Artifact{bad}); !errors.Is(err, ErrArtifactMismatch) {
		t.Errorf("revealing another email: %v", err)
	}
	if err := pub.Reveal(e.Artifacts); err != nil || pub.To.Value != "alice@example.org" || string(pub.Signature) != "header.payload.sig" {
		t.Errorf("reveal: %v, %+v", err, pub)
	}
}
