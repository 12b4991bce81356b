// budget.go: bounded verification work. Checking a signature is the one
// thing the policy does whose cost an uploader chooses (the key's
// algorithm and size, how many signatures claim to be self-signatures),
// so every check is priced before it is made and paid from the key's
// budget, and, when the caller gives one, from a budget its keys share
// (one upload request's). What a spent budget leaves unchecked is dropped
// (DropVerificationBudget), never kept unverified.

package pgp

import (
	//lint:ignore SA1019 DSA keys are part of OpenPGP; go-crypto uses crypto/dsa too.
	"crypto/dsa"
	"crypto/rsa"
	"errors"
	"math/bits"
	"sync/atomic"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// ErrVerifyBudget: the policy stopped checking a key's signatures because
// its verification budget (Policy.MaxVerifyWork, Policy.Budget) was
// spent, and what it could check does not make the key acceptable. A key
// refused for it also matches ErrNoSelfSignature.
var ErrVerifyBudget = errors.New("signature verification budget spent")

// errNoBudget is what a check returns that was not made for want of
// budget.
var errNoBudget = errors.New("verification budget spent")

// Verification work is counted in units of one multiplication modulo a
// 1024-bit number (about 0.35 µs of one core here). Measured on this
// code: an RSA-2048 check with exponent 65537 is 68 units (about 25 µs),
// RSA-4096 272, RSA-16384 4352; Ed25519 about 128; the slow curves
// (brainpool, secp256k1, P-521, which go-crypto computes with generic
// big-number arithmetic) up to 32768, some 10 ms a check. RFC 9980's
// post-quantum algorithms are priced as multiples of an Ed25519 check,
// measured against one in the same run (go-crypto's checks, on circl): a
// composite ML-DSA-65+Ed25519 check costs about 2 Ed25519 checks,
// ML-DSA-87+Ed448 up to 6, SLH-DSA-SHAKE-128s 20, SLH-DSA-SHAKE-256s 48
// and SLH-DSA-SHAKE-128f, which trades signature size for verification
// work, 72 (9,216 units, about 3 ms).
const (
	// DefaultMaxVerifyWork is the work the policy spends on one key
	// (about 90 ms): some 3,800 RSA-2048, 960 RSA-4096 or 60 RSA-16384
	// checks. The most expensive key of the Debian keyrings, an
	// RSA-10240 key with 23 user IDs, needs 44,472 units, a sixth of it
	// (TestDebianKeysNeedLittleVerifyWork); a key made of bad
	// self-signatures stops costing here, and a signature bomb of 2 MiB
	// costs under 0.1 CPU-seconds (BenchmarkSignatureBomb).
	DefaultMaxVerifyWork = 1 << 18
	// DefaultMaxBadSelfSignatures is how many self-signatures of one
	// component (user ID, user attribute, subkey, or the primary key's
	// direct signatures) may fail before the rest, older ones, go
	// unchecked. The Debian keyrings have no component with more than 7
	// self-signature candidates at all, failing or not; a component under
	// a flood of forged self-signatures costs 8 checks, and the others of
	// the key keep their budget.
	DefaultMaxBadSelfSignatures = 8
	// DefaultMaxUploadVerifyWork is the work one upload request's keys
	// may share (VerifyBudget): twice a key's, about 0.2 s of one core,
	// so that many small keys in one request cost no more than a couple
	// of large ones. A hundred typical keys fit in it many times over.
	DefaultMaxUploadVerifyWork = 2 * DefaultMaxVerifyWork
)

// Limits on RSA keys for verification, chosen from the keys that exist.
const (
	// maxRSABits: gpg makes keys of up to 4096 bits, and of up to 16384
	// with --enable-large-rsa; the Debian keyrings hold keys of 8192 and
	// 10240 bits, the pool some of 16384. Beyond that a single check
	// costs tens of milliseconds and no implementation makes such keys.
	maxRSABits = 16384
	// maxRSAExponent: public exponents in use are 3, 17, 35, 41, 257 and
	// 65537 (the Debian keyrings hold 35, 41, 257 and 65537, gpg has used
	// 65537 for twenty years, PGP 2 used 17). An exponent's bits each cost
	// a squaring and its set bits a multiplication, so 2^24-1, the
	// largest go-crypto reads, makes a check nearly three times dearer
	// than 65537. Keys with exponents of more than 17 bits are refused
	// (ErrUnsupportedKey for a primary key; a subkey is kept but never
	// checks a signature).
	maxRSAExponent = 1<<17 - 1
)

// VerifyBudget is an amount of verification work that the keys checked
// with it share: a frontend gives one to every key of an upload request
// (Policy.Budget), for the policy and for the merge with the stored key,
// so a request of many keys costs no more than the budget. It is safe
// for concurrent use.
type VerifyBudget struct {
	left atomic.Int64
}

// NewVerifyBudget returns a budget of work units (see
// DefaultMaxUploadVerifyWork).
func NewVerifyBudget(work int64) *VerifyBudget {
	b := &VerifyBudget{}
	b.left.Store(work)
	return b
}

// Left returns the work left (0 when spent).
func (b *VerifyBudget) Left() int64 { return max(0, b.left.Load()) }

// take takes units from the budget if it holds them.
func (b *VerifyBudget) take(units int64) bool {
	for {
		left := b.left.Load()
		if left < units {
			return false
		}
		if b.left.CompareAndSwap(left, left-units) {
			return true
		}
	}
}

// keyBudget is the work left for one key; a nil keyBudget is unlimited.
type keyBudget struct {
	left   int64
	shared *VerifyBudget // nil: none
}

// newKeyBudget returns the budget of one key under p.
func (p Policy) newKeyBudget() *keyBudget {
	return &keyBudget{left: int64(p.MaxVerifyWork), shared: p.Budget}
}

// spend pays for a check of the given cost, or reports that it may not
// be made.
func (b *keyBudget) spend(units int64) bool {
	if b == nil {
		return true
	}
	if units > b.left || (b.shared != nil && !b.shared.take(units)) {
		return false
	}
	b.left -= units
	return true
}

// verifyWork prices one signature check by pub, in work units.
func verifyWork(pub *packet.PublicKey) int64 {
	switch k := pub.PublicKey.(type) {
	case *rsa.PublicKey:
		return rsaWork(k.N.BitLen(), k.E)
	case *dsa.PublicKey:
		// Two exponentiations with exponents the size of q, about 1.25
		// multiplications per exponent bit with a windowed method.
		w := int64(k.P.BitLen()+1023) / 1024
		return 5 * int64(k.Q.BitLen()) * w * w / 2
	}
	switch pub.PubKeyAlgo {
	case packet.PubKeyAlgoEd25519:
		return 128
	case packet.PubKeyAlgoEd448:
		return 512
	case packet.PubKeyAlgoMldsa65Ed25519:
		return 2 * 128
	case packet.PubKeyAlgoMldsa87Ed448:
		return 6 * 128
	case packet.PubKeyAlgoSlhdsaShake128s:
		return 20 * 128
	case packet.PubKeyAlgoSlhdsaShake256s:
		return 48 * 128
	case packet.PubKeyAlgoSlhdsaShake128f:
		return 72 * 128
	case packet.PubKeyAlgoEdDSA, packet.PubKeyAlgoECDSA:
		c, err := pub.Curve()
		if err != nil {
			return slowestCheck
		}
		switch c {
		case packet.Curve25519, packet.CurveNistP256:
			return 128
		case packet.Curve448:
			return 512
		case packet.CurveNistP384:
			return 2048
		case packet.CurveNistP521, packet.CurveSecP256k1, packet.CurveBrainpoolP256, packet.CurveBrainpoolP384:
			return 8192
		}
	}
	return slowestCheck
}

// slowestCheck prices a check whose cost is not known: as the slowest
// known (brainpoolP512r1).
const slowestCheck = 32768

// rsaWork prices an RSA check with a modulus of n bits and exponent e:
// one multiplication per bit of e after the first and per set bit after
// the first, each costing the square of the modulus size in 1024-bit
// words.
func rsaWork(n, e int) int64 {
	w := int64(n+1023) / 1024
	steps := int64(bits.Len64(uint64(e)) - 1 + bits.OnesCount64(uint64(e)) - 1)
	return max(1, steps) * w * w
}
