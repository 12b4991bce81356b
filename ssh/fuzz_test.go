package ssh

import (
	"bytes"
	"os"
	"testing"
)

// FuzzParseSSHSIG checks that no input makes the SSHSIG parser or verifier panic, and
// that whatever verifies is by the key the signature names. The seeds (run by every
// go test) are valid signatures of each kind Go can make here, a real ssh-keygen one,
// and broken ones.
func FuzzParseSSHSIG(f *testing.F) {
	edSigner := newEd25519Signer(f)
	seeds := [][]byte{
		buildSSHSIG(f, signerSpec(f, edSigner, ""), challenge),
		buildSSHSIG(f, skEd25519Spec(f, 0x01, 1), challenge),
		buildSSHSIG(f, skECDSASpec(f, 0x01, 1), challenge),
		[]byte(armorBegin + "\n" + armorEnd + "\n"),
		[]byte(armorBegin + "\nU1NIU0lHAAAAAQ==\n" + armorEnd + "\n"),
		[]byte("garbage"),
	}
	if fixture, err := os.ReadFile("testdata/ed25519_kith.sshsig"); err == nil {
		seeds = append(seeds, fixture)
	}
	for _, s := range seeds {
		f.Add(s, challenge)
	}
	f.Fuzz(func(t *testing.T, armored, message []byte) {
		s, err := ParseSignature(armored)
		if err != nil {
			if s != nil {
				t.Fatal("non-nil result with an error")
			}
			return
		}
		if s.PublicKey == nil || s.Signature == nil {
			t.Fatal("parsed signature without key or signature")
		}
		_ = FingerprintLine(NewKey(s.PublicKey, ""))
		if err := s.Verify(message, Namespace); err == nil {
			pub, err := VerifySignature(armored, message, Namespace)
			if err != nil || !bytes.Equal(pub.Marshal(), s.PublicKey.Marshal()) {
				t.Fatalf("Verify accepted but VerifySignature: %v", err)
			}
		}
	})
}

// FuzzParseAuthorizedKeys checks that no input makes the authorized_keys parser panic,
// and that every key it reads renders to a line that parses back to the same key and
// sanitised comment, on one line.
func FuzzParseAuthorizedKeys(f *testing.F) {
	line, _ := goKeyLineF(f)
	for _, s := range []string{
		line + " alice@host\n",
		`no-pty,from="10.0.0.0/8",command="echo \"hi\"" ` + line + " c\n",
		"# comment\n\n" + line + "\r\n" + line + "\tx\ty\n",
		"ssh-foo AAAA\n",
		`command="unterminated ` + line,
		"-----BEGIN OPENSSH PRIVATE KEY-----\n",
	} {
		f.Add([]byte(s))
	}
	if pub, err := os.ReadFile("testdata/ed25519.pub"); err == nil {
		f.Add(pub)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseAuthorizedKeys(data)
		if err != nil {
			return
		}
		for _, k := range keys {
			out := MarshalAuthorizedKey(k)
			if bytes.Count(out, []byte("\n")) != 1 || !bytes.HasSuffix(out, []byte("\n")) {
				t.Fatalf("rendered %q is not one line", out)
			}
			back, err := ParseAuthorizedKey(out)
			if err != nil {
				t.Fatalf("rendered %q does not parse: %v", out, err)
			}
			if !bytes.Equal(back.Public.Marshal(), k.Public.Marshal()) || back.Comment != SanitizeComment(k.Comment) {
				t.Fatalf("round trip changed the key or comment: %q", out)
			}
			_ = FingerprintLine(k)
		}
		_ = MarshalAuthorizedKeys(keys)
	})
}

// goKeyLineF is goKeyLine for a fuzz target's setup.
func goKeyLineF(f *testing.F) (string, []byte) {
	pub := newEd25519Signer(f).PublicKey()
	k := MarshalAuthorizedKey(NewKey(pub, ""))
	return string(bytes.TrimSuffix(k, []byte("\n"))), pub.Marshal()
}
