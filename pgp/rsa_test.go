package pgp

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
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
