// rsa.go: RSA PKCS #1 v1.5 signature verification. crypto/rsa rebuilds its
// Montgomery modulus on every call, and has assembly for its products only
// for 1024-, 1536- and 2048-bit moduli: there it is the faster (2048 bits:
// ~40 µs against ~50 µs), and math/big, whose exponentiation by a small
// exponent reduces by division, is several times faster for every other
// size (4096 bits: ~180 µs against ~650 µs). Signature verification
// involves no secrets, so constant time is not needed.

package pgp

import (
	"bytes"
	"crypto"
	"crypto/fips140"
	"crypto/rsa"
	"errors"
	"math/big"
)

// digestInfo holds the DER DigestInfo prefixes of PKCS #1 v1.5 signatures
// (RFC 8017 section 9.2, RFC 9580 section 5.2.2).
var digestInfo = map[crypto.Hash][]byte{
	crypto.MD5:       {0x30, 0x20, 0x30, 0x0c, 0x06, 0x08, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x05, 0x05, 0x00, 0x04, 0x10},
	crypto.SHA1:      {0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14},
	crypto.RIPEMD160: ripemd160DigestInfo,
	crypto.SHA224:    {0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04, 0x05, 0x00, 0x04, 0x1c},
	crypto.SHA256:    {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20},
	crypto.SHA384:    {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30},
	crypto.SHA512:    {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40},
}

var errRSAVerify = errors.New("RSA verification failure")

// verifyRSA checks a PKCS #1 v1.5 signature sig (big-endian, possibly
// shorter than the modulus) over digest made with hash h.
func verifyRSA(pub *rsa.PublicKey, h crypto.Hash, digest, sig []byte) error {
	prefix, ok := digestInfo[h]
	if !ok {
		return errors.New("no PKCS #1 DigestInfo for hash")
	}
	return verifyRSAPrefixed(pub, prefix, digest, sig)
}

// verifyRSAPrefixed checks a PKCS #1 v1.5 signature over prefix||digest.
func verifyRSAPrefixed(pub *rsa.PublicKey, prefix, digest, sig []byte) error {
	if pub == nil || pub.N == nil || pub.N.Sign() <= 0 || pub.E < 3 || pub.E > maxRSAExponent || pub.N.BitLen() > maxRSABits {
		return errRSAVerify
	}
	k := (pub.N.BitLen() + 7) / 8
	tLen := len(prefix) + len(digest)
	if len(sig) > k || k < tLen+11 {
		return errRSAVerify
	}
	if byCryptoRSA(pub) {
		return verifyRSAByCryptoRSA(pub, k, prefix, digest, sig)
	}
	return verifyRSAByBig(pub, k, prefix, digest, sig)
}

// byCryptoRSA reports whether crypto/rsa checks pub's signatures faster
// than math/big, and answers as verifyRSAByBig does: a modulus of the
// sizes its assembly serves (16, 24 or 32 words of 64 bits, 1024 bits at
// least, as it refuses smaller keys), odd, with an odd exponent (it
// refuses others), outside FIPS 140 mode (which refuses more).
func byCryptoRSA(pub *rsa.PublicKey) bool {
	n := pub.N.BitLen()
	switch (n + 63) / 64 {
	case 16, 24, 32:
	default:
		return false
	}
	return n >= 1024 && pub.N.Bit(0) == 1 && pub.E&1 == 1 && !fips140.Enabled()
}

// verifyRSAByCryptoRSA is verifyRSAPrefixed by crypto/rsa, for the keys
// byCryptoRSA picks; k is the modulus's length in bytes.
func verifyRSAByCryptoRSA(pub *rsa.PublicKey, k int, prefix, digest, sig []byte) error {
	if len(sig) < k {
		// OpenPGP leaves out the leading zeros; crypto/rsa wants k bytes.
		sig = append(make([]byte, k-len(sig), k), sig...)
	}
	signed := append(append(make([]byte, 0, len(prefix)+len(digest)), prefix...), digest...)
	if rsa.VerifyPKCS1v15(pub, crypto.Hash(0), signed, sig) != nil {
		return errRSAVerify
	}
	return nil
}

// verifyRSAByBig is verifyRSAPrefixed by math/big; k is the modulus's
// length in bytes, and sig at most k bytes.
func verifyRSAByBig(pub *rsa.PublicKey, k int, prefix, digest, sig []byte) error {
	tLen := len(prefix) + len(digest)
	s := new(big.Int).SetBytes(sig)
	if s.Cmp(pub.N) >= 0 {
		return errRSAVerify
	}
	em := new(big.Int).Exp(s, big.NewInt(int64(pub.E)), pub.N).FillBytes(make([]byte, k))
	// EM = 0x00 0x01 PS(0xff...) 0x00 DigestInfo digest
	ps := k - tLen - 3
	if em[0] != 0 || em[1] != 1 || em[2+ps] != 0 ||
		!bytes.Equal(em[3+ps:3+ps+len(prefix)], prefix) || !bytes.Equal(em[3+ps+len(prefix):], digest) {
		return errRSAVerify
	}
	for _, c := range em[2 : 2+ps] {
		if c != 0xff {
			return errRSAVerify
		}
	}
	return nil
}
