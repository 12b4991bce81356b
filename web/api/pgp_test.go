package api_test

import (
	"bytes"
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/web/api"
)

// gnupg is a throwaway GnuPG home with the API tests' own helpers.
type gnupg struct {
	*gpgtest.Home
	t *testing.T
}

func newGnuPG(t *testing.T) *gnupg {
	t.Helper()
	return &gnupg{Home: gpgtest.New(t), t: t}
}

// authSubkeys returns the key IDs of fpr's authentication subkeys.
func (g *gnupg) authSubkeys(fpr string) []string {
	var ids []string
	for _, l := range strings.Split(string(g.Run("", "--with-colons", "--list-keys", fpr)), "\n") {
		f := strings.Split(l, ":")
		if f[0] == "sub" && strings.Contains(f[11], "a") {
			ids = append(ids, f[4])
		}
	}
	return ids
}

// store uploads fpr's public key to the store, as HKP would.
func (g *gnupg) store(k *kith, fpr string) {
	g.t.Helper()
	key, err := pgp.ParseKey(g.Run("", "--export", fpr))
	if err != nil {
		g.t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(key)
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := k.keys.Upload(context.Background(), applied, keys.UploadOptions{}); err != nil {
		g.t.Fatal(err)
	}
}

func (g *gnupg) clearsign(fpr, text string) string {
	return string(g.Run(text, "--local-user", fpr, "--clearsign", "--output", "-"))
}

func (g *gnupg) detachSign(fpr, text string) string {
	return string(g.Run(text, "--local-user", fpr, "--detach-sign", "--armor", "--output", "-"))
}

// TestPGPKeyClaimServesItsAuthSubkeysAsGPGExportsThem claims a handle with
// a clearsigned statement and checks that the key's Ed25519 and RSA
// authentication subkeys whose bindings the subkeys signed too (gpg embeds
// a back-signature for signing-capable subkeys) are served exactly as gpg
// --export-ssh-key prints them, that an auth-only subkey (a binding by the
// primary alone, which anyone can make for a public SSH key) is only
// claimed and not served, the key as .gpg, and its email as a claim only.
func TestPGPKeyClaimServesItsAuthSubkeysAsGPGExportsThem(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	fpr := g.NewKey("Alice <alice@example.org>", "sign")
	g.Run("", "--quick-add-key", fpr, "ed25519", "sign,auth", "0")
	g.Run("", "--quick-add-key", fpr, "rsa2048", "sign,auth", "0")
	signed := g.authSubkeys(fpr)
	g.Run("", "--quick-add-key", fpr, "ed25519", "auth", "0")
	g.store(k, fpr)

	stmt := k.challenge("alice", fpr, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(stmt, g.clearsign(fpr, stmt)), nil); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	_, served := k.get("/users/alice.keys")
	subs := g.authSubkeys(fpr)
	if len(signed) != 2 || len(subs) != 3 {
		t.Fatalf("auth subkeys %v, signed %v", subs, signed)
	}
	for _, id := range subs {
		want := string(g.Run("", "--export-ssh-key", id+"!"))
		if slices.Contains(signed, id) != strings.Contains(served, want) {
			t.Errorf("auth subkey %s (signed by itself: %v) served: %v, want the opposite:\n%s",
				id, slices.Contains(signed, id), !slices.Contains(signed, id), served)
		}
	}
	if n := strings.Count(served, "\n"); n != 2 {
		t.Errorf("%d lines served, want 2:\n%s", n, served)
	}

	_, armored := k.get("/users/alice.gpg")
	got, err := pgp.ParseKey([]byte(armored))
	if err != nil || !strings.EqualFold(pgp.NewKey(got.Packets()).Describe().FingerprintHex(), fpr) {
		t.Fatalf(".gpg: %v\n%s", err, armored)
	}

	var doc api.IdentityDoc
	k.call("GET", "/users/alice.json", nil, &doc)
	found := false
	for _, f := range doc.Factors {
		if f.Kind == "email" {
			found = true
			if f.Value != "alice@example.org" || f.Assurance != "claimed" {
				t.Errorf("email factor %+v, want alice@example.org claimed", f)
			}
		}
	}
	if !found {
		t.Error("no email factor")
	}
	levels := map[string]int{}
	for _, f := range doc.Factors {
		if f.Kind == "ssh" {
			levels[f.Assurance]++
		}
	}
	if levels["proven"] != 2 || levels["claimed"] != 1 {
		t.Errorf("SSH factors by assurance %v, want 2 proven and 1 claimed", levels)
	}

	// An SSH key added with a detached signature by the PGP key.
	ssh := newSSHKey(t, t.TempDir(), "ed25519")
	stmt = k.challenge("alice", ssh.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/alice/factors", api.AddRequest{
		Statement: stmt, Signature: ssh.sign(t, stmt, "kith"), By: fpr, BySignature: g.detachSign(fpr, stmt),
	}, nil); st != 200 {
		t.Fatalf("add with a detached PGP signature: %d %s", st, code)
	}
	if _, served := k.get("/users/alice.keys"); !strings.Contains(served, keyOnly(ssh.pub)) {
		t.Fatalf("added key not served:\n%s", served)
	}

	// Every record re-verifies offline, auth subkey links included (from
	// their public packets: the key without its user IDs).
	methods := map[string]int{}
	for _, e := range k.verifiedLog() {
		methods[string(e.Method)]++
	}
	want := map[string]int{"pgp.challenge": 2, "pgp.auth-subkey-signed": 2, "pgp.auth-subkey": 1, "pgp.uid-selfsig": 1, "ssh.challenge": 1}
	for m, n := range want {
		if methods[m] != n {
			t.Errorf("%d %s records, want %d (%v)", methods[m], m, n, methods)
		}
	}
}

func TestPGPProofRefusals(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	alice := g.NewKey("Alice <alice@example.org>", "sign")
	mallory := g.NewKey("Mallory <mallory@example.org>", "sign")
	unstored := g.NewKey("Nobody <nobody@example.org>", "sign")
	g.store(k, alice)
	g.store(k, mallory)

	tests := []struct {
		name     string
		req      func() api.ClaimRequest
		wantCode string
	}{
		{"clearsigned by another key", func() api.ClaimRequest {
			s := k.challenge("alice", alice, "claim")
			return claim(s, g.clearsign(mallory, s))
		}, "wrong_key"},
		{"detached signature by another key", func() api.ClaimRequest {
			s := k.challenge("alice", alice, "claim")
			return claim(s, g.detachSign(mallory, s))
		}, "wrong_key"},
		{"detached signature over other text", func() api.ClaimRequest {
			s := k.challenge("alice", alice, "claim")
			return claim(s, g.detachSign(alice, strings.Replace(s, "handle: alice", "handle: mallory", 1)))
		}, "bad_signature"},
		{"clearsigned text is another statement", func() api.ClaimRequest {
			s := k.challenge("alice", alice, "claim")
			other := k.challenge("alice", alice, "claim")
			return claim(s, g.clearsign(alice, other))
		}, "statement_changed"},
		{"key not stored", func() api.ClaimRequest {
			s := k.challenge("nemo", unstored, "claim")
			return claim(s, g.clearsign(unstored, s))
		}, "unknown_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req()
			before := k.logLen()
			if _, code := k.call("POST", "/api/v1/identities", req, nil); code != tt.wantCode {
				t.Fatalf("code %q, want %q", code, tt.wantCode)
			}
			if k.logLen() != before {
				t.Fatal("a refusal appended records")
			}
		})
	}
}

// TestAuthSubkeyBoundToAnotherKeyIsNotLinkedTwice: an authentication
// subkey's binding needs no signature by the subkey, so anyone can bind
// another person's SSH key to their own OpenPGP key. Once alice's key
// links an SSH key, bob's key binding the same SSH key does not link it to
// bob: his .keys leaves it out and the SSH key stays alice's.
func TestAuthSubkeyBoundToAnotherKeyIsNotLinkedTwice(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	aliceFpr := g.NewKey("Alice <alice@example.org>", "sign")
	g.Run("", "--quick-add-key", aliceFpr, "ed25519", "sign,auth", "0")
	bobFpr := g.NewKey("Bob <bob@example.org>", "sign")
	g.store(k, aliceFpr)

	// Bob binds alice's authentication subkey to his own primary key.
	alice, err := openpgp.ReadEntity(packet.NewReader(bytes.NewReader(g.Run("", "--export", aliceFpr))))
	if err != nil {
		t.Fatal(err)
	}
	var authSub *packet.PublicKey
	for _, s := range alice.Subkeys {
		if s.Sig.FlagAuthenticate {
			authSub = s.PublicKey
		}
	}
	if authSub == nil {
		t.Fatal("alice's key has no authentication subkey")
	}
	_, bobKey := bindAuthSubkey(t, g, bobFpr, authSub)
	parsed, err := pgp.ParseKey(bobKey)
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(parsed)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Describe().Subkeys) == 0 {
		t.Fatal("the policy dropped bob's binding of the subkey; the test would prove nothing")
	}
	if _, err := k.keys.Upload(context.Background(), applied, keys.UploadOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ handle, fpr string }{{"alice", aliceFpr}, {"bob", bobFpr}} {
		stmt := k.challenge(c.handle, c.fpr, "claim")
		if st, code := k.call("POST", "/api/v1/identities", claim(stmt, g.clearsign(c.fpr, stmt)), nil); st != 201 {
			t.Fatalf("claim %s: %d %s", c.handle, st, code)
		}
	}
	_, aliceKeys := k.get("/users/alice.keys")
	if strings.Count(aliceKeys, "\n") != 1 {
		t.Fatalf("alice serves %q, want her one auth subkey", aliceKeys)
	}
	if _, bobKeys := k.get("/users/bob.keys"); strings.Contains(bobKeys, keyOnly(aliceKeys)) {
		t.Fatalf("bob serves alice's SSH key:\n%s", bobKeys)
	}
	var doc api.IdentityDoc
	k.call("GET", "/users/alice.json", nil, &doc)
	for _, f := range doc.Factors {
		if f.Kind != "ssh" {
			continue
		}
		var owner api.SSHOwner
		if st, _ := k.call("GET", "/api/v1/ssh/"+url.PathEscape(f.Value), nil, &owner); st != 200 || owner.Handle != "alice" {
			t.Fatalf("/api/v1/ssh/%s: %d, handle %q; want alice", f.Value, st, owner.Handle)
		}
	}
}
