package api_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// certify asks for a certificate for key as handle and returns the
// status, the refusal code and the answer.
func (k *kith) certify(handle string, key sshKey, req api.CertificateRequest) (int, string, api.CertificateResponse) {
	k.t.Helper()
	req.Statement = k.challenge(handle, key.pub, "certificate")
	req.Signature = key.sign(k.t, req.Statement, "kith")
	var out api.CertificateResponse
	st, code := k.call("POST", "/api/v1/ssh/certificates", req, &out)
	return st, code, out
}

// claimSSH claims handle with key.
func (k *kith) claimSSH(handle string, key sshKey) {
	k.t.Helper()
	s := k.challenge(handle, key.pub, "claim")
	if st, code := k.call("POST", "/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: s, Signature: key.sign(k.t, s, "kith")}}, nil); st != 201 {
		k.t.Fatalf("claim %s: %d %s", handle, st, code)
	}
}

// addSSH links key to handle, co-signed by by; claimOnly leaves out
// key's own signature.
func (k *kith) addSSH(handle string, key, by sshKey, claimOnly bool) {
	k.t.Helper()
	s := k.challenge(handle, key.pub, "add")
	req := api.AddRequest{Statement: s, By: by.pub, BySignature: by.sign(k.t, s, "kith")}
	if !claimOnly {
		req.Signature = key.sign(k.t, s, "kith")
	}
	if st, code := k.call("POST", "/api/v1/identities/"+handle+"/factors", req, nil); st != 200 {
		k.t.Fatalf("add to %s: %d %s", handle, st, code)
	}
}

// revokeSSH unlinks key from handle, signed by by.
func (k *kith) revokeSSH(handle string, key, by sshKey) {
	k.t.Helper()
	s := k.challenge(handle, key.pub, "revoke")
	if st, code := k.call("POST", "/api/v1/identities/"+handle+"/revocations", api.RevokeRequest{Statement: s, By: by.pub, Signature: by.sign(k.t, s, "kith")}, nil); st != 200 {
		k.t.Fatalf("revoke from %s: %d %s", handle, st, code)
	}
}

// krl fetches and parses GET /ssh/krl.
func (k *kith) krl() (*ssh.KRL, []byte) {
	k.t.Helper()
	st, body := k.get("/ssh/krl")
	if st != http.StatusOK {
		k.t.Fatalf("GET /ssh/krl: %d %s", st, body)
	}
	krl, err := ssh.ParseKRL([]byte(body))
	if err != nil {
		k.t.Fatal(err)
	}
	return krl, []byte(body)
}

// keygenQuery runs ssh-keygen -Q on a certificate line with the KRL and
// reports whether it is revoked.
func keygenQuery(t *testing.T, krl []byte, certLine string) bool {
	t.Helper()
	dir := t.TempDir()
	kf, cf := filepath.Join(dir, "krl"), filepath.Join(dir, "id-cert.pub")
	os.WriteFile(kf, krl, 0o644)
	os.WriteFile(cf, []byte(certLine+"\n"), 0o644)
	out, err := exec.Command("ssh-keygen", "-Q", "-f", kf, cf).CombinedOutput()
	if err == nil && strings.Contains(string(out), ": ok") {
		return false
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 && strings.Contains(string(out), "REVOKED") {
		return true
	}
	t.Fatalf("ssh-keygen -Q: %v\n%s", err, out)
	return false
}

// TestSSHCertificateIssuedPublishedRevoked: a proven key gets a
// certificate ssh-keygen reads, signed by the CA /ssh/ca.pub serves; it
// is in the identity's document and the log, which verifies; revoking
// the key's link puts its serial in the KRL, where ssh-keygen -Q finds it
// revoked and the other certificate not.
func TestSSHCertificateIssuedPublishedRevoked(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	k := newKith(t)
	dir := t.TempDir()
	a, b := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ecdsa")
	k.claimSSH("nora", a)
	k.addSSH("nora", b, a, false)
	st, code, ca := k.certify("nora", a, api.CertificateRequest{})
	if st != http.StatusCreated {
		t.Fatalf("certificate for a: %d %s", st, code)
	}
	st, code, cb := k.certify("nora", b, api.CertificateRequest{Validity: "1h"})
	if st != http.StatusCreated {
		t.Fatalf("certificate for b: %d %s", st, code)
	}
	status, caLine := k.get("/ssh/ca.pub")
	if status != 200 || strings.TrimSpace(caLine) != ca.CAKey || keyOnly(caLine) != keyOnly(string(ssh.MarshalAuthorizedKey(ssh.NewKey(testCA(t).PublicKey(), "")))) {
		t.Fatalf("GET /ssh/ca.pub: %d %q (answer says %q)", status, caLine, ca.CAKey)
	}
	certFile := filepath.Join(dir, "a-cert.pub")
	os.WriteFile(certFile, []byte(ca.Certificate+"\n"), 0o644)
	out, err := exec.Command("ssh-keygen", "-L", "-f", certFile).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen -L: %v\n%s", err, out)
	}
	for _, want := range []string{"user certificate", "Key ID: \"" + ca.KeyID + "\"", "Principals: \n                nora\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ssh-keygen -L lacks %q:\n%s", want, out)
		}
	}
	if got := cb.ValidBefore.Sub(cb.ValidAfter); got < time.Hour || got > time.Hour+10*time.Minute {
		t.Errorf("a 1h certificate is valid %s", got)
	}

	var doc api.IdentityDoc
	k.call("GET", "/users/nora.json", nil, &doc)
	if len(doc.Certificates) != 2 || doc.Certificates[0].Serial != int64(ca.Serial) || doc.Certificates[0].State != "valid" {
		t.Fatalf("document's certificates: %+v", doc.Certificates)
	}
	recs := k.verifiedLog()
	var certRecs int
	for _, e := range recs {
		if e.Method == identity.MethodSSHCertificate {
			certRecs++
		}
	}
	if certRecs != 2 || recs[ca.Serial-2].Method != identity.MethodSSHCAKey {
		t.Errorf("%d certificate records; record before the first: %s", certRecs, recs[ca.Serial-2].Method)
	}

	krl, raw := k.krl()
	caBlob := testCA(t).PublicKey().Marshal()
	if !krl.NamesCA(caBlob) || krl.Revoked(caBlob, ca.Serial, "") || keygenQuery(t, raw, ca.Certificate) {
		t.Fatalf("before any revocation: %+v", krl)
	}
	k.revokeSSH("nora", b, a)
	krl, raw = k.krl()
	if !krl.Revoked(caBlob, cb.Serial, "") || krl.Revoked(caBlob, ca.Serial, "") {
		t.Errorf("after revoking b: %+v", krl.Certificates)
	}
	if !keygenQuery(t, raw, cb.Certificate) || keygenQuery(t, raw, ca.Certificate) {
		t.Error("ssh-keygen -Q disagrees")
	}
	k.call("GET", "/users/nora.json", nil, &doc)
	if doc.Certificates[1].State != "revoked" || doc.Certificates[0].State != "valid" {
		t.Errorf("document after revoking b: %+v", doc.Certificates)
	}
	// b is no longer proven: no new certificate for it.
	if st, code, _ := k.certify("nora", b, api.CertificateRequest{}); st != http.StatusForbidden || code != "not_proven" {
		t.Errorf("certificate for the revoked key: %d %s", st, code)
	}
	// Once b's certificate expires the list drops it.
	k.clock.Advance(time.Hour + 11*time.Minute)
	if krl, _ = k.krl(); krl.Revoked(caBlob, cb.Serial, "") {
		t.Error("the expired certificate is still listed")
	}
}

// TestSSHCertificateRefusalsHaveCodes: over HTTP, every refusal is its
// status and stable code, and writes nothing to the log.
func TestSSHCertificateRefusalsHaveCodes(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	k := newKith(t)
	dir := t.TempDir()
	a, claimed, stranger := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519")
	k.claimSSH("nora", a)
	k.addSSH("nora", claimed, a, true)
	n := k.logLen()
	for _, tt := range []struct {
		name   string
		run    func() (int, string)
		status int
		code   string
	}{
		{"claimed key", func() (int, string) { st, c, _ := k.certify("nora", claimed, api.CertificateRequest{}); return st, c }, 403, "not_proven"},
		{"unlinked key", func() (int, string) { st, c, _ := k.certify("nora", stranger, api.CertificateRequest{}); return st, c }, 403, "not_proven"},
		{"too long", func() (int, string) {
			st, c, _ := k.certify("nora", a, api.CertificateRequest{Validity: "48h"})
			return st, c
		}, 400, "bad_validity"},
		{"not a duration", func() (int, string) {
			st, c, _ := k.certify("nora", a, api.CertificateRequest{Validity: "soon"})
			return st, c
		}, 400, "bad_validity"},
		{"principal not had", func() (int, string) {
			st, c, _ := k.certify("nora", a, api.CertificateRequest{Principals: []string{"root"}})
			return st, c
		}, 403, "principal_not_allowed"},
		{"unknown handle", func() (int, string) {
			return k.call("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "nobody", Factor: a.pub, Purpose: "certificate"}, nil)
		}, 404, "unknown_identity"},
		{"bad signature", func() (int, string) {
			s := k.challenge("nora", a.pub, "certificate")
			return k.call("POST", "/api/v1/ssh/certificates", api.CertificateRequest{Statement: s, Signature: a.sign(t, s+"x", "kith")}, nil)
		}, 422, "bad_signature"},
		{"signed by another key", func() (int, string) {
			s := k.challenge("nora", a.pub, "certificate")
			return k.call("POST", "/api/v1/ssh/certificates", api.CertificateRequest{Statement: s, Signature: stranger.sign(t, s, "kith")}, nil)
		}, 422, "wrong_key"},
		{"no signature", func() (int, string) {
			s := k.challenge("nora", a.pub, "certificate")
			return k.call("POST", "/api/v1/ssh/certificates", api.CertificateRequest{Statement: s}, nil)
		}, 400, "bad_request"},
		{"a login statement", func() (int, string) {
			s := k.challenge("nora", a.pub, "login")
			return k.call("POST", "/api/v1/ssh/certificates", api.CertificateRequest{Statement: s, Signature: a.sign(t, s, "kith")}, nil)
		}, 422, "wrong_purpose"},
	} {
		st, code := tt.run()
		if st != tt.status || code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, st, code, tt.status, tt.code)
		}
		if m := k.logLen(); m != n {
			t.Errorf("%s: the log grew from %d to %d", tt.name, n, m)
		}
	}

	// A replayed request.
	s := k.challenge("nora", a.pub, "certificate")
	req := api.CertificateRequest{Statement: s, Signature: a.sign(t, s, "kith")}
	if st, code := k.call("POST", "/api/v1/ssh/certificates", req, nil); st != 201 {
		t.Fatalf("certificate: %d %s", st, code)
	}
	if st, code := k.call("POST", "/api/v1/ssh/certificates", req, nil); st != 409 || code != "nonce_used" {
		t.Errorf("replay: %d %s", st, code)
	}
	// Over the rate: ten an hour per identity.
	for i := 1; i < identity.DefaultCertificatesPerHour; i++ {
		if st, code, _ := k.certify("nora", a, api.CertificateRequest{}); st != 201 {
			t.Fatalf("certificate %d: %d %s", i+1, st, code)
		}
	}
	n = k.logLen()
	if st, code, _ := k.certify("nora", a, api.CertificateRequest{}); st != http.StatusTooManyRequests || code != "rate_limited" {
		t.Errorf("certificate %d: %d %s", identity.DefaultCertificatesPerHour+1, st, code)
	}
	if m := k.logLen(); m != n {
		t.Errorf("over the rate: the log grew from %d to %d", n, m)
	}
	k.clock.Advance(time.Hour)
	if st, code, _ := k.certify("nora", a, api.CertificateRequest{}); st != 201 {
		t.Errorf("an hour later: %d %s", st, code)
	}
}

// TestVerifyLogRefusesForgedCertificates: records the server would never
// write, but a holder of the CA key could (a certificate for a key not
// proven for the identity, one signed by a CA the log never published),
// fail verify-log although their signatures verify.
func TestVerifyLogRefusesForgedCertificates(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	k := newKith(t)
	dir := t.TempDir()
	a, b := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519")
	k.claimSSH("nora", a)
	if st, code, _ := k.certify("nora", a, api.CertificateRequest{}); st != 201 {
		t.Fatalf("certificate: %d %s", st, code)
	}
	recs := k.verifiedLog()
	last := recs[len(recs)-1]
	forge := func(ca *ssh.CA, key sshKey) *identity.Evidence {
		t.Helper()
		s := k.challenge("nora", key.pub, "certificate")
		c, err := identity.ParseStatement([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		seq := last.Seq + 1
		now := time.Now().UTC().Truncate(time.Second)
		blob, err := ca.SignUser(ssh.UserCertificate{Key: c.Factor.Data, Serial: uint64(seq), KeyID: identity.CertificateKeyID("nora", seq),
			Principals: []string{"nora"}, ValidAfter: now.Add(-time.Minute), ValidBefore: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		e := &identity.Evidence{Method: identity.MethodSSHCertificate, Purpose: identity.PurposeCertificate, Handle: "nora",
			From: c.Factor, Label: identity.CertificateKeyID("nora", seq), Statement: []byte(s), Signature: []byte(key.sign(t, s, "kith")),
			SignerKey: blob, Created: now, Expires: now.Add(time.Hour)}
		e.Seal(last.Seq, last.Hash)
		if err := verify.Record(e); err != nil {
			t.Fatalf("the forged record does not verify by itself: %v", err)
		}
		return e
	}
	other, err := ssh.NewCA([]byte(strings.Repeat("o", ssh.CASeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]*identity.Evidence{
		"not proven": forge(testCA(t), b),
		"another CA": forge(other, a),
	} {
		var v verify.LogVerifier
		for _, r := range recs {
			v.Add(r)
		}
		fs := v.Add(e)
		if len(fs) == 0 {
			t.Errorf("%s: the forged record verifies", name)
		}
	}
	// The certificate record's own checks: a certificate for another key.
	good := *recs[len(recs)-1]
	good.From = identity.SSHFactor(identity.SSHFingerprint(mustBlob(t, b.pub)), mustBlob(t, b.pub))
	if err := verify.Record(&good); err == nil {
		t.Error("a record naming another key than its certificate's verifies")
	}
}

// mustBlob returns the blob of a key line.
func mustBlob(t *testing.T, line string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.Fields(line)[1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStrangersBindingOfAnSSHKeyGetsNoCertificate: Mallory binds Alice's
// public SSH key into an OpenPGP key of her own as an authentication
// subkey and claims "mallory" with it, so that the SSH key is claimed for
// mallory. Even with a valid signature by the SSH key over a certificate
// statement for mallory (say Alice was tricked into signing one), the
// server issues no certificate; Alice, once she proves the key for
// herself, gets one.
func TestStrangersBindingOfAnSSHKeyGetsNoCertificate(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	alice := malloryClaimsAlicesSSHKey(t, k, g)
	var doc api.IdentityDoc
	k.call("GET", "/users/mallory.json", nil, &doc)
	claimed := false
	for _, f := range doc.Factors {
		claimed = claimed || f.Kind == "ssh" && f.Assurance == "claimed"
	}
	if !claimed {
		t.Fatalf("alice's key is not claimed for mallory: the test proves nothing: %+v", doc.Factors)
	}
	n := k.logLen()
	if st, code, _ := k.certify("mallory", alice, api.CertificateRequest{}); st != http.StatusForbidden || code != "not_proven" {
		t.Fatalf("mallory's certificate for alice's key: %d %s", st, code)
	}
	if m := k.logLen(); m != n {
		t.Errorf("the refusal grew the log from %d to %d", n, m)
	}
	k.claimSSH("alice", alice)
	if st, code, _ := k.certify("alice", alice, api.CertificateRequest{}); st != http.StatusCreated {
		t.Errorf("alice's certificate for her key: %d %s", st, code)
	}
	k.verifiedLog()
}

// TestKRLOfAnotherNodeFollowsARevocation: a node that made its list
// before another node recorded a revocation serves the revocation once
// the append's notification reaches it, not a stale list.
func TestKRLOfAnotherNodeFollowsARevocation(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	k := newKith(t)
	st2, err := postgres.Open(t.Context(), k.dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st2.Close)
	h2 := newHandler(t.Context(), t, st2, api.Options{Watcher: st2})
	waitListening(t, h2)
	srv2 := httptest.NewServer(h2)
	t.Cleanup(srv2.Close)
	dir := t.TempDir()
	a, b := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519")
	k.claimSSH("nora", a)
	k.addSSH("nora", b, a, false)
	st, code, cb := k.certify("nora", b, api.CertificateRequest{})
	if st != 201 {
		t.Fatalf("certificate: %d %s", st, code)
	}
	caBlob := testCA(t).PublicKey().Marshal()
	krl2 := func() *ssh.KRL {
		t.Helper()
		st, body := getFrom(t, srv2.URL+"/ssh/krl")
		krl, err := ssh.ParseKRL([]byte(body))
		if st != 200 || err != nil {
			t.Fatalf("node 2's KRL: %d %v", st, err)
		}
		return krl
	}
	if krl2().Revoked(caBlob, cb.Serial, "") {
		t.Fatal("revoked before the revocation")
	}
	k.revokeSSH("nora", b, a)
	testkit.Eventually(t, 10*time.Second, "node 2's KRL listing the revoked certificate", func() bool {
		return krl2().Revoked(caBlob, cb.Serial, "")
	})
}
