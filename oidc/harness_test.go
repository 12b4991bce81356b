// harness_test.go: a real OpenID provider (oidctest) and a Kith-side
// server mounting Begin and Finish, with browsers (HTTP clients with cookie
// jars) to drive logins between them.

package oidc

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/oidc/oidctest"
)

// The test provider's accounts and Kith's client there.
var (
	alice = oidctest.User{Subject: "u-1001", Username: "Alice.Liddell", Email: "alice@example.org", EmailVerified: true, Name: "Alice Liddell", Groups: []string{"admins", "staff"}}
	bob   = oidctest.User{Subject: "u-1002", Username: "bob", Email: "bob@example.com", EmailVerified: false, Name: "Bob"}
)

const (
	clientID     = "kith"
	clientSecret = "s3cr3t-client-secret-4f9a1c"
)

// harness is one provider and one Kith server.
type harness struct {
	t      *testing.T
	op     *oidctest.Server
	rp     *httptest.Server
	key    []byte
	logs   *bytes.Buffer
	logger *slog.Logger
	clock  *fakeClock

	mu        sync.Mutex
	providers *Providers
	lastLogin *Login
	lastErr   error
}

// fakeClock is a clock tests can move.
type fakeClock struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.d)
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d += d
}

// newHarness starts Kith's server and a provider that knows the clients
// (whose redirect URIs are filled in), then configures each Kith provider
// with cfgs (Issuer, ClientSecret and RedirectURL filled in when empty).
func newHarness(t *testing.T, clients []oidctest.Client, cfgs ...ProviderConfig) *harness {
	t.Helper()
	h := &harness{t: t, logs: new(bytes.Buffer), clock: new(fakeClock)}
	h.logger = slog.New(slog.NewJSONHandler(lockedWriter{w: h.logs, mu: &h.mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.key = make([]byte, CookieKeySize)
	if _, err := rand.Read(h.key); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/{name}", h.begin)
	mux.HandleFunc("GET /login/{name}/callback", h.finish)
	h.rp = httptest.NewTLSServer(mux)
	t.Cleanup(h.rp.Close)

	for i := range clients {
		if clients[i].RedirectURIs == nil {
			clients[i].RedirectURIs = []string{h.rp.URL + "/login/" + clients[i].ID + "/callback"}
		}
	}
	op, err := oidctest.Start(oidctest.Config{Users: []oidctest.User{alice, bob}, Clients: clients})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	h.op = op

	for i := range cfgs {
		h.fill(&cfgs[i])
	}
	ps, err := NewProviders(context.Background(), cfgs, h.options())
	if err != nil {
		t.Fatal(err)
	}
	h.providers = ps
	return h
}

// defaultHarness has one client, "kith", as Kith's provider "kith".
func defaultHarness(t *testing.T) *harness {
	return newHarness(t, []oidctest.Client{{ID: clientID, Secret: clientSecret}}, ProviderConfig{Name: clientID, ClientID: clientID})
}

// fill completes a provider configuration for this harness. A provider
// named like a client logs in as that client.
func (h *harness) fill(c *ProviderConfig) {
	if c.Issuer == "" {
		c.Issuer = h.op.Issuer
	}
	if c.ClientSecret == "" && c.ClientSecretFile == "" && c.ClientSecretEnv == "" {
		c.ClientSecret = clientSecret
	}
	if c.RedirectURL == "" {
		c.RedirectURL = h.rp.URL + "/login/" + c.Name + "/callback"
	}
}

func (h *harness) options() Options {
	return Options{
		CookieKey:        h.key,
		HTTPClient:       &http.Client{Transport: h.op.Transport(), Timeout: 10 * time.Second},
		Logger:           h.logger,
		Now:              h.clock.now,
		RequireDiscovery: true,
	}
}

func (h *harness) provider(name string) *Provider {
	h.t.Helper()
	p, ok := h.providers.Get(name)
	if !ok {
		h.t.Fatalf("no provider %q", name)
	}
	return p
}

func (h *harness) begin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := BeginOptions{Next: q.Get("next"), Nonce: q.Get("nonce"), Pending: q.Get("pending")}
	if err := h.providers.BeginWith(w, r, r.PathValue("name"), opts); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	}
}

func (h *harness) finish(w http.ResponseWriter, r *http.Request) {
	login, err := h.providers.Finish(w, r, r.PathValue("name"))
	h.mu.Lock()
	h.lastLogin, h.lastErr = login, err
	h.mu.Unlock()
	if err != nil {
		http.Error(w, "login refused", http.StatusForbidden)
		return
	}
	io.WriteString(w, "welcome")
}

// browser returns a new HTTP client with a cookie jar that trusts both
// servers.
func (h *harness) browser() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return &http.Client{Transport: h.op.Transport(), Jar: jar, Timeout: 10 * time.Second}
}

// authorize begins a login at Kith's provider name with next, logs in at
// the provider as user, and returns the callback URL the provider sends
// the browser to, without visiting it.
func (h *harness) authorize(b *http.Client, name, next string, user oidctest.User) *url.URL {
	h.t.Helper()
	return h.authorizeAt(b, h.rp.URL+"/login/"+name+"?next="+url.QueryEscape(next), user)
}

// authorizeAt is authorize from the begin URL given.
func (h *harness) authorizeAt(b *http.Client, begin string, user oidctest.User) *url.URL {
	h.t.Helper()
	resp, err := b.Get(begin)
	if err != nil {
		h.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/login" {
		h.t.Fatalf("begin: want the provider's login form, got %s at %s: %s", resp.Status, resp.Request.URL, body)
	}
	if !bytes.Contains(body, []byte(`name="authRequestID"`)) {
		h.t.Fatalf("no login form: %s", body)
	}
	id := resp.Request.URL.Query().Get("authRequestID")

	stop := *b
	stop.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), h.rp.URL+"/") {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err = stop.PostForm(h.op.Issuer+"/login", url.Values{"authRequestID": {id}, "username": {user.Username}})
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		h.t.Fatalf("login at the provider: %s, no redirect back: %v", resp.Status, err)
	}
	return loc
}

// callback visits the callback URL and returns what Finish returned.
func (h *harness) callback(b *http.Client, u *url.URL) (*Login, error) {
	h.t.Helper()
	h.mu.Lock()
	h.lastLogin, h.lastErr = nil, errors.New("Finish was not called")
	h.mu.Unlock()
	resp, err := b.Get(u.String())
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if (h.lastErr == nil) != (resp.StatusCode == http.StatusOK) {
		h.t.Fatalf("callback answered %s, Finish returned %v", resp.Status, h.lastErr)
	}
	if h.lastErr != nil && h.lastLogin != nil {
		h.t.Fatalf("Finish returned both a Login and an error: %v", h.lastErr)
	}
	return h.lastLogin, h.lastErr
}

// login runs a whole login.
func (h *harness) login(b *http.Client, name, next string, user oidctest.User) (*Login, error) {
	h.t.Helper()
	return h.callback(b, h.authorize(b, name, next, user))
}

// logText returns what was logged so far.
func (h *harness) logText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs.String()
}

// lockedWriter serialises writes to the log buffer.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// wantErr fails unless err wraps every one of want.
func wantErr(t *testing.T, err error, want ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Fatalf("error %q does not wrap %q", err, w)
		}
	}
}
