// ed25519batch.go: Ed25519 signature checks, one at a time or as a batch.
// A key's self-signatures are mostly made by one Ed25519 key (user ID
// certifications and subkey bindings), and checking them together costs
// one multi-scalar multiplication whose doublings and public-key term are
// shared, about half the CPU of checking each alone: signature checks were
// three quarters of kith load's CPU.

package pgp

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"errors"

	"filippo.io/edwards25519"
	goed25519 "github.com/ProtonMail/go-crypto/openpgp/ed25519"
	"github.com/ProtonMail/go-crypto/openpgp/eddsa"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// errBadEd25519 is what a failed Ed25519 check says.
var errBadEd25519 = errors.New("Ed25519 verification failure")

// ed25519Parts returns the public key and the 64-byte signature of an
// Ed25519 signature (legacy EdDSA over Ed25519, or RFC 9580's Ed25519) by
// pub, and whether pub and gs are such.
func ed25519Parts(pub *packet.PublicKey, gs *packet.Signature) (key, sig []byte, ok bool, err error) {
	switch pk := pub.PublicKey.(type) {
	case *eddsa.PublicKey:
		if len(pk.X) != ed25519.PublicKeySize || gs.EdDSASigR == nil || gs.EdDSASigS == nil {
			return nil, nil, false, nil
		}
		// R and S are MPIs whose leading zero octets were stripped.
		r, s := gs.EdDSASigR.Bytes(), gs.EdDSASigS.Bytes()
		if len(r) > 32 || len(s) > 32 {
			return nil, nil, true, errBadEd25519
		}
		sig = make([]byte, ed25519.SignatureSize)
		copy(sig[32-len(r):32], r)
		copy(sig[64-len(s):], s)
		return pk.X, sig, true, nil
	case *goed25519.PublicKey:
		if len(pk.Point) != ed25519.PublicKeySize || len(gs.EdSig) != ed25519.SignatureSize {
			return nil, nil, false, nil
		}
		return pk.Point, gs.EdSig, true, nil
	}
	return nil, nil, false, nil
}

// ed25519Batch collects Ed25519 checks to be made together by verify.
// Until verify returns true, nothing it was given is known to be valid.
type ed25519Batch struct {
	sigs []batchedSig
	keys []batchedKey
}

// batchedSig is one signature of a batch.
type batchedSig struct {
	r   *edwards25519.Point
	s   *edwards25519.Scalar
	k   *edwards25519.Scalar // SHA-512(R ‖ A ‖ M) reduced
	key int                  // index in keys
}

// batchedKey is one public key of a batch.
type batchedKey struct {
	enc   []byte
	point *edwards25519.Point
}

// add takes the check of sig by key over msg into the batch. It returns
// false, taking nothing, when the check is one verify would not decide
// as ed25519.Verify does (encodings it would refuse, or accept only in
// a form the batch cannot tell apart): the caller checks those alone.
func (b *ed25519Batch) add(key, msg, sig []byte) bool {
	if len(key) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize || !canonicalPoint(sig[:32]) {
		return false
	}
	s, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	r, err := new(edwards25519.Point).SetBytes(sig[:32])
	if err != nil {
		return false
	}
	ki := -1
	for i := range b.keys {
		if string(b.keys[i].enc) == string(key) {
			ki = i
			break
		}
	}
	if ki < 0 {
		a, err := new(edwards25519.Point).SetBytes(key)
		if err != nil {
			return false
		}
		ki = len(b.keys)
		b.keys = append(b.keys, batchedKey{enc: key, point: a})
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(key)
	h.Write(msg)
	k, err := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
	if err != nil {
		return false
	}
	b.sigs = append(b.sigs, batchedSig{r: r, s: s, k: k, key: ki})
	return true
}

// canonicalPoint reports whether enc is the one encoding of its point, as
// ed25519.Verify requires of R: y below the field's prime, and no sign
// bit on the two points whose x is zero.
func canonicalPoint(enc []byte) bool {
	allFF := func(b []byte) bool {
		for _, c := range b {
			if c != 0xff {
				return false
			}
		}
		return true
	}
	top := enc[31] & 0x7f
	if top == 0x7f && allFF(enc[1:31]) && enc[0] >= 0xec {
		// y ≥ p - 1: y = p - 1 (x = 0) is canonical without its sign
		// bit, anything above is not.
		return enc[0] == 0xec && enc[31]&0x80 == 0
	}
	if enc[31]&0x80 != 0 && enc[0] == 1 && top == 0 {
		for _, c := range enc[1:31] {
			if c != 0 {
				return true
			}
		}
		return false // y = 1, x = 0, sign bit set
	}
	return true
}

// verify reports whether every check in the batch holds: with random
// 128-bit weights z, 8·(Σz·S·B − Σz·R − Σ(Σz·k)·A) is the identity. A
// batch holding an invalid signature fails but with probability 2⁻¹²⁸.
// It checks the cofactored equation, so a signature with a small-order
// component that ed25519.Verify refuses can pass: only the holder of the
// signing key can make one, and only for that key.
func (b *ed25519Batch) verify() bool {
	if len(b.sigs) == 0 {
		return true
	}
	weights := make([]byte, 16*len(b.sigs))
	rand.Read(weights)
	scalars := make([]*edwards25519.Scalar, 0, len(b.sigs)+len(b.keys)+1)
	points := make([]*edwards25519.Point, 0, cap(scalars))
	sumS := edwards25519.NewScalar()
	keyScalars := make([]*edwards25519.Scalar, len(b.keys))
	for i := range keyScalars {
		keyScalars[i] = edwards25519.NewScalar()
	}
	var buf [32]byte
	for i, sg := range b.sigs {
		copy(buf[:16], weights[16*i:16*i+16])
		z, err := new(edwards25519.Scalar).SetCanonicalBytes(buf[:])
		if err != nil {
			return false // cannot happen: z < 2¹²⁸
		}
		sumS.MultiplyAdd(z, sg.s, sumS)
		keyScalars[sg.key].MultiplyAdd(z, sg.k, keyScalars[sg.key])
		// z·(−R) rather than (−z)·R: z has 128 bits and −z mod ℓ 253, so
		// the multiplication adds R's multiples for half as many digits.
		scalars = append(scalars, z)
		points = append(points, new(edwards25519.Point).Negate(sg.r))
	}
	for i, k := range b.keys {
		scalars = append(scalars, new(edwards25519.Scalar).Negate(keyScalars[i]))
		points = append(points, k.point)
	}
	scalars = append(scalars, sumS)
	points = append(points, edwards25519.NewGeneratorPoint())
	check := new(edwards25519.Point).VarTimeMultiScalarMult(scalars, points)
	check.MultByCofactor(check)
	return check.Equal(edwards25519.NewIdentityPoint()) == 1
}

// verifyEd25519 checks an Ed25519 signature over digest now, or, with a
// batch, takes it into the batch when it can.
func verifyEd25519(batch *ed25519Batch, key, digest, sig []byte) error {
	if batch != nil && batch.add(key, digest, sig) {
		return nil
	}
	if !ed25519.Verify(key, digest, sig) {
		return errBadEd25519
	}
	return nil
}
