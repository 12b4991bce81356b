// harness_test.go: a whole Kith web frontend on a real store (pgtest) and a
// real OpenID provider (oidctest), with browsers (HTTP clients with cookie
// jars) that log in through both, and the real tools (ssh-keygen, gpg).

package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/oidc"
	"github.com/kith-keyserver/kith/oidc/oidctest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The provider's accounts, and Kith's clients there.
var (
	alice = oidctest.User{Subject: "u-1001", Username: "Alice.Liddell", Email: "alice@example.org", EmailVerified: true, Name: "Alice Liddell"}
	bob   = oidctest.User{Subject: "u-1002", Username: "bob", Email: "bob@example.com", EmailVerified: false, Name: "Bob"}
	carol = oidctest.User{Subject: "u-1003", Username: "carol", Email: "carol@example.net", EmailVerified: true, Name: "Carol"}
)

const clientSecret = "s3cr3t-web-client-secret-77d2e0"

// site is one Kith web frontend with its provider.
type site struct {
	t      *testing.T
	store  *postgres.Store
	svc    *identity.Service
	op     *oidctest.Server
	srv    *httptest.Server
	web    *web.Handler
	key    []byte
	logs   *testkit.SyncBuffer
	server string
	// smtp receives the mails the pages send.
	smtp *mailtest.Server
	// mux serves the pages (a test may add other frontends); keys is
	// the upload path.
	mux  *http.ServeMux
	keys *keys.Service
}

// keyBlocklist is the identity Service's blocklist: the keys Service,
// built after it.
type keyBlocklist struct{ keys *keys.Service }

func (b *keyBlocklist) AddBlock(ctx context.Context, blk identity.Block) (identity.BlockOutcome, error) {
	return b.keys.AddBlock(ctx, blk)
}

// newSite starts Kith's web frontend over TLS on loopback with providers
// "kith" and "other" (two clients at one provider) and "stale" (whose ID
// tokens have expired when issued).
func newSite(t *testing.T, opts web.Options) *site {
	t.Helper()
	return newSiteWith(t, opts, true, keys.UploadsOpen)
}

// newKeySite is newSite with no OpenID provider configured in the pages
// (the provider still runs, unknown to them): people log in by key.
func newKeySite(t *testing.T) *site {
	t.Helper()
	return newSiteWith(t, web.Options{}, false, keys.UploadsOpen)
}

// newSiteWith is newSite with or without the OpenID providers in the
// pages, and with the upload policy uploads.
func newSiteWith(t *testing.T, opts web.Options, withProviders bool, uploads keys.UploadPolicy) *site {
	t.Helper()
	s := &site{t: t, store: pgtest.NewStore(t), logs: &testkit.SyncBuffer{}}
	log := slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.key = make([]byte, 32)
	rand.Read(s.key)

	mux := http.NewServeMux()
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.server = "Kith <" + s.srv.URL + ">"

	var clients []oidctest.Client
	var cfgs []oidc.ProviderConfig
	for _, c := range []oidctest.Client{{ID: "kith"}, {ID: "other"}, {ID: "stale", IDTokenLifetime: -time.Hour}} {
		c.Secret = clientSecret
		c.RedirectURIs = []string{s.srv.URL + "/login/" + c.ID + "/callback"}
		clients = append(clients, c)
	}
	op, err := oidctest.Start(oidctest.Config{Users: []oidctest.User{alice, bob, carol}, Clients: clients})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	s.op = op
	for _, c := range clients {
		cfgs = append(cfgs, oidc.ProviderConfig{Name: c.ID, Issuer: op.Issuer, ClientID: c.ID, ClientSecret: clientSecret, RedirectURL: c.RedirectURIs[0]})
	}
	providers, err := oidc.NewProviders(t.Context(), cfgs, oidc.Options{
		CookieKey: s.key, HTTPClient: &http.Client{Transport: op.Transport(), Timeout: 10 * time.Second},
		Logger: log, RequireDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := identity.ParseHostPolicy([]string{"*.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	blocks := &keyBlocklist{}
	ca, err := ssh.NewCA(bytes.Repeat([]byte{0x15}, ssh.CASeedSize))
	if err != nil {
		t.Fatal(err)
	}
	s.svc, err = identity.NewService(s.store, &verify.Verifier{Keys: s.store}, identity.ServiceOptions{Server: s.server, Hosts: hosts, Blocklist: blocks,
		CA: verify.CertificateAuthority{CA: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if opts.CSRFKey == nil {
		opts.CSRFKey = s.key
	}
	opts.Logger = log
	ks := keys.NewService(s.store, keys.Options{Policy: pgp.DefaultPolicy(), Uploads: uploads, Identities: s.svc, Logger: log})
	blocks.keys = ks
	s.mux, s.keys = mux, ks
	s.smtp = mailtest.Start(t, mailtest.Options{})
	deps := web.Deps{Keys: s.store, Uploads: ks, Identities: s.svc, Sessions: s.store, VerifiedEmails: s.store, Emails: s.svc,
		Mailer: &maillink.Mailer{PublicURL: s.srv.URL, Server: s.server, Mail: &mail.SMTP{Address: s.smtp.Addr, From: "kith@keys.example.org"}}}
	if withProviders {
		deps.Providers = providers
	}
	s.web, err = web.NewHandler(deps, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.web.Register(mux)
	return s
}

// browser is an HTTP client with a cookie jar that trusts both servers.
type browser struct {
	s *site
	c *http.Client
	// as is the account the browser last logged in with at the
	// provider, which approves its changes (consent logins).
	as oidctest.User
}

func (s *site) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{s: s, c: &http.Client{Transport: s.op.Transport(), Jar: jar, Timeout: 20 * time.Second}}
}

// page is a fetched page.
type page struct {
	status int
	url    *url.URL
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.s.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, url: resp.Request.URL, body: string(body)}
}

func (b *browser) get(path string) page {
	b.s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.abs(path), nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) page {
	b.s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.abs(path), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (b *browser) abs(path string) string {
	if strings.HasPrefix(path, "https://") {
		return path
	}
	return b.s.srv.URL + path
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of a page's forms.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on %s:\n%s", p.url, p.body)
	}
	return html.UnescapeString(m[1])
}

// field returns the value of a page's hidden input.
func (p page) field(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no field %s on %s", name, p.url)
	}
	return html.UnescapeString(m[1])
}

// beginAtProvider starts a login at Kith's provider name and returns the
// provider's login form's request ID.
func (b *browser) beginAtProvider(name, next string) string {
	t := b.s.t
	t.Helper()
	p := b.get("/login/" + name + "?next=" + url.QueryEscape(next))
	if p.status != http.StatusOK || p.url.Path != "/login" || !strings.HasPrefix(p.url.String(), b.s.op.Issuer) {
		t.Fatalf("begin: want the provider's login form, got %d at %s:\n%s", p.status, p.url, p.body)
	}
	return p.url.Query().Get("authRequestID")
}

// approve logs in at the provider as user and returns the callback URL
// it sends the browser to, without visiting it.
func (b *browser) approve(id string, user oidctest.User) *url.URL {
	t := b.s.t
	t.Helper()
	stop := *b.c
	stop.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), b.s.srv.URL+"/") {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := stop.PostForm(b.s.op.Issuer+"/login", url.Values{"authRequestID": {id}, "username": {user.Username}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("provider login: %s, no redirect back: %v", resp.Status, err)
	}
	return loc
}

// login runs a whole login at provider name as user, following every
// redirect, and returns the page it ends on.
func (b *browser) login(name, next string, user oidctest.User) page {
	b.s.t.Helper()
	if b.as.Subject == "" {
		b.as = user
	}
	return b.get(b.approve(b.beginAtProvider(name, next), user).String())
}

// atProvider returns the request ID of the provider's login form that p
// is, or fails the test.
func (b *browser) atProvider(p page) string {
	t := b.s.t
	t.Helper()
	if p.status != http.StatusOK || p.url.Path != "/login" || !strings.HasPrefix(p.url.String(), b.s.op.Issuer) {
		t.Fatalf("want the provider's login form (a consent login), got %d at %s:\n%s", p.status, p.url, p.body)
	}
	return p.url.Query().Get("authRequestID")
}

// consent approves at the provider, as the browser's account, the change
// whose consent login p is, and returns the page Kith ends on.
func (b *browser) consent(p page) page {
	b.s.t.Helper()
	return b.get(b.approve(b.atProvider(p), b.as).String())
}

// signUp logs in as a new user and claims handle.
func (b *browser) signUp(user oidctest.User, handle string) page {
	t := b.s.t
	t.Helper()
	p := b.login("kith", "/", user)
	if p.url.Path != "/login/choose-handle" {
		t.Fatalf("first login ended at %s, want /login/choose-handle:\n%s", p.url, p.body)
	}
	p = b.consent(b.post("/login/choose-handle", url.Values{"csrf": {p.csrf(t)}, "handle": {handle}}))
	if p.status != http.StatusOK || p.url.Path != "/account" {
		t.Fatalf("claim %s: %d at %s:\n%s", handle, p.status, p.url, p.body)
	}
	return p
}

// cookie returns the browser's cookie of that name (or a __Host- one).
func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.s.srv.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name || c.Name == "__Host-"+name {
			return c
		}
	}
	return nil
}

// logLen is how many evidence records the store holds.
func (s *site) logLen() int {
	s.t.Helper()
	recs, err := s.store.Log(context.Background(), 0, 10000)
	if err != nil {
		s.t.Fatal(err)
	}
	return len(recs)
}

// sshKey makes an Ed25519 key with ssh-keygen and returns its private key
// file and public key line.
func sshKey(t *testing.T) (path, pub string) {
	t.Helper()
	testkit.Tool(t, "ssh-keygen")
	path = filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice@laptop", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(string(b))
}

// sshSign signs the statement as the page says: ssh-keygen -Y sign -n kith.
func sshSign(t *testing.T, keyPath string, statement []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kith-statement.txt")
	if err := os.WriteFile(f, statement, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", "kith", "-f", keyPath, f).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(f + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return string(sig)
}

// linkSSHKey links a key through the account page's challenge.
func (b *browser) linkSSHKey(keyPath, pub string) page {
	t := b.s.t
	t.Helper()
	acct := b.get("/account")
	p := b.post("/account/challenge", url.Values{"csrf": {acct.csrf(t)}, "kind": {"ssh"}, "key": {pub}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "ssh-keygen -Y sign -n kith -f ~/.ssh/id_ed25519") {
		t.Fatalf("challenge: %d:\n%s", p.status, p.body)
	}
	statement, err := base64.StdEncoding.DecodeString(p.field(t, "statement"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.body, html.EscapeString(string(statement))) {
		t.Fatalf("the page does not show the statement it sends back")
	}
	return b.consent(b.post("/account/verify", url.Values{"csrf": {p.csrf(t)}, "statement": {p.field(t, "statement")},
		"label": {p.field(t, "label")}, "signature": {sshSign(t, keyPath, statement)}}))
}
