package pgp

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"math/big"
	"testing"
)

func TestVerifyRSAAgreesWithCryptoRSA(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []crypto.Hash{crypto.SHA1, crypto.SHA224, crypto.SHA256, crypto.SHA384, crypto.SHA512} {
		hh := h.New()
		hh.Write([]byte("message"))
		digest := hh.Sum(nil)
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, h, digest)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifyRSA(&key.PublicKey, h, digest, sig); err != nil {
			t.Errorf("%v: valid signature rejected: %v", h, err)
		}
		bad := append([]byte(nil), sig...)
		bad[len(bad)/2] ^= 1
		if verifyRSA(&key.PublicKey, h, digest, bad) == nil {
			t.Errorf("%v: corrupted signature accepted", h)
		}
		if verifyRSA(&key.PublicKey, crypto.SHA1, digest[:20], sig) == nil && h != crypto.SHA1 {
			t.Errorf("%v: signature accepted under another hash", h)
		}
	}
}

// rsaTestKey makes an RSA key of bits bits with exponent e with math/big,
// so that sizes crypto/rsa refuses (under 1024 bits) can be made too, and
// returns its public key and a signing function (em^d mod n, big-endian
// without leading zeros, as OpenPGP stores it).
func rsaTestKey(t testing.TB, bits, e int) (*rsa.PublicKey, func(em []byte) []byte) {
	t.Helper()
	one := big.NewInt(1)
	E := big.NewInt(int64(e))
	for {
		p, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			t.Fatal(err)
		}
		q, err := rand.Prime(rand.Reader, bits-bits/2)
		if err != nil {
			t.Fatal(err)
		}
		n := new(big.Int).Mul(p, q)
		phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
		d := new(big.Int).ModInverse(E, phi)
		if n.BitLen() != bits || d == nil {
			continue
		}
		return &rsa.PublicKey{N: n, E: e}, func(em []byte) []byte {
			return new(big.Int).Exp(new(big.Int).SetBytes(em), d, n).Bytes()
		}
	}
}

// pkcs1EM is the PKCS #1 v1.5 encoding of prefix||digest in k bytes.
func pkcs1EM(k int, prefix, digest []byte) []byte {
	em := make([]byte, k)
	em[1] = 1
	for i := 2; i < k-len(prefix)-len(digest)-1; i++ {
		em[i] = 0xff
	}
	copy(em[k-len(prefix)-len(digest):], prefix)
	copy(em[k-len(digest):], digest)
	return em
}

// TestVerifyRSAAnswersAsMathBigForEverySize: whichever way a key's
// signatures are checked (crypto/rsa for the sizes it is faster at,
// math/big for the rest, among them keys crypto/rsa refuses), every
// signature, good or bad, is judged as math/big judges it.
func TestVerifyRSAAnswersAsMathBigForEverySize(t *testing.T) {
	prefix := digestInfo[crypto.SHA256]
	for _, c := range []struct {
		bits, e int
		crypto  bool
	}{
		{512, 65537, false}, {768, 3, false}, {1024, 65537, true}, {1024, 17, true}, {1280, 65537, false},
		{1536, 41, true}, {2048, 65537, true}, {2048, 35, true},
	} {
		pub, sign := rsaTestKey(t, c.bits, c.e)
		if got := byCryptoRSA(pub); got != c.crypto {
			t.Errorf("%d bits, e=%d: checked by crypto/rsa %v, want %v", c.bits, c.e, got, c.crypto)
		}
		k := (c.bits + 7) / 8
		digest := sha256.Sum256([]byte(fmt.Sprint("message ", c.bits)))
		good := sign(pkcs1EM(k, prefix, digest[:]))
		// good in k bytes: a signature whose top byte is zero (one in
		// ~200) comes out of big.Int shorter.
		full := make([]byte, k)
		copy(full[k-len(good):], good)
		badPad := pkcs1EM(k, prefix, digest[:])
		badPad[5] = 0xfe
		cases := []struct {
			name   string
			prefix []byte
			sig    []byte
			valid  bool
		}{
			{"valid", prefix, good, true},
			{"corrupted", prefix, append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1), false},
			{"other DigestInfo", digestInfo[crypto.SHA512][:len(prefix)], good, false},
			{"bad padding", prefix, sign(badPad), false},
			{"value of the modulus", prefix, pub.N.Bytes(), false},
			{"value above the modulus", prefix, new(big.Int).Add(pub.N, big.NewInt(5)).Bytes(), false},
			{"zero", prefix, []byte{0}, false},
			{"longer than the modulus", prefix, append([]byte{0}, full...), false},
		}
		// A valid signature with a leading zero byte, which OpenPGP
		// leaves out.
		for i := 0; i < 4000; i++ {
			d := sha256.Sum256([]byte(fmt.Sprint("short ", i)))
			if s := sign(pkcs1EM(k, prefix, d[:])); len(s) < k {
				cases = append(cases, struct {
					name   string
					prefix []byte
					sig    []byte
					valid  bool
				}{"shorter than the modulus", prefix, s, true})
				digest = d
				break
			}
		}
		if cases[len(cases)-1].name != "shorter than the modulus" {
			t.Fatalf("%d bits: no signature shorter than the modulus in 4000 tries", c.bits)
		}
		for _, tc := range cases {
			dg := sha256.Sum256([]byte(fmt.Sprint("message ", c.bits)))
			if tc.name == "shorter than the modulus" {
				dg = digest
			}
			got := verifyRSAPrefixed(pub, tc.prefix, dg[:], tc.sig) == nil
			byBig := len(tc.sig) <= k && verifyRSAByBig(pub, k, tc.prefix, dg[:], tc.sig) == nil
			if got != tc.valid || byBig != tc.valid {
				t.Errorf("%d bits, e=%d, %s: accepted %v, by math/big %v; want %v", c.bits, c.e, tc.name, got, byBig, tc.valid)
			}
		}
	}
	// Keys crypto/rsa refuses outright stay with math/big.
	even := &rsa.PublicKey{N: new(big.Int).Lsh(big.NewInt(1), 2047), E: 65537}
	evenE := &rsa.PublicKey{N: new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 2047), big.NewInt(1)), E: 4}
	for _, pub := range []*rsa.PublicKey{even, evenE} {
		if byCryptoRSA(pub) {
			t.Errorf("modulus %d bits (even: %v), e=%d checked by crypto/rsa, which refuses it", pub.N.BitLen(), pub.N.Bit(0) == 0, pub.E)
		}
	}
}

// BenchmarkVerifyRSA checks a PKCS #1 v1.5 signature of each common key
// size as verifyRSA does (kith) and by math/big alone (math-big).
func BenchmarkVerifyRSA(b *testing.B) {
	for _, bits := range []int{1024, 2048, 3072, 4096} {
		key, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			b.Fatal(err)
		}
		digest := sha256.Sum256([]byte("message"))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
		if err != nil {
			b.Fatal(err)
		}
		pub := &key.PublicKey
		prefix := digestInfo[crypto.SHA256]
		k := (bits + 7) / 8
		b.Run(fmt.Sprintf("bits=%d/kith", bits), func(b *testing.B) {
			for b.Loop() {
				if verifyRSAPrefixed(pub, prefix, digest[:], sig) != nil {
					b.Fatal("valid signature rejected")
				}
			}
		})
		b.Run(fmt.Sprintf("bits=%d/math-big", bits), func(b *testing.B) {
			for b.Loop() {
				if verifyRSAByBig(pub, k, prefix, digest[:], sig) != nil {
					b.Fatal("valid signature rejected")
				}
			}
		})
	}
}
