package ssh

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// goKeyLine returns "ssh-ed25519 BASE64" for a fresh Go-made key.
func goKeyLine(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	pub := newEd25519Signer(t).PublicKey()
	return pub.Type() + " " + base64.StdEncoding.EncodeToString(pub.Marshal()), pub
}

func TestParsePublicKeyFileReadsEveryKeygenType(t *testing.T) {
	dir := t.TempDir()
	keys := []keygenKey{}
	for _, kt := range keygenTypes {
		keys = append(keys, keygen(t, dir, kt.name, kt.args...))
	}
	if ok := t.Run("dsa", func(t *testing.T) { keys = append(keys, keygenDSA(t, dir)) }); !ok {
		t.Fatal("dsa key generation failed")
	}
	for _, key := range keys {
		t.Run(key.name, func(t *testing.T) {
			data, err := os.ReadFile(key.public)
			if err != nil {
				t.Fatal(err)
			}
			k := readKeyFile(t, key.public)
			if k.Comment != key.name+"@kith.test" {
				t.Errorf("comment %q", k.Comment)
			}
			if k.Cert != nil || k.Options != nil {
				t.Errorf("cert %v options %v, want none", k.Cert, k.Options)
			}
			if got := MarshalAuthorizedKey(k); !bytes.Equal(got, data) {
				t.Errorf("rendered\n%s\nwant the file as ssh-keygen wrote it\n%s", got, data)
			}
			want := strings.TrimSpace(string(runTool(t, nil, "ssh-keygen", "-l", "-f", key.public)))
			if got := FingerprintLine(k); got != want {
				t.Errorf("FingerprintLine\n%s\nssh-keygen -lf\n%s", got, want)
			}
		})
	}
}

func TestParseAuthorizedKeysMatchesKeygenOnOptionLines(t *testing.T) {
	dir := t.TempDir()
	var doc bytes.Buffer
	doc.WriteString("# comment line\n\n")
	opts := []string{
		"",
		`no-pty,from="10.0.0.0/8,192.168.1.1" `,
		`command="echo \"hello world\"",no-port-forwarding `,
		"restrict,pty\t",
		`NO-X11-FORWARDING,environment="A=b c" `,
	}
	for i, kt := range keygenTypes {
		key := keygen(t, dir, kt.name, kt.args...)
		data, err := os.ReadFile(key.public)
		if err != nil {
			t.Fatal(err)
		}
		doc.WriteString(opts[i%len(opts)])
		doc.Write(data)
	}
	path := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(path, doc.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(runTool(t, nil, "ssh-keygen", "-l", "-f", path))), "\n")
	keys, err := ParseAuthorizedKeys(doc.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, FingerprintLine(k))
	}
	if !slices.Equal(got, want) {
		t.Errorf("fingerprints\n%s\nssh-keygen -lf\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if keys[1].Options == nil || keys[1].Options[0] != "no-pty" || keys[1].Options[1] != `from="10.0.0.0/8,192.168.1.1"` {
		t.Errorf("options %q", keys[1].Options)
	}
}

func TestParseAuthorizedKeyReadsOptionsAndComments(t *testing.T) {
	line, pub := goKeyLine(t)
	cases := []struct {
		in      string
		options []string
		comment string
	}{
		{line, nil, ""},
		{line + "\n", nil, ""},
		{line + "\r\n", nil, ""},
		{"  \t" + line + "  alice@host  ", nil, "alice@host"},
		{line + " a comment\twith blanks", nil, "a comment\twith blanks"},
		{"no-pty " + line + " c", []string{"no-pty"}, "c"},
		{`from="a b,c",No-Pty,command="x \"y\" z"` + "\t" + line, []string{`from="a b,c"`, "No-Pty", `command="x \"y\" z"`}, ""},
		{`restrict,principals="alice,bob",expiry-time="20300101" ` + line + " # not a comment", []string{"restrict", `principals="alice,bob"`, `expiry-time="20300101"`}, "# not a comment"},
	}
	for _, c := range cases {
		k, err := ParseAuthorizedKey([]byte(c.in))
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !bytes.Equal(k.Public.Marshal(), pub.Marshal()) || !slices.Equal(k.Options, c.options) || k.Comment != c.comment {
			t.Errorf("%q: options %q comment %q, want %q %q", c.in, k.Options, k.Comment, c.options, c.comment)
		}
	}
}

func TestParseAuthorizedKeyRefusesBadLines(t *testing.T) {
	line, pub := goKeyLine(t)
	b64 := base64.StdEncoding.EncodeToString(pub.Marshal())
	truncated := base64.StdEncoding.EncodeToString(pub.Marshal()[:20])
	cases := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"empty", "", ErrNoKey},
		{"blank", " \t ", ErrNoKey},
		{"comment", "# " + line, ErrNoKey},
		{"unknown type", "ssh-foo " + b64, ErrUnknownKeyType},
		{"unknown type after options", "no-pty ssh-foo " + b64, ErrUnknownKeyType},
		{"signature algorithm as type", "rsa-sha2-512 " + b64, ErrUnknownKeyType},
		{"x/crypto-only ML-DSA type", "ssh-mldsa-44 " + b64, ErrUnknownKeyType},
		{"type only", "ssh-ed25519", ErrMalformedKey},
		{"bad base64", "ssh-ed25519 AAAA!!!!", ErrMalformedKey},
		{"truncated blob", "ssh-ed25519 " + truncated, ErrMalformedKey},
		{"type mismatch", "ssh-rsa " + b64, ErrKeyTypeMismatch},
		{"unknown option", "nopty " + line, ErrBadOptions},
		{"option without value", "from " + line, ErrBadOptions},
		{"flag with value", `no-pty="yes" ` + line, ErrBadOptions},
		{"unquoted value", "from=10.0.0.1 " + line, ErrBadOptions},
		{"junk after quoted value", `from="a"b ` + line, ErrBadOptions},
		{"unterminated quote", `command="echo ` + line, ErrBadOptions},
		{"trailing comma", "no-pty, " + line, ErrBadOptions},
		{"empty option", "no-pty,,no-pty " + line, ErrBadOptions},
		{"two lines", line + "\n" + line, ErrMalformedKey},
		{"too large", line + " " + strings.Repeat("x", MaxLineSize), ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := ParseAuthorizedKey([]byte(c.in))
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("got %v, %v; want %v", k, err, c.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "ssh: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestParseAuthorizedKeysNamesTheBadLine(t *testing.T) {
	line, _ := goKeyLine(t)
	doc := line + "\n# fine\n\n" + line + " two\nssh-ed25519 AAAA\n" + line + "\n"
	_, err := ParseAuthorizedKeys([]byte(doc))
	var le *LineError
	if !errors.As(err, &le) || le.Line != 5 || !errors.Is(err, ErrMalformedKey) {
		t.Fatalf("got %v, want a LineError for line 5 wrapping ErrMalformedKey", err)
	}
	keys, err := ParseAuthorizedKeys([]byte("# nothing here\n\n"))
	if err != nil || len(keys) != 0 {
		t.Fatalf("empty document: %v, %v", keys, err)
	}
}

func TestParsePublicKeyFileRefusesOptionsAndSeveralKeys(t *testing.T) {
	line, _ := goKeyLine(t)
	cases := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"options", "no-pty " + line + "\n", ErrNotPublicKeyFile},
		{"two keys", line + "\n" + line + "\n", ErrNotPublicKeyFile},
		{"empty", "\n", ErrNoKey},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", ErrMalformedKey},
		{"RFC 4716 public key", "---- BEGIN SSH2 PUBLIC KEY ----\nAAAA\n---- END SSH2 PUBLIC KEY ----\n", ErrMalformedKey},
	}
	for _, c := range cases {
		if _, err := ParsePublicKeyFile([]byte(c.in)); !errors.Is(err, c.wantErr) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.wantErr)
		}
	}
	if _, err := ParsePublicKeyFile([]byte("\n# mine\n" + line + " me\n\n")); err != nil {
		t.Errorf("blank and comment lines around the key: %v", err)
	}
}

func TestParseAuthorizedKeyRecognisesCertificate(t *testing.T) {
	dir := t.TempDir()
	user := keygen(t, dir, "ed25519", "-t", "ed25519")
	ca := keygen(t, dir, "ca", "-t", "ed25519")
	runTool(t, nil, "ssh-keygen", "-q", "-s", ca.private, "-I", "alice-id", "-n", "alice,bob", "-V", "+1h", user.public)
	certPath := filepath.Join(dir, "id_ed25519-cert.pub")
	k := readKeyFile(t, certPath)
	plain := readKeyFile(t, user.public)
	caKey := readKeyFile(t, ca.public)

	if k.Cert == nil || k.Type() != ssh.CertAlgoED25519v01 {
		t.Fatalf("type %s cert %v, want a certificate", k.Type(), k.Cert)
	}
	if !bytes.Equal(k.Underlying().Marshal(), plain.Public.Marshal()) {
		t.Error("Underlying is not the certified key")
	}
	if !bytes.Equal(k.Cert.SignatureKey.Marshal(), caKey.Public.Marshal()) {
		t.Error("certificate not signed by the CA")
	}
	if !slices.Equal(k.Principals(), []string{"alice", "bob"}) || k.Cert.KeyId != "alice-id" {
		t.Errorf("principals %q key ID %q", k.Principals(), k.Cert.KeyId)
	}
	after, before := k.Validity()
	if d := before.Sub(after); after.IsZero() || d < 59*60e9 || d > 62*60e9 {
		t.Errorf("validity %v to %v, want about an hour", after, before)
	}
	if !k.ValidAt(after.Add(1e9)) || k.ValidAt(before) || k.ValidAt(after.Add(-1e9)) {
		t.Error("ValidAt disagrees with the validity period")
	}
	if k.Fingerprint() != plain.Fingerprint() {
		t.Error("a certificate's fingerprint is its key's, as ssh-keygen prints it")
	}
	want := strings.TrimSpace(string(runTool(t, nil, "ssh-keygen", "-l", "-f", certPath)))
	if got := FingerprintLine(k); got != want {
		t.Errorf("FingerprintLine %q, ssh-keygen -lf %q", got, want)
	}
	data, _ := os.ReadFile(certPath)
	if got := MarshalAuthorizedKey(k); !bytes.Equal(got, data) {
		t.Errorf("rendered\n%s\nwant\n%s", got, data)
	}
}

func TestParseAuthorizedKeyRefusesDSACertificate(t *testing.T) {
	dir := t.TempDir()
	user := keygenDSA(t, dir)
	ca := keygen(t, dir, "ca", "-t", "ed25519")
	runTool(t, nil, "ssh-keygen", "-q", "-s", ca.private, "-I", "id", user.public)
	data, err := os.ReadFile(filepath.Join(dir, "id_dsa-cert.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePublicKeyFile(data); !errors.Is(err, ErrUnsupportedKeyType) {
		t.Fatalf("got %v, want ErrUnsupportedKeyType", err)
	}
}

func TestKeyValidAtPlainKeyAndOpenEndedCertificate(t *testing.T) {
	pub := newEd25519Signer(t).PublicKey()
	if !NewKey(pub, "").ValidAt(time.Now()) {
		t.Error("a plain key is always valid")
	}
	cert := &ssh.Certificate{Key: pub, ValidAfter: 0, ValidBefore: ssh.CertTimeInfinity}
	k := NewKey(cert, "")
	after, before := k.Validity()
	if !after.IsZero() || !before.IsZero() || !k.ValidAt(time.Now()) {
		t.Errorf("open-ended certificate: %v %v", after, before)
	}
	expired := NewKey(&ssh.Certificate{Key: pub, ValidAfter: 0, ValidBefore: 0}, "")
	if _, before := expired.Validity(); before.IsZero() || expired.ValidAt(time.Now()) {
		t.Errorf("a certificate valid before 0 has expired, got before %v", before)
	}
	var nilKey *Key
	if nilKey.ValidAt(time.Now()) || nilKey.Type() != "" || !nilKey.Fingerprint().IsZero() || MarshalAuthorizedKey(nilKey) != nil {
		t.Error("a nil Key should be empty and invalid")
	}
}

func TestMarshalAuthorizedKeysIsSortedAndDeduplicated(t *testing.T) {
	var keys []*Key
	for i := range 5 {
		keys = append(keys, NewKey(newEd25519Signer(t).PublicKey(), strings.Repeat("k", i+1)))
	}
	dup := NewKey(keys[2].Public, "a-duplicate")
	in1 := append(slices.Clone(keys), dup, nil, &Key{})
	in2 := slices.Clone(in1)
	slices.Reverse(in2)
	out1, out2 := MarshalAuthorizedKeys(in1), MarshalAuthorizedKeys(in2)
	if !bytes.Equal(out1, out2) {
		t.Fatalf("order depends on input order:\n%s\n%s", out1, out2)
	}
	if !bytes.HasSuffix(out1, []byte("\n")) {
		t.Error("no trailing newline")
	}
	back, err := ParseAuthorizedKeys(out1)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 5 {
		t.Fatalf("%d lines, want 5 (duplicate dropped)", len(back))
	}
	for i := 1; i < len(back); i++ {
		if back[i-1].Fingerprint().String() >= back[i].Fingerprint().String() {
			t.Errorf("not sorted by fingerprint at line %d", i+1)
		}
	}
	for _, k := range back {
		if bytes.Equal(k.Public.Marshal(), keys[2].Public.Marshal()) && k.Comment != "a-duplicate" {
			t.Errorf("duplicate kept comment %q, want the first in sorted order", k.Comment)
		}
	}
	if out := MarshalAuthorizedKeys(nil); len(out) != 0 {
		t.Errorf("no keys gave %q", out)
	}
}

func TestMarshalAuthorizedKeysIsReadBySshKeygen(t *testing.T) {
	dir := t.TempDir()
	var keys []*Key
	for _, kt := range keygenTypes {
		k := readKeyFile(t, keygen(t, dir, kt.name, kt.args...).public)
		k.Comment = "evil\ncomment\x1b[31m " + kt.name
		keys = append(keys, k)
	}
	doc := MarshalAuthorizedKeys(keys)
	path := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(runTool(t, nil, "ssh-keygen", "-l", "-f", path))), "\n")
	if len(lines) != len(keys) {
		t.Fatalf("ssh-keygen read %d keys of %d:\n%s", len(lines), len(keys), doc)
	}
	if bytes.Count(doc, []byte("\n")) != len(keys) {
		t.Errorf("comment newlines leaked into the document:\n%q", doc)
	}
}

func TestMarshalAuthorizedKeyNeverRendersOptions(t *testing.T) {
	line, _ := goKeyLine(t)
	k, err := ParseAuthorizedKey([]byte(`command="/bin/evil" ` + line + " me"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(MarshalAuthorizedKey(k)), line+" me\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSanitizeComment(t *testing.T) {
	cases := []struct{ in, want string }{
		{"alice@host", "alice@host"},
		{"  two  words\t", "two words"},
		{"line1\nline2\r\nline3", "line1 line2 line3"},
		{"red\x1b[31mtext\x00nul\x7f", "red [31mtext nul"},
		{"sep\u2028par\u2029next\u0085c1", "sep par next c1"},
		{"bidi\u202eevil\u200bzero", "bidievilzero"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"ünïcødé ok", "ünïcødé ok"},
		{strings.Repeat("é", 200), strings.Repeat("é", 128)},
		{"", ""},
	}
	for _, c := range cases {
		if got := SanitizeComment(c.in); got != c.want {
			t.Errorf("SanitizeComment(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Security-key public keys are built in Go (see tools_test.go); ssh-keygen reads and
// certifies them without hardware.
func TestParseAuthorizedKeyReadsSecurityKeys(t *testing.T) {
	dir := t.TempDir()
	ca := keygen(t, dir, "ca", "-t", "ed25519")
	for i, spec := range []sshsigSpec{skEd25519Spec(t, 1, 0), skECDSASpec(t, 1, 0)} {
		typ := spec.pub.Type()
		t.Run(typ, func(t *testing.T) {
			line := MarshalAuthorizedKey(NewKey(spec.pub, "sk@kith.test"))
			k, err := ParseAuthorizedKey(line)
			if err != nil {
				t.Fatal(err)
			}
			if k.Type() != typ || !bytes.Equal(k.Public.Marshal(), spec.pub.Marshal()) {
				t.Fatalf("parsed %s", k.Type())
			}
			path := filepath.Join(dir, fmt.Sprintf("id_sk%d.pub", i))
			if err := os.WriteFile(path, line, 0o600); err != nil {
				t.Fatal(err)
			}
			if got, want := FingerprintLine(k), strings.TrimSpace(string(runTool(t, nil, "ssh-keygen", "-l", "-f", path))); got != want {
				t.Errorf("FingerprintLine %q, ssh-keygen -lf %q", got, want)
			}
			runTool(t, nil, "ssh-keygen", "-q", "-s", ca.private, "-I", "sk", "-n", "alice", path)
			cert := readKeyFile(t, strings.TrimSuffix(path, ".pub")+"-cert.pub")
			if cert.Cert == nil || !bytes.Equal(cert.Underlying().Marshal(), spec.pub.Marshal()) {
				t.Fatalf("certificate %s does not certify the key", cert.Type())
			}
			if got, want := FingerprintLine(cert), strings.TrimSpace(string(runTool(t, nil, "ssh-keygen", "-l", "-f", strings.TrimSuffix(path, ".pub")+"-cert.pub"))); got != want {
				t.Errorf("certificate FingerprintLine %q, ssh-keygen -lf %q", got, want)
			}
		})
	}
}
