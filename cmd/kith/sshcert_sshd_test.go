package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// newCAServer is newAPIServer whose Service issues certificates with the
// CA kept in the store's secrets, as kith serve with ssh_ca.enabled does,
// under cfg's [ssh_ca] settings.
func newCAServer(t *testing.T, cfg Config) *apiServer {
	t.Helper()
	a := newAPIServer(t)
	cfg.SSHCA.Enabled = true
	ca, policy, err := certificateAuthority(a.ctx, cfg, a.store)
	if err != nil {
		t.Fatal(err)
	}
	if a.svc, err = newIdentityServiceWithCA(a.store, "Kith test", testHostPolicy(t), a.store, ca, policy, 0); err != nil {
		t.Fatal(err)
	}
	if a.api, err = api.NewHandler(a.ctx, api.Options{Service: a.svc, Keys: a.store, Watcher: a.store}); err != nil {
		t.Fatal(err)
	}
	a.srv.Close()
	a.reopenLog()
	return a
}

// startCASSHD installs the user CA key and the revocation list of the
// Kith server at server into work, as the README has an operator do, and
// starts an sshd that trusts the one and reads the other; refreshKRL
// fetches the list again.
func startCASSHD(t *testing.T, work, server string) (caFile, krlFile string, refreshKRL func(), port int) {
	t.Helper()
	caFile, krlFile = filepath.Join(work, "kith_user_ca.pub"), filepath.Join(work, "kith.krl")
	out, _, err := kithCmd("ssh-ca-key", "--server", server)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(caFile, []byte(out), 0o644)
	refreshKRL = func() {
		t.Helper()
		if out, errOut, err := kithCmd("krl", "--server", server, "--ca-key", caFile, "--out", krlFile); err != nil {
			t.Fatalf("kith krl: %v\n%s%s", err, out, errOut)
		}
	}
	refreshKRL()
	port = startSSHD(t, newSSHKeyPair(t, work, "host_ed25519").path, "TrustedUserCAKeys "+caFile, "RevokedKeys "+krlFile).port
	return caFile, krlFile, refreshKRL, port
}

// sshLogin tries to log in as login with the key file and, when not
// empty, the certificate file; it reports whether the login worked.
func sshLogin(t *testing.T, port int, login, key, cert string) bool {
	t.Helper()
	args := []string{"-i", key, "-p", fmt.Sprint(port),
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ConnectTimeout=10", "-F", "/dev/null"}
	if cert != "" {
		args = append(args, "-o", "CertificateFile="+cert)
	}
	out, err := exec.Command("ssh", append(args, login+"@127.0.0.1", "true")...).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 {
			t.Fatalf("ssh: %v\n%s", err, out)
		}
		return false
	}
	return true
}

// keygenRevoked runs ssh-keygen -Q and reports whether the KRL revokes
// the certificate.
func keygenRevoked(t *testing.T, krl, cert string) bool {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-Q", "-f", krl, cert).CombinedOutput()
	if err == nil && strings.Contains(string(out), ": ok") {
		return false
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 && strings.Contains(string(out), "REVOKED") {
		return true
	}
	t.Fatalf("ssh-keygen -Q: %v\n%s", err, out)
	return false
}

// TestSSHCertLogsInUntilRevokedAndKRLRefreshed is the done-when test of
// SSH certificates, with real OpenSSH: a real sshd trusts the Kith CA
// (TrustedUserCAKeys written by kith ssh-ca-key) and reads the KRL
// (RevokedKeys written by kith krl). A certificate from kith ssh-cert
// logs in as the principal the operator gave the identity; after the
// key's link is revoked and kith krl run again, it does not; an expired
// certificate does not; bob's certificate, without that principal, does
// not, and bob cannot get one for it. kith verify-log verifies the log
// with every ssh.certificate record in it.
func TestSSHCertLogsInUntilRevokedAndKRLRefreshed(t *testing.T) {
	requireSSHDAsRoot(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	work, keys := t.TempDir(), t.TempDir()
	// The operator gives alice the local account as a principal.
	principals := filepath.Join(work, "principals")
	os.WriteFile(principals, []byte("# handle principals\nalice "+me.Username+"\n"), 0o644)
	cfg := defaultConfig()
	cfg.SSHCA.PrincipalsFile = principals
	a := newCAServer(t, cfg)
	laptop := newSSHKeyPair(t, keys, "laptop")
	desktop := newSSHKeyPair(t, keys, "desktop")
	bobKey := newSSHKeyPair(t, keys, "bob")
	a.claim("alice", laptop)
	a.add("alice", desktop, laptop, false)
	a.claim("bob", bobKey)

	// The sshd side: the CA key and the revocation list, as the README
	// has an operator install them.
	caFile, krlFile, refreshKRL, port := startCASSHD(t, work, a.srv.URL)

	// The user side: kith ssh-cert writes KEY-cert.pub, which plain ssh
	// picks up beside the key.
	certify := func(handle string, k sshKeyPair, extra ...string) (string, error) {
		t.Helper()
		out, errOut, err := kithCmd(append([]string{"ssh-cert", handle, "--ssh-key", k.path, "--server", a.srv.URL}, extra...)...)
		if err != nil {
			return "", fmt.Errorf("%w: %s%s", err, out, errOut)
		}
		return k.path + "-cert.pub", nil
	}
	laptopCert, err := certify("alice", laptop)
	if err != nil {
		t.Fatal(err)
	}
	desktopCert, err := certify("alice", desktop, "--validity", "2h")
	if err != nil {
		t.Fatal(err)
	}
	if !sshLogin(t, port, me.Username, laptop.path, "") {
		t.Fatal("the laptop's certificate, beside its key, did not log in")
	}
	if !sshLogin(t, port, me.Username, desktop.path, "") {
		t.Fatal("the desktop's certificate did not log in")
	}
	// Without the certificate the key alone gets nowhere.
	os.Rename(laptopCert, laptopCert+".off")
	if sshLogin(t, port, me.Username, laptop.path, "") {
		t.Fatal("the plain key logged in: the test proves nothing")
	}
	os.Rename(laptopCert+".off", laptopCert)

	// A principal the identity does not have: bob's certificate names
	// only bob, and he cannot get the local account as a principal.
	if _, err := certify("bob", bobKey); err != nil {
		t.Fatal(err)
	}
	if sshLogin(t, port, me.Username, bobKey.path, "") {
		t.Error("bob's certificate logged in as " + me.Username)
	}
	if _, err := certify("bob", bobKey, "--principals", me.Username); err == nil || !strings.Contains(err.Error(), "principal_not_allowed") {
		t.Errorf("bob asking for principal %s: %v", me.Username, err)
	}

	// Revoking the desktop's link revokes its certificate once the KRL is
	// refreshed; the laptop's still logs in.
	a.revoke("alice", desktop, laptop)
	if !sshLogin(t, port, me.Username, desktop.path, "") {
		t.Fatal("the desktop's certificate stopped working before the KRL was refreshed: the test cannot tell what refused it")
	}
	refreshKRL()
	if !keygenRevoked(t, krlFile, desktopCert) || keygenRevoked(t, krlFile, laptopCert) {
		t.Fatal("ssh-keygen -Q does not find the desktop's certificate, and only it, revoked")
	}
	if sshLogin(t, port, me.Username, desktop.path, "") {
		t.Error("the revoked desktop certificate logged in")
	}
	if !sshLogin(t, port, me.Username, laptop.path, "") {
		t.Error("the laptop's certificate stopped working")
	}
	if _, err := certify("alice", desktop); err == nil || !strings.Contains(err.Error(), "not_proven") {
		t.Errorf("a certificate for the revoked key: %v", err)
	}

	// An expired certificate: issued by a node whose clock is two days
	// behind, over the same store and CA; valid 16 hours from then.
	past := time.Now().Add(-48 * time.Hour)
	cfg.SSHCA.Enabled = true
	ca, policy, err := certificateAuthority(a.ctx, cfg, a.store)
	if err != nil {
		t.Fatal(err)
	}
	old, err := identity.NewService(a.store, &verify.Verifier{Keys: a.store}, identity.ServiceOptions{Server: "Kith test",
		Now: func() time.Time { return past }, CA: ca, Certificates: policy})
	if err != nil {
		t.Fatal(err)
	}
	c, err := old.IssueChallenge(context.Background(), identity.PurposeCertificate, "alice", sshFactor(t, laptop.pub))
	if err != nil {
		t.Fatal(err)
	}
	expired, err := old.IssueCertificate(context.Background(), identity.CertificateRequest{Statement: c.Statement, Signature: []byte(laptop.sign(t, string(c.Statement)))})
	if err != nil {
		t.Fatal(err)
	}
	if !expired.ValidBefore.Before(time.Now()) {
		t.Fatalf("the old node's certificate is valid until %s", expired.ValidBefore)
	}
	// The laptop's key again, with the expired certificate beside it
	// (and not the valid one).
	again := filepath.Join(keys, "laptop-again")
	priv, err := os.ReadFile(laptop.path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(again, priv, 0o600)
	os.WriteFile(again+"-cert.pub", sshLine(t, expired.Certificate), 0o644)
	if sshLogin(t, port, me.Username, again, "") {
		t.Error("the expired certificate logged in")
	}
	os.WriteFile(again+"-cert.pub", mustRead(t, laptopCert), 0o644)
	if !sshLogin(t, port, me.Username, again, "") {
		t.Fatal("the same key with its valid certificate did not log in: the test proves nothing")
	}

	// kith krl never goes back to an older list: with a newer one
	// installed, it refuses and keeps the file.
	caBlob := mustBlob(t, string(mustRead(t, caFile)))
	newer := (&ssh.KRL{Version: 1 << 62, Certificates: []ssh.RevokedCertificates{{CA: caBlob}}}).Marshal()
	newerFile := filepath.Join(work, "newer.krl")
	os.WriteFile(newerFile, newer, 0o644)
	if _, _, err := kithCmd("krl", "--server", a.srv.URL, "--ca-key", caFile, "--out", newerFile); err == nil || !strings.Contains(err.Error(), "older") {
		t.Errorf("kith krl over a newer list: %v", err)
	}
	if got := mustRead(t, newerFile); string(got) != string(newer) {
		t.Error("kith krl replaced a newer list")
	}
	// A list naming another CA is refused.
	otherCA := filepath.Join(work, "other_ca.pub")
	os.WriteFile(otherCA, []byte(bobKey.pub+"\n"), 0o644)
	if _, _, err := kithCmd("krl", "--server", a.srv.URL, "--ca-key", otherCA, "--out", filepath.Join(work, "other.krl")); err == nil || !strings.Contains(err.Error(), "names none of the CA keys") {
		t.Errorf("kith krl expecting another CA: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "other.krl")); err == nil {
		t.Error("kith krl wrote a list for another CA")
	}
	// Every issuance is a log record that kith verify-log re-verifies.
	a.integrate()
	if out, errOut, err := kithCmd("verify-log", "--server", a.srv.URL); err != nil {
		t.Fatalf("kith verify-log: %v\n%s%s", err, out, errOut)
	}
	var doc api.IdentityDoc
	resp, err := http.Get(a.srv.URL + "/users/alice.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, c := range doc.Certificates {
		states[c.State]++
	}
	if states["valid"] != 1 || states["revoked"] != 1 || states["expired"] != 1 {
		t.Errorf("alice's document lists certificates %v, want one valid, one revoked, one expired", states)
	}
}

// sshFactor is the factor of an SSH key line.
func sshFactor(t *testing.T, line string) identity.Factor {
	t.Helper()
	k, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return identity.SSHFactor(k.Fingerprint().String(), k.Underlying().Marshal())
}

// sshLine is a key or certificate blob as a line.
func sshLine(t *testing.T, blob []byte) []byte {
	t.Helper()
	pub, err := gossh.ParsePublicKey(blob)
	if err != nil {
		t.Fatal(err)
	}
	return gossh.MarshalAuthorizedKey(pub)
}

// mustBlob is the blob of a key line.
func mustBlob(t *testing.T, line string) []byte {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("not a key line: %q", line)
	}
	b, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
