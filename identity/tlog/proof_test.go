package tlog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity/tlog"
)

// rfc6962Root recomputes a root from a leaf and its inclusion path as RFC
// 9162 (section 2.1.3.2) verifies one: written apart from x/mod, so that
// the hash order of the tlog-proof lines is checked against the RFC and
// not against the code that made them.
func rfc6962Root(index, size int64, leaf []byte, path [][]byte) []byte {
	node := func(l, r []byte) []byte {
		h := sha256.New()
		h.Write([]byte{1})
		h.Write(l)
		h.Write(r)
		return h.Sum(nil)
	}
	lh := sha256.Sum256(append([]byte{0}, leaf...))
	fn, sn := index, size-1
	r := lh[:]
	for _, p := range path {
		if sn == 0 {
			return nil
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return nil
	}
	return r
}

// TestProverMakesTlogProofs: the server's proofs, from its stored hashes,
// round-trip through the tlog-proof text, verify against the signed
// checkpoint, lead to its root by RFC 9162's own algorithm, and fail for
// another entry, a changed hash, or an index out of the tree.
func TestProverMakesTlogProofs(t *testing.T) {
	ctx := context.Background()
	s := newServed(t)
	appendRecords(t, s.st, 300)
	old := s.checkpoint(t)
	appendRecords(t, s.st, 261)
	now := s.checkpoint(t)
	recs, err := s.st.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tlog.NewProver(ctx, s.st)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size() != now.Size {
		t.Fatalf("prover of size %d, checkpoint %d", p.Size(), now.Size)
	}
	for _, i := range []int64{0, 1, 255, 256, 299, 300, 560} {
		proof, err := p.Inclusion(ctx, i)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		text := proof.Marshal()
		if !bytes.HasPrefix(text, []byte("c2sp.org/tlog-proof@v1\nindex ")) {
			t.Fatalf("proof text starts %q", text[:40])
		}
		parsed, err := tlog.ParseProof(text)
		if err != nil {
			t.Fatalf("entry %d: %v\n%s", i, err, text)
		}
		cp, err := tlog.OpenCheckpoint(parsed.Checkpoint, s.log.Key().VerifierKey())
		if err != nil {
			t.Fatal(err)
		}
		entry := recs[i].ComputeHash()
		if err := parsed.Check(cp, entry); err != nil {
			t.Errorf("entry %d: %v", i, err)
		}
		var path [][]byte
		for _, h := range parsed.Hashes {
			path = append(path, h[:])
		}
		if root := rfc6962Root(i, cp.Size, entry, path); !bytes.Equal(root, cp.Root[:]) {
			t.Errorf("entry %d: the RFC 9162 algorithm does not reach the root from the proof", i)
		}
		if parsed.Check(cp, recs[(i+1)%561].ComputeHash()) == nil {
			t.Errorf("entry %d's proof holds for another record", i)
		}
		if len(parsed.Hashes) > 0 {
			bad := parsed
			bad.Hashes = append([]xtlog.Hash(nil), parsed.Hashes...)
			bad.Hashes[0][0] ^= 1
			if bad.Check(cp, entry) == nil {
				t.Errorf("entry %d: a changed proof hash verifies", i)
			}
		}
	}
	if _, err := p.Inclusion(ctx, now.Size); err == nil {
		t.Error("a proof of an entry beyond the checkpoint")
	}
	hashes, err := p.Consistency(ctx, old.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckConsistency(hashes, old, now); err != nil {
		t.Fatal(err)
	}
	forked := old
	forked.Root[0] ^= 1
	if tlog.CheckConsistency(hashes, forked, now) == nil {
		t.Fatal("a forked checkpoint is consistent")
	}
}

// TestParseProofRefusesMalformed: the parser takes the spec's format only.
func TestParseProofRefusesMalformed(t *testing.T) {
	cp := "kith.test/log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— kith.test/log abc=\n"
	h := "gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=\n"
	good := "c2sp.org/tlog-proof@v1\nextra aGk=\nindex 7\n" + h + "\n" + cp
	p, err := tlog.ParseProof([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if p.Index != 7 || string(p.Extra) != "hi" || len(p.Hashes) != 1 || string(p.Checkpoint) != cp {
		t.Fatalf("parsed %+v", p)
	}
	if got := string(p.Marshal()); got != good {
		t.Fatalf("Marshal = %q, want %q", got, good)
	}
	for name, text := range map[string]string{
		"header":        "c2sp.org/tlog-proof@v2\nindex 7\n" + h + "\n" + cp,
		"no index":      "c2sp.org/tlog-proof@v1\n" + h + "\n" + cp,
		"leading zero":  "c2sp.org/tlog-proof@v1\nindex 07\n" + h + "\n" + cp,
		"negative":      "c2sp.org/tlog-proof@v1\nindex -1\n" + h + "\n" + cp,
		"short hash":    "c2sp.org/tlog-proof@v1\nindex 7\naGk=\n\n" + cp,
		"no checkpoint": "c2sp.org/tlog-proof@v1\nindex 7\n" + h,
	} {
		if _, err := tlog.ParseProof([]byte(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
