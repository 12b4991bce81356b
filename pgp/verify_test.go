package pgp

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
)

func TestVerifyDetachedAndCleartext(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	if err := alice.AddSigningSubkey(sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	bob := genEntity(t, "Bob", "bob@example.org", 2)
	key, _ := mustApply(t, mustParse(t, entityBytes(t, alice)))
	msg := []byte("kith challenge: identity alice, nonce 1234\n")
	cfg := sigConfig(testTime.Add(2 * time.Hour))

	var armoredSig, binSig, bobSig, textSig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&armoredSig, alice, bytes.NewReader(msg), cfg); err != nil {
		t.Fatal(err)
	}
	if err := openpgp.DetachSign(&binSig, alice, bytes.NewReader(msg), cfg); err != nil {
		t.Fatal(err)
	}
	if err := openpgp.DetachSignText(&textSig, alice, bytes.NewReader(msg), cfg); err != nil {
		t.Fatal(err)
	}
	if err := openpgp.DetachSign(&bobSig, bob, bytes.NewReader(msg), cfg); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		msg  []byte
		sig  []byte
		want error
	}{
		{"armored", msg, armoredSig.Bytes(), nil},
		{"binary", msg, binSig.Bytes(), nil},
		{"text signature over CRLF text", bytes.ReplaceAll(msg, []byte("\n"), []byte("\r\n")), textSig.Bytes(), nil},
		{"tampered message", append([]byte("x"), msg...), binSig.Bytes(), ErrBadSignature},
		{"other key's signature", msg, bobSig.Bytes(), ErrUnknownSigner},
		{"not a signature", msg, []byte("hello"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			signer, err := VerifyDetached(key, tc.msg, tc.sig)
			if tc.name == "not a signature" {
				if err == nil {
					t.Fatal("verified garbage")
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && (!signer.Subkey || signer.KeyID != alice.Subkeys[1].PublicKey.KeyId) {
				t.Errorf("signer %+v, want the signing subkey", signer)
			}
		})
	}

	var clear bytes.Buffer
	w, err := clearsign.Encode(&clear, alice.PrivateKey, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("- dashed line\nhello  \n"))
	w.Close()
	text, signer, err := VerifyCleartext(key, clear.Bytes())
	if err != nil || signer.Subkey || !strings.Contains(string(text), "- dashed line") {
		t.Fatalf("cleartext: %q %+v %v", text, signer, err)
	}
	bad := bytes.Replace(clear.Bytes(), []byte("hello"), []byte("jello"), 1)
	if _, _, err := VerifyCleartext(key, bad); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered cleartext: err = %v", err)
	}
}
