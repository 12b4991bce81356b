package ssh

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// testCA is a CA with a fixed seed.
func testCA(t testing.TB, b byte) *CA {
	t.Helper()
	ca, err := NewCA(bytes.Repeat([]byte{b}, CASeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// writeCert writes a certificate blob as a -cert.pub line and returns the
// file's path.
func writeCert(t testing.TB, dir, name string, blob []byte) string {
	t.Helper()
	pub, err := ssh.ParsePublicKey(blob)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+"-cert.pub")
	if err := os.WriteFile(path, ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCASignsCertificatesSSHKeygenReads: a certificate the CA signs is
// what ssh-keygen -L shows: serial, key ID, principals, validity,
// options, and the CA as signer; ParseUserCertificate reads it back and
// refuses it once a byte changes.
func TestCASignsCertificatesSSHKeygenReads(t *testing.T) {
	tool := testkit.Tool(t, "ssh-keygen")
	dir := t.TempDir()
	user := keygen(t, dir, "ed25519", "-t", "ed25519")
	key := readKeyFile(t, user.public)
	ca := testCA(t, 1)
	after := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	blob, err := ca.SignUser(UserCertificate{
		Key: key.Public.Marshal(), Serial: 42, KeyID: "kith handle=nora record=42",
		Principals: []string{"nora", "deploy"}, ValidAfter: after, ValidBefore: after.Add(16 * time.Hour),
		CriticalOptions: map[string]string{"source-address": "127.0.0.1/32"},
		Extensions:      map[string]string{"permit-pty": ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := writeCert(t, dir, "id_ed25519", blob)
	out := string(runTool(t, nil, tool, "-L", "-f", path))
	caFP := FingerprintOf(ca.PublicKey()).String()
	for _, want := range []string{"Type: ssh-ed25519-cert-v01@openssh.com user certificate", "Serial: 42",
		`Key ID: "kith handle=nora record=42"`, "Signing CA: ED25519 " + caFP, "nora", "deploy",
		"source-address 127.0.0.1/32", "permit-pty", "2030-01-02T"} {
		if !strings.Contains(out, want) {
			t.Errorf("ssh-keygen -L lacks %q:\n%s", want, out)
		}
	}
	cert, err := ParseUserCertificate(blob)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Serial != 42 || !SameKey(cert.Key, key.Public) || !SameKey(cert.SignatureKey, ca.PublicKey()) {
		t.Errorf("read back: serial %d, key %v, CA %v", cert.Serial, cert.Key, cert.SignatureKey)
	}
	if a, b := CertificateValidity(cert); !a.Equal(after) || !b.Equal(after.Add(16*time.Hour)) {
		t.Errorf("validity %s to %s", a, b)
	}
	i := bytes.Index(blob, []byte("handle=nora"))
	bad := bytes.Clone(blob)
	bad[i+7] = 'x'
	if _, err := ParseUserCertificate(bad); !errors.Is(err, ErrBadCertificate) {
		t.Errorf("a changed key ID: %v", err)
	}
	if _, err := ParseUserCertificate(key.Public.Marshal()); !errors.Is(err, ErrBadCertificate) {
		t.Errorf("a plain key: %v", err)
	}
}

// TestCASignsHostCertificates: a host certificate is what ssh-keygen -L
// shows as one, for the host names given; each parser takes only its own
// type, so a host certificate never passes as a user's or back.
func TestCASignsHostCertificates(t *testing.T) {
	tool := testkit.Tool(t, "ssh-keygen")
	dir := t.TempDir()
	host := keygen(t, dir, "ssh_host_ed25519_key", "-t", "ed25519")
	key := readKeyFile(t, host.public)
	ca := testCA(t, 5)
	now := time.Now().Truncate(time.Second)
	blob, err := ca.SignHost(HostCertificate{Key: key.Public.Marshal(), Serial: 7, KeyID: "kith host:git.example.org record 7",
		Principals: []string{"git.example.org"}, ValidAfter: now, ValidBefore: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	out := string(runTool(t, nil, tool, "-L", "-f", writeCert(t, dir, "ssh_host_ed25519_key", blob)))
	for _, want := range []string{"host certificate", "Serial: 7", "git.example.org"} {
		if !strings.Contains(out, want) {
			t.Errorf("ssh-keygen -L lacks %q:\n%s", want, out)
		}
	}
	if _, err := ParseHostCertificate(blob); err != nil {
		t.Errorf("ParseHostCertificate: %v", err)
	}
	if _, err := ParseUserCertificate(blob); !errors.Is(err, ErrBadCertificate) {
		t.Errorf("ParseUserCertificate took a host certificate: %v", err)
	}
	user, err := ca.SignUser(UserCertificate{Key: key.Public.Marshal(), Serial: 8, Principals: []string{"git.example.org"},
		ValidAfter: now, ValidBefore: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHostCertificate(user); !errors.Is(err, ErrBadCertificate) {
		t.Errorf("ParseHostCertificate took a user certificate: %v", err)
	}
	if _, err := ca.SignHost(HostCertificate{Key: key.Public.Marshal(), ValidAfter: now, ValidBefore: now.Add(time.Hour)}); err == nil {
		t.Error("signed a host certificate for every host")
	}
}

// TestCARefusesBadRequests: no principals, an empty or listed principal,
// a certificate as the key, an inverted validity.
func TestCARefusesBadRequests(t *testing.T) {
	ca := testCA(t, 2)
	other := testCA(t, 3)
	key := other.PublicKey().Marshal()
	now := time.Now()
	good := UserCertificate{Key: key, Serial: 1, Principals: []string{"nora"}, ValidAfter: now, ValidBefore: now.Add(time.Hour)}
	cert, err := ca.SignUser(good)
	if err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*UserCertificate){
		"no principals":   func(u *UserCertificate) { u.Principals = nil },
		"empty principal": func(u *UserCertificate) { u.Principals = []string{""} },
		"a list":          func(u *UserCertificate) { u.Principals = []string{"a,b"} },
		"a certificate":   func(u *UserCertificate) { u.Key = cert },
		"inverted":        func(u *UserCertificate) { u.ValidBefore = u.ValidAfter.Add(-time.Second) },
		"garbage key":     func(u *UserCertificate) { u.Key = []byte("nope") },
	} {
		u := good
		mod(&u)
		if _, err := ca.SignUser(u); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
}

// TestKRLRevokesForOpenSSH: ssh-keygen -Q reads the KRL Marshal writes
// and finds the revoked serial revoked and the other not; an empty list
// for the CA revokes nothing.
func TestKRLRevokesForOpenSSH(t *testing.T) {
	tool := testkit.Tool(t, "ssh-keygen")
	dir := t.TempDir()
	user := keygen(t, dir, "ed25519", "-t", "ed25519")
	key := readKeyFile(t, user.public)
	ca := testCA(t, 4)
	now := time.Now()
	certs := map[uint64]string{}
	for _, serial := range []uint64{5, 6, 1 << 40} {
		blob, err := ca.SignUser(UserCertificate{Key: key.Public.Marshal(), Serial: serial, KeyID: "k",
			Principals: []string{"nora"}, ValidAfter: now, ValidBefore: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		certs[serial] = writeCert(t, t.TempDir(), "id", blob)
	}
	caBlob := ca.PublicKey().Marshal()
	query := func(krl *KRL, serial uint64) bool {
		t.Helper()
		path := filepath.Join(dir, "revoked.krl")
		if err := os.WriteFile(path, krl.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(tool, "-Q", "-f", path, certs[serial]).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil && strings.Contains(string(out), ": ok"):
			return false
		case errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Contains(string(out), "REVOKED"):
			return true
		}
		t.Fatalf("ssh-keygen -Q: %v\n%s", err, out)
		return false
	}
	empty := &KRL{Version: 1, Generated: now, Certificates: []RevokedCertificates{{CA: caBlob}}}
	if query(empty, 5) {
		t.Error("an empty list revokes serial 5")
	}
	krl := &KRL{Version: 2, Generated: now, Comment: "kith test",
		Certificates: []RevokedCertificates{{CA: caBlob, Serials: []uint64{1 << 40, 5, 5}}}}
	if !query(krl, 5) || !query(krl, 1<<40) {
		t.Error("ssh-keygen does not find the revoked serials revoked")
	}
	if query(krl, 6) {
		t.Error("serial 6 is revoked")
	}
	other := &KRL{Version: 3, Generated: now, Certificates: []RevokedCertificates{{CA: testCA(t, 5).PublicKey().Marshal(), Serials: []uint64{5}}}}
	if query(other, 5) {
		t.Error("a list for another CA revokes this CA's serial 5")
	}
	back, err := ParseKRL(krl.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != 2 || back.Comment != "kith test" || !back.NamesCA(caBlob) || !back.Revoked(caBlob, 5, "") ||
		back.Revoked(caBlob, 6, "") || len(back.Certificates[0].Serials) != 2 {
		t.Errorf("read back: %+v", back)
	}
}

// TestParseKRLReadsSSHKeygenLists: what ssh-keygen -k writes (serials,
// ranges, key IDs, plain keys) ParseKRL reads.
func TestParseKRLReadsSSHKeygenLists(t *testing.T) {
	tool := testkit.Tool(t, "ssh-keygen")
	dir := t.TempDir()
	user := keygen(t, dir, "ed25519", "-t", "ed25519")
	caKey := keygen(t, dir, "ca", "-t", "ed25519")
	spec := filepath.Join(dir, "spec")
	os.WriteFile(spec, []byte("serial: 7\nserial: 10-20\nid: old-laptop\n"), 0o644)
	path := filepath.Join(dir, "list.krl")
	runTool(t, nil, tool, "-q", "-k", "-f", path, "-s", caKey.public, spec)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	krl, err := ParseKRL(data)
	if err != nil {
		t.Fatal(err)
	}
	ca := readKeyFile(t, caKey.public).Public.Marshal()
	if !krl.NamesCA(ca) || !krl.Revoked(ca, 7, "") || !krl.Revoked(ca, 15, "") || !krl.Revoked(ca, 99, "old-laptop") ||
		krl.Revoked(ca, 8, "") || krl.Revoked(ca, 21, "") {
		t.Errorf("ssh-keygen's list: %+v", krl)
	}
	keys := filepath.Join(dir, "keys.krl")
	runTool(t, nil, tool, "-q", "-k", "-f", keys, user.public)
	data, _ = os.ReadFile(keys)
	if krl, err = ParseKRL(data); err != nil || len(krl.Keys)+len(krl.SHA1)+len(krl.SHA256) != 1 {
		t.Errorf("a list of one plain key: %+v, %v", krl, err)
	}
}

// TestParseKRLRefusesMalformed: every cut of a good list, a signed list,
// a critical extension, serial 0 and a wrong magic are refused.
func TestParseKRLRefusesMalformed(t *testing.T) {
	ca := testCA(t, 6).PublicKey().Marshal()
	good := (&KRL{Version: 1, Certificates: []RevokedCertificates{{CA: ca, Serials: []uint64{3, 9}, KeyIDs: []string{"x"}}}}).Marshal()
	if _, err := ParseKRL(good); err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(good); n++ {
		if k, err := ParseKRL(good[:n]); err == nil && n != 44 {
			t.Errorf("cut at %d: parsed %+v", n, k)
		}
	}
	signed := append(bytes.Clone(good), krlSectionSignature)
	signed = appendString(signed, ca)
	signed = appendString(signed, []byte("sig"))
	zero := (&KRL{Version: 1, Certificates: []RevokedCertificates{{CA: ca, Serials: []uint64{0}}}}).Marshal()
	var ext []byte
	ext = appendString(ext, []byte("x@kith"))
	ext = append(ext, 1)
	ext = appendString(ext, nil)
	critical := append(bytes.Clone(good), krlSectionExtension)
	critical = appendString(critical, ext)
	badMagic := bytes.Clone(good)
	badMagic[0] = 'X'
	for name, b := range map[string][]byte{"signed": signed, "serial 0": zero, "critical extension": critical, "magic": badMagic} {
		if _, err := ParseKRL(b); !errors.Is(err, ErrMalformedKRL) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
