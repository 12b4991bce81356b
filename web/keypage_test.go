package web_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// fingerprints lists the fingerprints gpg shows for a key: the primary
// key's first, then its subkeys'.
func (g *gnupg) fingerprints(fpr string) []string {
	var out []string
	for _, line := range strings.Split(g.run("", "--with-colons", "--list-keys", fpr), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && len(f) > 9 {
			out = append(out, f[9])
		}
	}
	return out
}

// TestKeyPageNamesCertifiersAndFindsSubkeys: a key certified by a key
// the store holds and by one it does not shows the first by name, linked
// to its page, and the second by its bare key ID, with the attestation
// advice for the key's owner; an uncertified key shows no such advice.
// A subkey's fingerprint and a 64-bit key ID lead to the key's page.
func TestKeyPageNamesCertifiersAndFindsSubkeys(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	g := newGnuPG(t)
	dana := g.newKey("Dana Scully <dana@example.org>")
	carol := g.newKey("Carol Certifier <carol@example.org>")
	eve := g.newKey("Eve Elsewhere <eve@example.org>")
	for _, by := range []string{carol, eve} {
		g.run("", "--local-user", by, "--quick-sign-key", dana)
	}
	for _, fpr := range []string{dana, carol} {
		if up := b.upload(g.run("", "--armor", "--export", fpr)); up.status != http.StatusOK {
			t.Fatalf("upload %s: %d:\n%s", fpr, up.status, up.body)
		}
	}

	p := b.get("/keys/" + dana)
	if p.status != http.StatusOK {
		t.Fatalf("key page: %d", p.status)
	}
	link := regexp.MustCompile(`<a class="certifier" href="/keys/` + carol + `">Carol Certifier &lt;carol@example.org&gt;</a>`)
	if !link.MatchString(p.body) {
		t.Errorf("the certification by %s is not named and linked:\n%s", carol, p.body)
	}
	if !strings.Contains(p.body, `<span class="mono">`+eve[24:]+`</span> <span class="muted">(not on this server)</span>`) {
		t.Errorf("the certification by %s (not stored) is not a bare key ID:\n%s", eve, p.body)
	}
	if !strings.Contains(p.body, `id="attest-howto"`) || !strings.Contains(p.body, "If this is your key") {
		t.Errorf("a certified key's page lacks the attestation advice:\n%s", p.body)
	}
	if c := b.get("/keys/" + carol); c.status != http.StatusOK || strings.Contains(c.body, "attest-certifications") {
		t.Errorf("an uncertified key's page (%d) shows the attestation advice:\n%s", c.status, c.body)
	}

	fprs := g.fingerprints(dana)
	if len(fprs) != 2 {
		t.Fatalf("gpg lists %q for %s", fprs, dana)
	}
	for _, path := range []string{"/keys/" + fprs[1], "/keys/" + strings.ToLower(fprs[1]), "/keys/" + dana[24:], "/keys/0x" + fprs[1][24:]} {
		if p := b.get(path); p.status != http.StatusOK || p.url.Path != "/keys/"+dana {
			t.Errorf("%s: %d at %s, want the page of %s", path, p.status, p.url.Path, dana)
		}
	}
	if p := b.get("/keys/" + strings.Repeat("A", 16)); p.status != http.StatusNotFound {
		t.Errorf("an unknown key ID: %d", p.status)
	}
}

// TestKeyPageSaysWhenAndWhyAKeyWasRevoked: a revoked key's page gives the
// date, reason and text of its revocation; none of its user IDs or
// subkeys says "valid"; a user ID revoked by gpg says when.
func TestKeyPageSaysWhenAndWhyAKeyWasRevoked(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	created := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	e, err := keygen.NewEd25519("Ada Lovelace", "ada@example.org", created, 11)
	if err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	if err := e.RevokeKey(packet.KeyCompromised, "the laptop was stolen", &packet.Config{Time: func() time.Time { return revokedAt }}); err != nil {
		t.Fatal(err)
	}
	var raw, armored bytes.Buffer
	if err := keygen.Serialize(&raw, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(raw.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := pgp.WriteArmored(&armored, k); err != nil {
		t.Fatal(err)
	}
	if up := b.upload(armored.String()); up.status != http.StatusOK {
		t.Fatalf("upload: %d:\n%s", up.status, up.body)
	}
	fpr := k.Describe().FingerprintHex()
	p := b.get("/keys/" + fpr)
	for _, want := range []string{"2025-03-14", "key material has been compromised", "the laptop was stolen"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the revoked key's page lacks %q:\n%s", want, p.body)
		}
	}
	if strings.Contains(p.body, ">valid<") {
		t.Errorf("the revoked key's page calls something valid:\n%s", p.body)
	}

	g := newGnuPG(t)
	dana := g.newKey("Dana Scully <dana@example.org>")
	g.run("", "--quick-add-uid", dana, "Dana at work <dana@work.example>")
	g.run("", "--quick-revoke-uid", dana, "Dana at work <dana@work.example>")
	b.upload(g.run("", "--armor", "--export", dana))
	p = b.get("/keys/" + dana)
	uid := regexp.MustCompile(`(?s)Dana at work &lt;dana@work.example&gt;</span> <span class="badge revoked">revoked</span>.*?<div class="revocation muted">Revoked on <span class="date">` + time.Now().UTC().Format("2006-01-02"))
	if !uid.MatchString(p.body) {
		t.Errorf("the revoked user ID does not say when:\n%s", p.body)
	}
}

// revokeKey revokes the key fpr, whose secret key gpg exported as
// secret, as retired with a reason text, and returns the public key with
// its revocation, armored.
func revokeKey(t *testing.T, fpr, secret string) string {
	t.Helper()
	ring, err := openpgp.ReadKeyRing(strings.NewReader(secret))
	if err != nil || len(ring) != 1 {
		t.Fatalf("read %s's secret key: %d keys, %v", fpr, len(ring), err)
	}
	e := ring[0]
	if err := e.RevokeKey(packet.KeyRetired, "replaced by a new key", nil); err != nil {
		t.Fatal(err)
	}
	var raw, armored bytes.Buffer
	if err := keygen.Serialize(&raw, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(raw.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := pgp.WriteArmored(&armored, k); err != nil {
		t.Fatal(err)
	}
	return armored.String()
}
