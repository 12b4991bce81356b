package ssh

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

var challenge = []byte("kith challenge: identity alice, nonce 0123456789abcdef\n")

func TestVerifySSHSIGAcceptsKeygenSignatures(t *testing.T) {
	dir := t.TempDir()
	for _, kt := range keygenTypes {
		key := keygen(t, dir, kt.name, kt.args...)
		want := readKeyFile(t, key.public).Public
		for _, hashAlg := range []string{"sha512", "sha256"} {
			t.Run(kt.name+"/"+hashAlg, func(t *testing.T) {
				armored := keygenSign(t, key, Namespace, challenge, "-O", "hashalg="+hashAlg)
				got, err := VerifySignature(armored, challenge, Namespace)
				if err != nil {
					t.Fatalf("VerifySignature: %v\n%s", err, armored)
				}
				if !bytes.Equal(got.Marshal(), want.Marshal()) {
					t.Errorf("returned key %s, want %s", FingerprintOf(got), FingerprintOf(want))
				}
				if err := VerifySignatureBy(armored, challenge, Namespace, want); err != nil {
					t.Errorf("VerifySignatureBy: %v", err)
				}
				if err := keygenCheck(t, armored, challenge, Namespace); err != nil {
					t.Errorf("ssh-keygen -Y check-novalidate refuses what we accept: %v", err)
				}
				s, err := ParseSignature(armored)
				if err != nil {
					t.Fatal(err)
				}
				if s.HashAlgorithm != hashAlg || s.Namespace != Namespace {
					t.Errorf("parsed hash %q namespace %q, want %q %q", s.HashAlgorithm, s.Namespace, hashAlg, Namespace)
				}
				if kt.name == "rsa" && s.Signature.Format != ssh.KeyAlgoRSASHA512 {
					t.Errorf("ssh-keygen RSA signature format %q, want rsa-sha2-512", s.Signature.Format)
				}
			})
		}
	}
}

// TestVerifySSHSIGAgreesWithKeygen checks each case both with VerifySignature and with
// ssh-keygen -Y check-novalidate: what one accepts the other accepts.
func TestVerifySSHSIGAgreesWithKeygen(t *testing.T) {
	dir := t.TempDir()
	ed := keygen(t, dir, "ed25519", "-t", "ed25519")
	rsaKey := keygen(t, dir, "rsa", "-t", "rsa", "-b", "2048")
	edSig := keygenSign(t, ed, Namespace, challenge)
	rsaSig := keygenSign(t, rsaKey, Namespace, challenge)

	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaSigner, err := ssh.NewSignerFromKey(rsaPriv)
	if err != nil {
		t.Fatal(err)
	}
	edSigner := newEd25519Signer(t)

	certSigner := func() ssh.Signer {
		ca := newEd25519Signer(t)
		cert := &ssh.Certificate{
			Key: edSigner.PublicKey(), CertType: ssh.UserCert, KeyId: "alice",
			ValidPrincipals: []string{"alice"}, ValidBefore: ssh.CertTimeInfinity,
		}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		s, err := ssh.NewCertSigner(cert, edSigner)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()

	swapKey := func(armored []byte, other ssh.PublicKey) []byte {
		s, err := ParseSignature(armored)
		if err != nil {
			t.Fatal(err)
		}
		return buildSSHSIG(t, sshsigSpec{pub: other, hashAlg: s.HashAlgorithm, sign: func([]byte) *ssh.Signature { return s.Signature }}, challenge)
	}
	flipSigBit := func(armored []byte) []byte {
		s, err := ParseSignature(armored)
		if err != nil {
			t.Fatal(err)
		}
		sig := *s.Signature
		sig.Blob = bytes.Clone(sig.Blob)
		sig.Blob[len(sig.Blob)/2] ^= 0x01
		return buildSSHSIG(t, sshsigSpec{pub: s.PublicKey, hashAlg: s.HashAlgorithm, sign: func([]byte) *ssh.Signature { return &sig }}, challenge)
	}

	sha256Spec := signerSpec(t, edSigner, "")
	sha256Spec.hashAlg = "sha256"
	sha1Spec := signerSpec(t, edSigner, "")
	sha1Spec.hashAlg = "sha1"
	reservedSpec := signerSpec(t, edSigner, "")
	reservedSpec.reserved = []byte("future")
	signedReservedSpec := reservedSpec
	signedReservedSpec.signedReserved = []byte("future")

	cases := []struct {
		name      string
		armored   []byte
		message   []byte
		namespace string
		wantErr   error // nil: accepted
		// keygenDiffers marks a documented disagreement with ssh-keygen.
		keygenDiffers bool
	}{
		{name: "ssh-keygen ed25519", armored: edSig, wantErr: nil},
		{name: "ssh-keygen rsa-sha2-512", armored: rsaSig, wantErr: nil},
		{name: "go ed25519", armored: buildSSHSIG(t, signerSpec(t, edSigner, ""), challenge)},
		{name: "go ed25519 sha256", armored: buildSSHSIG(t, sha256Spec, challenge)},
		{name: "go rsa-sha2-256", armored: buildSSHSIG(t, signerSpec(t, rsaSigner, ssh.KeyAlgoRSASHA256), challenge)},
		{name: "go rsa-sha2-512", armored: buildSSHSIG(t, signerSpec(t, rsaSigner, ssh.KeyAlgoRSASHA512), challenge)},
		{name: "go ed25519 certificate", armored: buildSSHSIG(t, signerSpec(t, certSigner, ""), challenge)},
		{name: "go reserved field set, not signed", armored: buildSSHSIG(t, reservedSpec, challenge)},
		{name: "go reserved field set and signed", armored: buildSSHSIG(t, signedReservedSpec, challenge), wantErr: ErrBadSignature},
		{name: "go sk-ssh-ed25519", armored: buildSSHSIG(t, skEd25519Spec(t, 0x01, 7), challenge)},
		{name: "go sk-ecdsa-sha2-nistp256", armored: buildSSHSIG(t, skECDSASpec(t, 0x05, 1<<20), challenge)},
		{name: "tampered message", armored: edSig, message: []byte("kith challenge: identity mallory"), wantErr: ErrBadSignature},
		{name: "wrong namespace", armored: edSig, namespace: "git", wantErr: ErrWrongNamespace},
		{name: "signature names another key", armored: swapKey(edSig, edSigner.PublicKey()), wantErr: ErrBadSignature},
		{name: "signature bit flipped", armored: flipSigBit(rsaSig), wantErr: ErrBadSignature},
		{name: "legacy ssh-rsa SHA-1", armored: buildSSHSIG(t, signerSpec(t, rsaSigner, ssh.KeyAlgoRSA), challenge), wantErr: ErrSignatureAlgorithm},
		{name: "hash sha1", armored: buildSSHSIG(t, sha1Spec, challenge), wantErr: ErrUnsupportedHash},
		// ssh-keygen 9.2 checks no user presence for SSHSIG (neither -Y
		// check-novalidate nor -Y verify); Kith requires it, as sshd does for logins.
		{name: "sk without user presence", armored: buildSSHSIG(t, skEd25519Spec(t, 0x00, 1), challenge), wantErr: ErrUserPresence, keygenDiffers: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, ns := c.message, c.namespace
			if msg == nil {
				msg = challenge
			}
			if ns == "" {
				ns = Namespace
			}
			_, err := VerifySignature(c.armored, msg, ns)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("VerifySignature: %v, want %v", err, c.wantErr)
			}
			keygenErr := keygenCheck(t, c.armored, msg, ns)
			if agree := (err == nil) == (keygenErr == nil); agree == c.keygenDiffers {
				t.Errorf("ours: %v; ssh-keygen -Y check-novalidate: %v; keygenDiffers=%v", err, keygenErr, c.keygenDiffers)
			}
		})
	}
}

func TestVerifySSHSIGRefusesTamperedMessage(t *testing.T) {
	spec := signerSpec(t, newEd25519Signer(t), "")
	armored := buildSSHSIG(t, spec, challenge)
	tampered := bytes.Replace(challenge, []byte("alice"), []byte("alicf"), 1)
	if _, err := VerifySignature(armored, tampered, Namespace); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("got %v, want ErrBadSignature", err)
	}
}

func TestVerifySSHSIGRefusesWrongNamespace(t *testing.T) {
	spec := signerSpec(t, newEd25519Signer(t), "")
	spec.namespace = "git"
	armored := buildSSHSIG(t, spec, challenge)
	_, err := VerifySignature(armored, challenge, Namespace)
	if !errors.Is(err, ErrWrongNamespace) {
		t.Fatalf("got %v, want ErrWrongNamespace", err)
	}
	if !strings.Contains(err.Error(), `"git"`) {
		t.Errorf("error %q does not name the signed namespace", err)
	}
	if _, err := VerifySignature(armored, challenge, ""); !errors.Is(err, ErrWrongNamespace) {
		t.Errorf("empty expected namespace: got %v, want ErrWrongNamespace", err)
	}
}

func TestVerifySSHSIGByRefusesOtherKey(t *testing.T) {
	signer, other := newEd25519Signer(t), newEd25519Signer(t)
	armored := buildSSHSIG(t, signerSpec(t, signer, ""), challenge)
	if err := VerifySignatureBy(armored, challenge, Namespace, signer.PublicKey()); err != nil {
		t.Fatalf("by the signer: %v", err)
	}
	if err := VerifySignatureBy(armored, challenge, Namespace, other.PublicKey()); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("by another key: got %v, want ErrWrongKey", err)
	}
	if err := VerifySignatureBy(armored, challenge, Namespace, nil); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("no expected key: got %v, want ErrWrongKey", err)
	}
}

func TestVerifySSHSIGRefusesMalformedInput(t *testing.T) {
	spec := signerSpec(t, newEd25519Signer(t), "")
	good := buildSSHSIG(t, spec, challenge)
	blob, err := dearmor(good)
	if err != nil {
		t.Fatal(err)
	}
	badMagic := spec
	badMagic.magic = "SSHSIH"
	v2 := spec
	v2.version = 2
	lines := strings.Split(strings.TrimSpace(string(good)), "\n")

	cases := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"empty", nil, ErrMalformedArmor},
		{"garbage", []byte("not a signature at all"), ErrMalformedArmor},
		{"no END line", []byte(strings.Join(lines[:len(lines)-1], "\n")), ErrMalformedArmor},
		{"no BEGIN line", []byte(strings.Join(lines[1:], "\n")), ErrMalformedArmor},
		{"OpenPGP armor", []byte("-----BEGIN PGP SIGNATURE-----\n\nwsBcBAABCAAQ\n-----END PGP SIGNATURE-----\n"), ErrMalformedArmor},
		{"text after END", append(bytes.Clone(good), "trailing\n"...), ErrMalformedArmor},
		{"bad base64", []byte(armorBegin + "\nU1NI!!!U0lH\n" + armorEnd), ErrMalformedArmor},
		{"only armor lines", []byte(armorBegin + "\n" + armorEnd), ErrMalformedArmor},
		{"truncated armor body", []byte(strings.Join(append(lines[:2:2], lines[len(lines)-1]), "\n")), ErrMalformedArmor},
		{"truncated blob", armorSSHSIG(blob[:len(blob)-10]), ErrMalformedSignature},
		{"magic only", armorSSHSIG([]byte("SSHSIG")), ErrMalformedSignature},
		{"trailing bytes in blob", armorSSHSIG(append(bytes.Clone(blob), 0, 0, 0, 0)), ErrMalformedSignature},
		{"wrong magic", buildSSHSIG(t, badMagic, challenge), ErrMalformedSignature},
		{"version 2", buildSSHSIG(t, v2, challenge), ErrUnsupportedVersion},
		{"too large", append([]byte(armorBegin+"\n"), bytes.Repeat([]byte("A"), MaxSignatureSize)...), ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifySignature(c.in, challenge, Namespace)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("got %v, want %v", err, c.wantErr)
			}
		})
	}
}

func TestVerifySSHSIGRefusesDSA(t *testing.T) {
	key := keygenDSA(t, t.TempDir())
	armored := keygenSign(t, key, Namespace, challenge)
	s, err := ParseSignature(armored)
	if err != nil {
		t.Fatalf("a DSA signature should parse: %v", err)
	}
	if s.PublicKey.Type() != "ssh-dss" {
		t.Fatalf("key type %s", s.PublicKey.Type())
	}
	if _, err := VerifySignature(armored, challenge, Namespace); !errors.Is(err, ErrUnsupportedKeyType) {
		t.Fatalf("got %v, want ErrUnsupportedKeyType", err)
	}
}

func TestVerifySSHSIGReportsSecurityKeyFlags(t *testing.T) {
	for _, spec := range []sshsigSpec{skEd25519Spec(t, 0x05, 42), skECDSASpec(t, 0x05, 42)} {
		armored := buildSSHSIG(t, spec, challenge)
		s, err := ParseSignature(armored)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Verify(challenge, Namespace); err != nil {
			t.Fatalf("%s: %v", spec.pub.Type(), err)
		}
		if s.SKFlags != 0x05 || s.SKCounter != 42 {
			t.Errorf("%s: flags 0x%02x counter %d, want 0x05 42", spec.pub.Type(), s.SKFlags, s.SKCounter)
		}
		if _, err := VerifySignature(armored, append(bytes.Clone(challenge), '!'), Namespace); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s tampered: got %v, want ErrBadSignature", spec.pub.Type(), err)
		}
	}
}

func TestVerifySSHSIGRefusesSecurityKeyWithoutUserPresence(t *testing.T) {
	for _, spec := range []sshsigSpec{skEd25519Spec(t, 0x04, 1), skECDSASpec(t, 0x00, 1)} {
		if _, err := VerifySignature(buildSSHSIG(t, spec, challenge), challenge, Namespace); !errors.Is(err, ErrUserPresence) {
			t.Errorf("%s: got %v, want ErrUserPresence", spec.pub.Type(), err)
		}
	}
}

func TestVerifySSHSIGRefusesMismatchedSignatureAlgorithm(t *testing.T) {
	edSigner := newEd25519Signer(t)
	spec := signerSpec(t, edSigner, "")
	inner := spec.sign
	spec.sign = func(data []byte) *ssh.Signature {
		sig := inner(data)
		sig.Format = ssh.KeyAlgoECDSA256
		return sig
	}
	if _, err := VerifySignature(buildSSHSIG(t, spec, challenge), challenge, Namespace); !errors.Is(err, ErrSignatureAlgorithm) {
		t.Fatalf("got %v, want ErrSignatureAlgorithm", err)
	}
}

// The fixture is a real ssh-keygen signature, so the parser is checked against
// OpenSSH's output even where ssh-keygen is not installed.
func TestVerifySSHSIGAcceptsKeygenFixture(t *testing.T) {
	armored, err := os.ReadFile("testdata/ed25519_kith.sshsig")
	if err != nil {
		t.Fatal(err)
	}
	message, err := os.ReadFile("testdata/ed25519_kith.msg")
	if err != nil {
		t.Fatal(err)
	}
	want := readKeyFile(t, "testdata/ed25519.pub")
	if err := VerifySignatureBy(armored, message, Namespace, want.Public); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifySignature(armored, append(message, '.'), Namespace); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered: got %v, want ErrBadSignature", err)
	}
}

func TestParseSSHSIGAcceptsCRLFAndLongLines(t *testing.T) {
	armored := buildSSHSIG(t, signerSpec(t, newEd25519Signer(t), ""), challenge)
	blob, err := dearmor(armored)
	if err != nil {
		t.Fatal(err)
	}
	oneLine := []byte(armorBegin + "\r\n" + base64.StdEncoding.EncodeToString(blob) + "\r\n" + armorEnd + "\r\n")
	crlf := bytes.ReplaceAll(armored, []byte("\n"), []byte("\r\n"))
	for name, in := range map[string][]byte{"one line": oneLine, "CRLF": crlf, "indented": append([]byte("\n  "), armored...)} {
		if _, err := VerifySignature(in, challenge, Namespace); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
