package pgp

import (
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"testing"
)

// batchCase is signatures by a few keys over distinct messages.
type batchCase struct {
	keys []ed25519.PublicKey
	key  []int // signer of each signature
	msgs [][]byte
	sigs [][]byte
}

func newBatchCase(t testing.TB, rng *rand.Rand, nKeys, nSigs int) *batchCase {
	t.Helper()
	c := &batchCase{}
	var privs []ed25519.PrivateKey
	for range nKeys {
		seed := make([]byte, ed25519.SeedSize)
		for i := range seed {
			seed[i] = byte(rng.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed)
		privs = append(privs, priv)
		c.keys = append(c.keys, priv.Public().(ed25519.PublicKey))
	}
	for i := range nSigs {
		k := i % nKeys
		msg := fmt.Appendf(nil, "digest %d %d", i, rng.Uint64())
		c.key = append(c.key, k)
		c.msgs = append(c.msgs, msg)
		c.sigs = append(c.sigs, ed25519.Sign(privs[k], msg))
	}
	return c
}

// batch adds every signature, failing the test if one is not taken.
func (c *batchCase) batch(t testing.TB) *ed25519Batch {
	t.Helper()
	b := &ed25519Batch{}
	for i := range c.sigs {
		if !b.add(c.keys[c.key[i]], c.msgs[i], c.sigs[i]) {
			t.Fatalf("signature %d not taken into the batch", i)
		}
	}
	return b
}

// TestEd25519BatchFailsOnAnyBadSignature: a batch of valid signatures
// verifies, and changing any one signature's R, S, message or key makes
// it fail, as ed25519.Verify fails that signature alone.
func TestEd25519BatchFailsOnAnyBadSignature(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := newBatchCase(t, rng, 3, 7)
	if !c.batch(t).verify() {
		t.Fatal("a batch of valid signatures failed")
	}
	mutations := map[string]func(c *batchCase, i int){
		"R":       func(c *batchCase, i int) { c.sigs[i][3] ^= 0x10 },
		"S":       func(c *batchCase, i int) { c.sigs[i][40] ^= 0x01 },
		"message": func(c *batchCase, i int) { c.msgs[i] = append([]byte("x"), c.msgs[i]...) },
		"key":     func(c *batchCase, i int) { c.key[i] = (c.key[i] + 1) % len(c.keys) },
	}
	for name, mutate := range mutations {
		for i := range c.sigs {
			m := newBatchCase(t, rand.New(rand.NewPCG(7, 8)), 3, 7)
			mutate(m, i)
			if ed25519.Verify(m.keys[m.key[i]], m.msgs[i], m.sigs[i]) {
				t.Fatalf("%s of signature %d: the mutation left it valid", name, i)
			}
			b := &ed25519Batch{}
			taken := true
			for j := range m.sigs {
				taken = b.add(m.keys[m.key[j]], m.msgs[j], m.sigs[j]) && taken
			}
			if taken && b.verify() {
				t.Errorf("%s of signature %d changed: the batch still verifies", name, i)
			}
		}
	}
}

// TestEd25519BatchRefusesEncodingsVerifyRefuses: signatures ed25519.Verify
// refuses for their encoding alone (S not reduced, R not canonical) are
// not taken into a batch, whose equation could not tell them apart.
func TestEd25519BatchRefusesEncodingsVerifyRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	c := newBatchCase(t, rng, 1, 1)
	key, msg, sig := c.keys[0], c.msgs[0], c.sigs[0]

	// S + L: the same scalar, not reduced.
	l := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 31: 0x10}
	big := append([]byte(nil), sig...)
	carry := 0
	for i := range 32 {
		v := int(big[32+i]) + int(l[i]) + carry
		big[32+i], carry = byte(v), v>>8
	}
	if carry == 0 && !ed25519.Verify(key, msg, big) {
		if (&ed25519Batch{}).add(key, msg, big) {
			t.Error("S + L was taken into the batch")
		}
	}

	for name, r := range map[string][]byte{
		"y = p":               {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"y = 1, sign bit":     {1, 31: 0x80},
		"y = p - 1, sign bit": {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		if canonicalPoint(r) {
			t.Errorf("%s: taken as canonical", name)
		}
		forged := append(append([]byte(nil), r...), sig[32:]...)
		if (&ed25519Batch{}).add(key, msg, forged) {
			t.Errorf("%s: R taken into the batch", name)
		}
	}
	for _, r := range [][]byte{{1}, {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, sig[:32]} {
		if !canonicalPoint(append(r, make([]byte, 32-len(r))...)) {
			t.Errorf("%x: a canonical encoding refused", r)
		}
	}
}

// TestPolicyFindsTheBadSignatureInABatch: a key whose self-signatures are
// checked as one batch, with one of them broken, keeps exactly what
// checking each alone keeps.
func TestPolicyFindsTheBadSignatureInABatch(t *testing.T) {
	e := genEntity(t, "Alice", "alice@example.org", 1)
	packets := mustParse(t, entityBytes(t, e)).Packets()
	good, goodRep := mustApply(t, mustParse(t, entityBytes(t, e)))
	for i, p := range packets {
		if p.Tag != TagSignature {
			continue
		}
		broken := append([]Packet(nil), packets...)
		body := append([]byte(nil), p.Body...)
		body[len(body)-5] ^= 0x04 // in S
		broken[i] = Packet{Tag: TagSignature, Body: body}
		k := NewKey(broken)
		batched, rep, errBatched := Policy{}.Apply(k)
		st, err := structure(broken)
		if err != nil {
			t.Fatal(err)
		}
		alone, repAlone, errAlone := Policy{}.withDefaults().applyChecked(st)
		if (errBatched == nil) != (errAlone == nil) || rep != repAlone {
			t.Fatalf("signature %d broken: batched %v %v, alone %v %v", i, errBatched, rep, errAlone, repAlone)
		}
		if errBatched == nil && string(batched.Bytes()) != string(alone.Bytes()) {
			t.Fatalf("signature %d broken: batched and alone keep different packets", i)
		}
		if errBatched == nil && rep.Count(DropBadSelfSignature) != 1 {
			t.Fatalf("signature %d broken: %d bad self-signatures counted", i, rep.Count(DropBadSelfSignature))
		}
	}
	if goodRep.Count(DropBadSelfSignature) != 0 || len(good.Bytes()) == 0 {
		t.Fatal("the unbroken key lost a self-signature")
	}
}

func BenchmarkEd25519KeyBatch(b *testing.B) {
	c := newBatchCase(b, rand.New(rand.NewPCG(1, 1)), 1, 4)
	for b.Loop() {
		if !c.batch(b).verify() {
			b.Fatal("failed")
		}
	}
}

func BenchmarkEd25519KeyAlone(b *testing.B) {
	c := newBatchCase(b, rand.New(rand.NewPCG(1, 1)), 1, 4)
	for b.Loop() {
		for i := range c.sigs {
			if !ed25519.Verify(c.keys[0], c.msgs[i], c.sigs[i]) {
				b.Fatal("failed")
			}
		}
	}
}
