package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/web/api"
)

// claimHost claims host:name with key, signed by signer's key (key
// itself, for a true claim), and returns the status and error code.
func (k *kith) claimHost(name string, key, signer sshKey) (int, string) {
	k.t.Helper()
	var c api.ChallengeResponse
	if st, code := k.call("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "host:" + name, Factor: key.pub, Purpose: "claim"}, &c); st != 201 {
		return st, code
	}
	return k.call("POST", "/api/v1/identities", api.ClaimRequest{
		SignedStatement: api.SignedStatement{Statement: c.Statement, Signature: signer.sign(k.t, c.Statement, "kith")},
	}, nil)
}

// getRaw fetches a path and returns status, body and Content-Length.
func (k *kith) getRaw(path string) (int, string, string) {
	k.t.Helper()
	resp, err := http.Get(k.url + path)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Content-Length")
}

// TestStrangerCannotPublishKeysForAHostOutsideTheList: the first-come
// attack over HTTP. A stranger, with a key of their own, claims
// host:github.com (which the server's list, *.example.test, does not
// name) so that anyone using this server for known_hosts would trust
// their key for github.com. The claim is refused with host_not_allowed,
// nothing is logged, and github.com has no keys here.
func TestStrangerCannotPublishKeysForAHostOutsideTheList(t *testing.T) {
	k := newKith(t)
	mallory := newSSHKey(t, t.TempDir(), "ed25519")
	for _, name := range []string{"github.com", "example.test", "git.example.test.evil.org"} {
		if st, code := k.claimHost(name, mallory, mallory); st != http.StatusForbidden || code != "host_not_allowed" {
			t.Errorf("claim of host:%s: %d %s, want 403 host_not_allowed", name, st, code)
		}
		if st, body, n := k.getRaw("/hosts/" + name + ".known_hosts"); st != 404 || body != "" || n != "0" {
			t.Errorf("%s.known_hosts: %d %q (length %s), want an empty 404", name, st, body, n)
		}
	}
	if n := k.logLen(); n != 0 {
		t.Errorf("the refused claims logged %d records", n)
	}
}

// TestHostKnownHosts publishes a host's key under host:NAME, signed by the
// host key itself, and follows it through known_hosts: served in the
// host's name (case and a final dot folded), not as a person's keys, and
// after a rotation (new key co-signed by the old, old revoked) only the
// new key.
func TestHostKnownHosts(t *testing.T) {
	k := newKith(t)
	dir := t.TempDir()
	hostKey, newKey, mallory := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ecdsa"), newSSHKey(t, dir, "ed25519")
	const name = "git.example.test"

	// A claim signed by another key than the one it names is refused.
	if st, code := k.claimHost(name, hostKey, mallory); st < 400 {
		t.Fatalf("a claim signed by a stranger's key: %d %s", st, code)
	}
	if st, code := k.claimHost(name, hostKey, hostKey); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	want := name + " " + keyOnly(hostKey.pub) + "\n"
	for _, path := range []string{"/hosts/git.example.test.known_hosts", "/hosts/GIT.Example.test..known_hosts"} {
		st, body := k.get(path)
		if st != 200 || body != want {
			t.Errorf("%s: %d %q, want %q", path, st, body, want)
		}
	}
	// The stranger's first-come claim of a listed name that is taken.
	if st, code := k.claimHost(name, mallory, mallory); st != 409 || code != "handle_taken" {
		t.Errorf("second claim: %d %s, want 409 handle_taken", st, code)
	}
	// A host is not a person: its keys are not authorized_keys anywhere.
	for _, path := range []string{"/users/host:git.example.test.keys", "/users/host:git.example.test.json", "/users/host%3Agit.keys"} {
		if st, body := k.get(path); st != 404 {
			t.Errorf("%s: %d %q, want 404", path, st, body)
		}
	}
	var doc api.IdentityDoc
	if st, code := k.call("GET", "/hosts/"+name+".json", nil, &doc); st != 200 || doc.Handle != "host:"+name || len(doc.Factors) != 1 || doc.Factors[0].Assurance != "proven" {
		t.Fatalf("host document: %d %s %+v", st, code, doc)
	}

	// Rotation: the new key, co-signed by the old one.
	stmt := k.challenge("host:"+name, newKey.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/host:"+name+"/factors", api.AddRequest{
		Statement: stmt, Signature: newKey.sign(t, stmt, "kith"), By: hostKey.pub, BySignature: hostKey.sign(t, stmt, "kith"),
	}, nil); st != 200 && st != 201 {
		t.Fatalf("add: %d %s", st, code)
	}
	st, body := k.get("/hosts/" + name + ".known_hosts")
	if st != 200 || !strings.Contains(body, keyOnly(hostKey.pub)) || !strings.Contains(body, keyOnly(newKey.pub)) || strings.Count(body, "\n") != 2 {
		t.Fatalf("after the add: %d %q", st, body)
	}
	stmt = k.challenge("host:"+name, hostKey.pub, "revoke")
	if st, code := k.call("POST", "/api/v1/identities/host:"+name+"/revocations", api.RevokeRequest{
		Statement: stmt, By: newKey.pub, Signature: newKey.sign(t, stmt, "kith"),
	}, nil); st != 200 && st != 201 {
		t.Fatalf("revoke: %d %s", st, code)
	}
	if st, body := k.get("/hosts/" + name + ".known_hosts"); st != 200 || body != name+" "+keyOnly(newKey.pub)+"\n" {
		t.Fatalf("after the revocation: %d %q, want the new key only", st, body)
	}
	for _, path := range []string{"/hosts/other.example.test.known_hosts", "/hosts/127.0.0.1.known_hosts", "/hosts/a..b.known_hosts"} {
		if st, body, n := k.getRaw(path); st != 404 || body != "" || n != "0" {
			t.Errorf("%s: %d %q (length %s), want an empty 404", path, st, body, n)
		}
	}
	if st, _ := k.get("/hosts/" + name + ".keys"); st != 404 {
		t.Errorf("/hosts/NAME.keys: %d, want 404", st)
	}
	if n := k.verifyLog(); n == 0 {
		t.Error("verify-log checked no records")
	}
}

// TestKnownHostsFreshAcrossNodes: a host key revoked through node A stops
// being served by node B, whose cached answer the notification drops, and
// a node's own write is read back at once.
func TestKnownHostsFreshAcrossNodes(t *testing.T) {
	k := newKithWith(t, api.Options{ChallengesPerMinute: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hb := newHandler(ctx, t, k.store, api.Options{Watcher: k.store})
	waitListening(t, hb)
	b := httptest.NewServer(hb)
	defer b.Close()
	const h = "host:node.example.test"
	path := "/hosts/node.example.test.known_hosts"

	old := newGoKey(t, "old")
	k.claimKey(h, old)
	for i := range 5 {
		key := newGoKey(t, fmt.Sprintf("key%d", i))
		k.addKey(h, key, old)
		// Warm both caches with the key in.
		for _, url := range []string{k.url + path, b.URL + path} {
			testkit.Eventually(t, 10*time.Second, "the added key served at "+url, func() bool {
				st, body := getFrom(t, url)
				return st == 200 && strings.Contains(body, keyOnly(key.pub))
			})
		}
		k.revokeKey(h, key, old)
		if _, body := getFrom(t, k.url+path); strings.Contains(body, keyOnly(key.pub)) {
			t.Fatalf("round %d: node A serves the key it just revoked:\n%s", i, body)
		}
		testkit.Eventually(t, 10*time.Second, "node B dropping the revoked key", func() bool {
			st, body := getFrom(t, b.URL+path)
			return st == 200 && !strings.Contains(body, keyOnly(key.pub)) && strings.Contains(body, keyOnly(old.pub))
		})
		if !hb.Listening() || !k.h.Listening() {
			t.Fatalf("round %d: a cache went off; the test no longer tests it", i)
		}
	}
}
