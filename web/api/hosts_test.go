package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/ssh"
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

// getAs fetches path with the request's Host set to host, as a client
// that reached this server by that name.
func (k *kith) getAs(host, path string) (int, string) {
	k.t.Helper()
	req, err := http.NewRequest("GET", k.url+path, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostCertificates: a host key proven for host:NAME gets a host
// certificate valid for NAME alone, which ssh-keygen reads as one and
// verify-log replays; the @cert-authority line names the policy's hosts;
// the key's revocation puts the certificate in the KRL. The attacks: a
// stranger's key (claimed by nobody, or proven for another host) gets no
// certificate for the host, and no host gets a principal besides its
// name (a host certificate for "root" or for another host).
func TestHostCertificates(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	k := newKith(t)
	dir := t.TempDir()
	hostKey, newKey, mallory := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ecdsa"), newSSHKey(t, dir, "ed25519")
	const name, handle = "git.example.test", "host:git.example.test"
	if st, code := k.claimHost(name, hostKey, hostKey); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	if st, code := k.claimHost("evil.example.test", mallory, mallory); st != 201 {
		t.Fatalf("claim of mallory's host: %d %s", st, code)
	}
	st, code, hc := k.certify(handle, hostKey, api.CertificateRequest{Validity: "2h"})
	if st != http.StatusCreated {
		t.Fatalf("host certificate: %d %s", st, code)
	}
	if len(hc.Principals) != 1 || hc.Principals[0] != name {
		t.Errorf("host certificate principals %q, want %s alone", hc.Principals, name)
	}
	certFile := filepath.Join(dir, "ssh_host_ed25519_key-cert.pub")
	os.WriteFile(certFile, []byte(hc.Certificate+"\n"), 0o644)
	out, err := exec.Command("ssh-keygen", "-L", "-f", certFile).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen -L: %v\n%s", err, out)
	}
	for _, want := range []string{"host certificate", "Principals: \n                " + name + "\n", "Extensions: (none)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ssh-keygen -L lacks %q:\n%s", want, out)
		}
	}
	for what, req := range map[string]struct {
		key        sshKey
		handle     string
		principals []string
		want       string
	}{
		"a principal besides the name":  {hostKey, handle, []string{name, "root"}, "principal_not_allowed"},
		"another host's name":           {hostKey, handle, []string{"evil.example.test"}, "principal_not_allowed"},
		"a key proven for another host": {mallory, handle, nil, "not_proven"},
		"a key nobody claimed":          {newKey, handle, nil, "not_proven"},
	} {
		st, code, _ := k.certify(req.handle, req.key, api.CertificateRequest{Principals: req.principals})
		if st < 400 || code != req.want {
			t.Errorf("%s: %d %s, want %s", what, st, code, req.want)
		}
	}

	st, line := k.get("/ssh/ca.known_hosts")
	caKey := keyOnly(string(ssh.MarshalAuthorizedKey(ssh.NewKey(testCA(t).PublicKey(), ""))))
	if st != 200 || !strings.HasPrefix(line, "@cert-authority *.example.test,[*.example.test]:* "+caKey) {
		t.Fatalf("GET /ssh/ca.known_hosts: %d %q", st, line)
	}

	// The host rotates its key and revokes the old one: the old key's
	// certificate is revoked, and the new key gets one.
	stmt := k.challenge(handle, newKey.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/"+handle+"/factors", api.AddRequest{
		Statement: stmt, Signature: newKey.sign(t, stmt, "kith"), By: hostKey.pub, BySignature: hostKey.sign(t, stmt, "kith"),
	}, nil); st != 200 {
		t.Fatalf("add: %d %s", st, code)
	}
	k.revokeSSH(handle, hostKey, newKey)
	krl, raw := k.krl()
	if !krl.Revoked(testCA(t).PublicKey().Marshal(), hc.Serial, "") || !keygenQuery(t, raw, hc.Certificate) {
		t.Errorf("the revoked host key's certificate is not in the KRL: %+v", krl.Certificates)
	}
	if st, code, _ := k.certify(handle, newKey, api.CertificateRequest{}); st != http.StatusCreated {
		t.Errorf("certificate for the new key: %d %s", st, code)
	}
	if n := k.verifyLog(); n == 0 {
		t.Error("verify-log checked no records")
	}
}

// TestWellKnownSSHHosts: /.well-known/ssh-known-hosts answers for the
// name the request was made to with the proven keys of that host and of
// the hosts below it, and the @cert-authority line for those names alone
// (C2SP well-known-ssh-hosts: every name within the domain it is served
// from). Its attacks: a name outside the domain (a sibling, a parent, a
// name that merely ends in the same letters) is never in the answer; an
// address or a name with nothing to serve is an empty 404; and a host
// claimed below a domain shows in the domain's answer at once.
func TestWellKnownSSHHosts(t *testing.T) {
	k := newKith(t)
	dir := t.TempDir()
	git, deep, sibling, lookalike := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519")
	for name, key := range map[string]sshKey{"git.example.test": git, "a.b.git.example.test": deep, "web.example.test": sibling} {
		if st, code := k.claimHost(name, key, key); st != 201 {
			t.Fatalf("claim of %s: %d %s", name, st, code)
		}
	}
	caKey := keyOnly(string(ssh.MarshalAuthorizedKey(ssh.NewKey(testCA(t).PublicKey(), ""))))
	st, body := k.getAs("git.example.test:8443", "/.well-known/ssh-known-hosts")
	want := []string{
		"@cert-authority git.example.test,[git.example.test]:*,*.git.example.test,[*.git.example.test]:* " + caKey,
		"a.b.git.example.test " + keyOnly(deep.pub),
		"git.example.test " + keyOnly(git.pub),
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if st != 200 || len(lines) != len(want) {
		t.Fatalf("git.example.test: %d %q", st, body)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	if strings.Contains(body, keyOnly(sibling.pub)) {
		t.Error("a sibling host's key is in the answer")
	}
	// The domain above answers for every host below it, and its
	// @cert-authority line is the policy's wildcard.
	st, body = k.getAs("EXAMPLE.test.", "/.well-known/ssh-known-hosts")
	if st != 200 || !strings.HasPrefix(body, "@cert-authority *.example.test,[*.example.test]:* "+caKey) ||
		!strings.Contains(body, keyOnly(sibling.pub)) || !strings.Contains(body, keyOnly(deep.pub)) || strings.Count(body, "\n") != 4 {
		t.Fatalf("example.test: %d %q", st, body)
	}
	// A look-alike name: "xgit.example.test" ends in "git.example.test"
	// but is not below it. Claimed after the answer above was cached, it
	// shows in example.test's answer at once, never in git's.
	if st, code := k.claimHost("xgit.example.test", lookalike, lookalike); st != 201 {
		t.Fatalf("claim of xgit: %d %s", st, code)
	}
	if _, body := k.getAs("git.example.test", "/.well-known/ssh-known-hosts"); strings.Contains(body, keyOnly(lookalike.pub)) {
		t.Errorf("xgit's key in git's answer: %q", body)
	}
	if _, body := k.getAs("example.test", "/.well-known/ssh-known-hosts"); !strings.Contains(body, "xgit.example.test "+keyOnly(lookalike.pub)) {
		t.Errorf("example.test's answer lacks the host just claimed: %q", body)
	}
	for _, host := range []string{"127.0.0.1", "[::1]:80", "evil.org", "example.test.evil.org", "other.test"} {
		if st, body := k.getAs(host, "/.well-known/ssh-known-hosts"); st != 404 || body != "" {
			t.Errorf("Host %s: %d %q, want an empty 404", host, st, body)
		}
	}
}
