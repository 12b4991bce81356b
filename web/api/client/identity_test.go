package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/web/api/client"
)

// keyOnly is an authorized_keys line without its comment.
func keyOnly(s client.Signer) string { return s.Pub }

// refusal returns err's Refusal, failing t if it is not one with code.
func refusal(t *testing.T, err error, codes ...identity.Code) *client.Refusal {
	t.Helper()
	var r *client.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("got %v, want a refusal %v", err, codes)
	}
	for _, c := range codes {
		if r.Code == c {
			return r
		}
	}
	t.Fatalf("refusal %v, want one of %v", r, codes)
	return nil
}

// TestClaimAddRevokeWithRealTools claims a handle, links an OpenPGP key
// from gpg and another SSH key, revokes one and reads the identity back,
// signing with the real ssh-keygen and gpg; the co-signer is the one key
// here proven for the handle, and never a guess among several.
func TestClaimAddRevokeWithRealTools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	main := u.sshKey("", "id_ed25519")
	laptop := u.sshKey(t.TempDir(), "laptop")
	stranger := u.sshKey(t.TempDir(), "stranger")
	pgpKey := u.pgpKey("Nora <nora@example.org>")

	doc, err := c.Claim(ctx, "nora", main)
	if err != nil || doc.Handle != "nora" || client.Assurance(doc, main.ID) != "proven" {
		t.Fatalf("claim: %v %+v", err, doc)
	}
	if got := srv.get("/users/nora.keys"); !strings.Contains(got, keyOnly(main)) {
		t.Fatalf("after claim nora serves %q", got)
	}

	// The one proven key here (the claim's, in ~/.ssh) co-signs; the
	// OpenPGP key is uploaded from gpg first.
	by, err := u.tools.CoSigner(ctx, doc, pgpKey.ID)
	if err != nil || by.ID != main.ID {
		t.Fatalf("co-signer: %v %v, want %v", by, err, main)
	}
	if err := c.UploadKey(ctx, pgpKey); err != nil {
		t.Fatal(err)
	}
	if doc, err = c.Add(ctx, "nora", pgpKey, by); err != nil || client.Assurance(doc, pgpKey.ID) != "proven" {
		t.Fatalf("add pgp: %v %+v", err, doc)
	}

	// Now two keys here are proven: the client will not guess.
	if _, err := u.tools.CoSigner(ctx, doc, laptop.ID); err == nil || !strings.Contains(err.Error(), "several keys here are proven for nora") {
		t.Errorf("ambiguous co-signer: %v", err)
	}
	before := srv.records()
	if doc, err = c.Add(ctx, "nora", laptop, pgpKey); err != nil || client.Assurance(doc, laptop.ID) != "proven" {
		t.Fatalf("add co-signed by pgp: %v %+v", err, doc)
	}
	if got := srv.get("/users/nora.keys"); !strings.Contains(got, keyOnly(laptop)) {
		t.Fatalf("after add nora serves %q", got)
	}
	if n := srv.records(); n <= before {
		t.Fatalf("the add appended no record")
	}

	// A stranger's key cannot co-sign: the server says why and what to
	// do, and nothing is written.
	before = srv.records()
	_, err = c.Add(ctx, "nora", stranger, stranger)
	refusal(t, err, identity.CodeNotProven, identity.CodeNotAuthorized)
	fresh := u.sshKey(t.TempDir(), "fresh")
	_, err = c.Add(ctx, "nora", fresh, stranger)
	if r := refusal(t, err, identity.CodeNotProven, identity.CodeNotAuthorized); r.Hint == "" || !strings.Contains(err.Error(), "what to do:") {
		t.Errorf("refusal without a hint: %v", err)
	}
	_, err = c.Claim(ctx, "nora", stranger)
	if r := refusal(t, err, identity.CodeHandleTaken); !strings.Contains(r.Hint, "kith id add nora") {
		t.Errorf("claim of a taken handle: %v", err)
	}
	if n := srv.records(); n != before {
		t.Errorf("refused requests appended %d records", n-before)
	}

	// Revoke by fingerprint, by key file and by OpenPGP fingerprint all
	// find the factor.
	for _, arg := range []string{laptop.ID, laptop.File, strings.ToLower(pgpKey.ID)} {
		f, err := u.tools.Find(ctx, doc, arg)
		if err != nil || (f.Value != laptop.ID && f.Value != pgpKey.ID) {
			t.Errorf("find %s: %+v %v", arg, f, err)
		}
	}
	if _, err := u.tools.Find(ctx, doc, stranger.ID); err == nil {
		t.Errorf("found a factor nora does not have")
	}
	f, err := u.tools.Find(ctx, doc, laptop.ID)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err = c.Revoke(ctx, "nora", f, main); err != nil || client.Assurance(doc, laptop.ID) != "revoked" {
		t.Fatalf("revoke: %v %+v", err, doc)
	}
	if got := srv.get("/users/nora.keys"); strings.Contains(got, keyOnly(laptop)) || !strings.Contains(got, keyOnly(main)) {
		t.Fatalf("after revoke nora serves %q", got)
	}

	doc, err = c.Lookup(ctx, "nora")
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{pgpKey.ID: "proven", laptop.ID: "revoked", main.ID: "proven"} {
		if got := client.Assurance(doc, value); got != want {
			t.Errorf("lookup: %s is %s, want %s", value, got, want)
		}
	}
	_, err = c.Lookup(ctx, "nobody-here")
	refusal(t, err, identity.CodeUnknownIdentity)
}

// TestHostIdentityIsLookedUpUnderHosts: a host's identity, host:NAME,
// signed by its host key, is read back from /hosts/NAME.json; a name the
// server does not publish is refused with a hint.
func TestHostIdentityIsLookedUpUnderHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	key := u.sshKey(t.TempDir(), "ssh_host_ed25519_key")
	if _, err := c.Claim(ctx, "host:git.example.test", key); err != nil {
		t.Fatal(err)
	}
	doc, err := c.Lookup(ctx, "host:git.example.test")
	if err != nil || client.Assurance(doc, key.ID) != "proven" {
		t.Fatalf("lookup: %v %+v", err, doc)
	}
	_, err = c.Claim(ctx, "host:github.com", key)
	if r := refusal(t, err, identity.CodeHostNotAllowed); !strings.Contains(r.Hint, "hosts.names") {
		t.Errorf("hint: %q", r.Hint)
	}
}

// TestUnreachableServerSaysWhatFailed: an error names the operation.
func TestUnreachableServerSaysWhatFailed(t *testing.T) {
	t.Parallel()
	c, err := client.New("http://127.0.0.1:1", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(context.Background(), "nora"); err == nil || !strings.Contains(err.Error(), "look up nora") {
		t.Errorf("lookup at a dead server: %v", err)
	}
	for _, bad := range []string{"ftp://example.org", "example.org", "http://", "://x"} {
		if _, err := client.New(bad, client.Options{}); !errors.Is(err, client.ErrBadServer) {
			t.Errorf("New(%q): %v, want ErrBadServer", bad, err)
		}
	}
}
