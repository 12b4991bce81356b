package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/oidc"
	"github.com/kith-keyserver/kith/oidc/oidctest"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// deviceUser is providerUser in the group the operator maps to a
// principal.
var deviceUser = func() oidctest.User { u := providerUser; u.Groups = []string{"admins", "staff"}; return u }()

// startDeviceProvider is startProvider whose user is in groups and whose
// clients may use the device grant, polled every second; like Dex, it
// hands out an approved device code's token on every poll until the code
// expires.
func startDeviceProvider(t *testing.T) *testProvider {
	t.Helper()
	s, err := oidctest.Start(oidctest.Config{Users: []oidctest.User{deviceUser},
		Clients:   []oidctest.Client{{ID: providerClient, Secret: providerSecret, RedirectURIs: []string{providerRedirect}}},
		AutoLogin: deviceUser.Username, DevicePollInterval: time.Second, ReissueDeviceTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &testProvider{Server: s, hc: s.HTTPClient()}
}

// newDeviceCAServer is newCAServer whose API runs device logins at op,
// asking for scope groups.
func newDeviceCAServer(t *testing.T, cfg Config, op *testProvider) *apiServer {
	t.Helper()
	a := newCAServer(t, cfg)
	key := make([]byte, oidc.CookieKeySize)
	rand.Read(key)
	ps, err := oidc.NewProviders(a.ctx, []oidc.ProviderConfig{{Name: "test", Issuer: op.Issuer, ClientID: providerClient,
		ClientSecret: providerSecret, RedirectURL: providerRedirect, Scopes: []string{"openid", oidctest.ScopeGroups}}},
		oidc.Options{CookieKey: key, HTTPClient: op.HTTPClient(), RequireDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.api, err = api.NewHandler(a.ctx, api.Options{Service: a.svc, Keys: a.store, Watcher: a.store, Providers: ps}); err != nil {
		t.Fatal(err)
	}
	a.srv.Close()
	a.reopenLog()
	return a
}

// shownCode finds the user code and verification URI kith ssh-cert
// --device shows.
var shownCode = regexp.MustCompile(`open on any device\n  (\S+)\nand enter the code\n  (\S+)\n`)

// deviceCert runs kith ssh-cert --device for key as handle, with the
// ssh-agent at sock, approves the code it shows by posting the
// provider's form as the provider's user, and returns what it printed.
func deviceCert(t *testing.T, a *apiServer, op *testProvider, sock, handle string, key sshKeyPair, extra ...string) string {
	t.Helper()
	var out, errOut testkit.SyncBuffer
	env := &environment{stdout: &out, stderr: &errOut, environ: append(os.Environ(), "SSH_AUTH_SOCK="+sock)}
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), env, append([]string{"ssh-cert", handle, "--ssh-key", key.path, "--device", "--server", a.srv.URL}, extra...))
	}()
	var m []string
	testkit.Eventually(t, time.Minute, "kith ssh-cert --device shows a code", func() bool {
		m = shownCode.FindStringSubmatch(out.String())
		return m != nil
	})
	approveAtProvider(t, op, m[1], m[2])
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kith ssh-cert --device: %v\n%s%s", err, out.String(), errOut.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("kith ssh-cert --device did not finish after the approval:\n%s", out.String())
	}
	return out.String()
}

// approveAtProvider opens the provider's verification page and posts its
// form: the user code, the user, approve.
func approveAtProvider(t *testing.T, op *testProvider, verificationURI, userCode string) {
	t.Helper()
	resp, err := op.hc.Get(verificationURI + "?user_code=" + url.QueryEscape(userCode))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `name="user_code" value="`+userCode+`"`) {
		t.Fatalf("the provider's device page does not carry the code:\n%s", page)
	}
	resp, err = op.hc.PostForm(verificationURI, url.Values{"user_code": {userCode}, "username": {deviceUser.Username}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approve at the provider: %s", resp.Status)
	}
}

// postDevice posts in and returns the status and decodes the answer into
// out.
func postDevice(t *testing.T, url string, in, out any) int {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: %s: %v", url, raw, err)
		}
	}
	return resp.StatusCode
}

// TestSSHCertDeviceLoginLogsInUntilRevoked is the done-when test of
// certificates from a login on another device, with a real OpenID
// provider (oidctest: zitadel's OpenID-certified provider library with
// the device grant) and a real sshd. A host's key, linked to nothing,
// gets a certificate from kith ssh-cert --device once the code it shows
// is approved on the provider's form by alice's account; the certificate
// logs in as the local account that alice's group (admins) is mapped to,
// and sits in the ssh-agent, which forgets a certificate at its expiry.
// A login without the group gets a certificate without that principal,
// which does not log in as it. A device code approved for one key's
// request yields no certificate for another key, nor a second one for
// its own (the provider hands the token out again, as Dex does). Revoking
// the account's link and refreshing the KRL refuses the certificate; kith verify-log
// verifies the log with the approvals in it.
func TestSSHCertDeviceLoginLogsInUntilRevoked(t *testing.T) {
	requireSSHDAsRoot(t, "ssh-agent")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	work, keys := t.TempDir(), t.TempDir()
	op := startDeviceProvider(t)
	cfg := defaultConfig()
	cfg.SSHCA.ClaimPrincipals = []string{me.Username + "=groups:admins", "www=groups:web"}
	a := newDeviceCAServer(t, cfg, op)
	login, _ := claimByConsent(t, a, op, "alice", identity.Login{})

	_, krlFile, refreshKRL, port := startCASSHD(t, work, a.srv.URL)
	sock := testkit.SSHAgent(t)

	// The headless host's key, linked to nothing, approved on the
	// provider's form.
	host := newSSHKeyPair(t, keys, "host-user")
	printed := deviceCert(t, a, op, sock, "alice", host, "--validity", "1h")
	hostCert := host.path + "-cert.pub"
	cert := readCert(t, hostCert)
	if !slices.Equal(cert.ValidPrincipals, []string{"alice", me.Username}) {
		t.Errorf("principals %q, want alice and %s (group admins), not www (group web, which alice lacks)", cert.ValidPrincipals, me.Username)
	}
	if !strings.Contains(printed, "principal "+me.Username+": granted by the login's claim groups = \"admins\"") ||
		!strings.Contains(printed, "added to the ssh-agent") {
		t.Errorf("kith ssh-cert --device printed:\n%s", printed)
	}
	if !sshLogin(t, port, me.Username, host.path, "") {
		t.Fatal("the device-approved certificate did not log in")
	}
	if held := testkit.AgentKeys(t, sock); len(held) != 1 || !bytes.Equal(held[0].Blob, cert.Marshal()) {
		t.Fatalf("the agent holds %d keys, want the certificate", len(held))
	}

	// The agent forgets a certificate when it expires.
	brief := newSSHKeyPair(t, keys, "brief")
	deviceCert(t, a, op, sock, "alice", brief, "--validity", "5s")
	briefCert := readCert(t, brief.path+"-cert.pub")
	testkit.Eventually(t, 2*time.Minute, "the agent forgets the expired certificate", func() bool {
		return !slices.ContainsFunc(testkit.AgentKeys(t, sock), func(k *agent.Key) bool { return bytes.Equal(k.Blob, briefCert.Marshal()) })
	})
	if held := testkit.AgentKeys(t, sock); len(held) != 1 {
		t.Errorf("after the brief certificate expired the agent holds %d keys, want the host's certificate", len(held))
	}

	// Without the group, the local account is not a principal.
	staffOnly := deviceUser
	staffOnly.Groups = []string{"staff"}
	op.SetUser(staffOnly)
	tablet := newSSHKeyPair(t, keys, "tablet")
	deviceCert(t, a, op, sock, "alice", tablet, "--agent=false")
	if p := readCert(t, tablet.path+"-cert.pub").ValidPrincipals; !slices.Equal(p, []string{"alice"}) {
		t.Errorf("a login without the group: principals %q, want alice only", p)
	}
	if sshLogin(t, port, me.Username, tablet.path, "") {
		t.Error("a certificate without the group's principal logged in as " + me.Username)
	}
	op.SetUser(deviceUser)

	// The attack: a device code approved for key A's request yields no
	// certificate for key B, whose holder sends A's pending state with
	// B's own signed request; A's request still gets A's certificate.
	keyA, keyB := newSSHKeyPair(t, keys, "victim"), newSSHKeyPair(t, keys, "attacker")
	stmtA, stmtB := a.challenge("alice", keyA.pub, "certificate"), a.challenge("alice", keyB.pub, "certificate")
	sigA, sigB := keyA.sign(t, stmtA), keyB.sign(t, stmtB)
	var da api.DeviceAuthorizationResponse
	if st := postDevice(t, a.srv.URL+"/api/v1/ssh/device-authorizations", api.DeviceAuthorizationRequest{Statement: stmtA, Signature: sigA}, &da); st != http.StatusOK {
		t.Fatalf("start a device login: %d", st)
	}
	approveAtProvider(t, op, da.VerificationURI, da.UserCode)
	var refusal api.ErrorBody
	st := postDevice(t, a.srv.URL+"/api/v1/ssh/device-certificates",
		api.DeviceCertificateRequest{Statement: stmtB, Signature: sigB, Provider: da.Provider, Pending: da.Pending}, &refusal)
	if st != http.StatusUnprocessableEntity || refusal.Error.Code != string(identity.CodeStatementChanged) {
		t.Fatalf("key B with key A's approved device code: %d %+v", st, refusal)
	}
	var issued api.CertificateResponse
	st = postDevice(t, a.srv.URL+"/api/v1/ssh/device-certificates",
		api.DeviceCertificateRequest{Statement: stmtA, Signature: sigA, Provider: da.Provider, Pending: da.Pending}, &issued)
	if st != http.StatusCreated {
		t.Fatalf("key A with its approved device code: %d", st)
	}
	k, err := ssh.ParseAuthorizedKey([]byte(issued.Certificate))
	if err != nil || k.Cert == nil || !ssh.SameKey(k.Cert.Key, sshFactorKey(t, keyA.pub)) {
		t.Fatalf("the approved request's certificate: %v", err)
	}
	// The provider hands out the token again, but the request answers
	// once: one approval, one certificate.
	st = postDevice(t, a.srv.URL+"/api/v1/ssh/device-certificates",
		api.DeviceCertificateRequest{Statement: stmtA, Signature: sigA, Provider: da.Provider, Pending: da.Pending}, &refusal)
	if st != http.StatusConflict || refusal.Error.Code != string(identity.CodeNonceUsed) {
		t.Errorf("the approved request polled again: %d %+v", st, refusal)
	}

	// Revoking the account's link revokes its certificates once the KRL
	// is refreshed.
	if !sshLogin(t, port, me.Username, host.path, "") {
		t.Fatal("the certificate stopped working before the revocation")
	}
	rs := challengeFor(t, a, identity.PurposeRevoke, "alice", login.Account)
	revSalt := salt(t)
	token, jwk := op.idToken(t, identity.ConsentNonce(rs, revSalt), "openid")
	revoker := login
	revoker.IDToken, revoker.SigningKey, revoker.AuthTime = token, jwk, time.Now()
	if err := a.svc.RevokeWithSession(a.ctx, rs, identity.Consent{Login: revoker, Salt: revSalt}); err != nil {
		t.Fatal(err)
	}
	if !sshLogin(t, port, me.Username, host.path, "") {
		t.Fatal("the certificate stopped working before the KRL was refreshed: the test cannot tell what refused it")
	}
	refreshKRL()
	if !keygenRevoked(t, krlFile, hostCert) {
		t.Error("ssh-keygen -Q does not find the certificate revoked")
	}
	if sshLogin(t, port, me.Username, host.path, "") {
		t.Error("the certificate of the revoked account's approval logged in")
	}

	a.integrate()
	if out, errOut, err := kithCmd("verify-log", "--server", a.srv.URL); err != nil {
		t.Fatalf("kith verify-log: %v\n%s%s", err, out, errOut)
	}
}

// challengeFor issues a statement through the Service.
func challengeFor(t *testing.T, a *apiServer, p identity.Purpose, h identity.Handle, f identity.Factor) []byte {
	t.Helper()
	c, err := a.svc.IssueChallenge(a.ctx, p, string(h), f)
	if err != nil {
		t.Fatal(err)
	}
	return c.Statement
}

// readCert reads a -cert.pub file.
func readCert(t *testing.T, path string) *gossh.Certificate {
	t.Helper()
	k, err := ssh.ParseAuthorizedKey(bytes.TrimSpace(mustRead(t, path)))
	if err != nil || k.Cert == nil {
		t.Fatalf("%s: not a certificate: %v", path, err)
	}
	return k.Cert
}

// sshFactorKey is the public key of an SSH key line.
func sshFactorKey(t *testing.T, line string) gossh.PublicKey {
	t.Helper()
	k, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k.Public
}
