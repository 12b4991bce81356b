// server.go: the provider's HTTP server, its configuration and its login
// page.

package oidctest

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is an account at the test provider.
type User struct {
	Subject       string // sub
	Username      string // preferred_username, and what the login form takes
	Email         string
	EmailVerified bool
	Name          string
	// Groups go into the ID token's groups claim when the client asks for
	// scope groups.
	Groups []string
}

// ScopeGroups is the scope that asks for the groups claim.
const ScopeGroups = "groups"

// Client is a client registered at the test provider (a confidential web
// client, or a public one when Secret is empty).
type Client struct {
	ID           string
	Secret       string
	RedirectURIs []string
	// IDTokenLifetime is how long ID tokens are valid (5 minutes when zero);
	// a negative one issues tokens that have already expired.
	IDTokenLifetime time.Duration
	// Audience, when set, is the ID tokens' aud; the provider library adds
	// the client ID to it (and names the client in azp).
	Audience []string
}

// Config configures a Server.
type Config struct {
	Users   []User
	Clients []Client
	// AutoLogin, when set, is the username that GET /login approves at
	// once, without showing the form.
	AutoLogin string
	// DevicePollInterval is the interval the device authorization
	// endpoint asks clients to poll at (whole seconds; 1s when zero).
	DevicePollInterval time.Duration
	// ReissueDeviceTokens has the token endpoint hand out an approved
	// device code's tokens on every poll until the code expires, as Dex
	// does, instead of once.
	ReissueDeviceTokens bool
}

// Server is a running test provider.
type Server struct {
	// Issuer is the provider's issuer URL, https://127.0.0.1:PORT.
	Issuer string

	cfg     Config
	http    *httptest.Server
	op      *op.Provider
	storage *storage
}

// Start runs a provider on a loopback TLS server. Close it when done.
func Start(cfg Config) (*Server, error) {
	key, err := newSigningKey()
	if err != nil {
		return nil, fmt.Errorf("oidctest: signing key: %w", err)
	}
	st := &storage{
		key:      key,
		clients:  make(map[string]*client),
		users:    make(map[string]User),
		requests: make(map[string]*authRequest),
		codes:    make(map[string]string),
		tokens:   make(map[string]string),
		devices:  make(map[string]*deviceAuth),
		reissue:  cfg.ReissueDeviceTokens,
	}
	for _, c := range cfg.Clients {
		st.clients[c.ID] = &client{c}
	}
	for _, u := range cfg.Users {
		st.users[u.Subject] = u
	}
	s := &Server{cfg: cfg, storage: st}
	mux := http.NewServeMux()
	s.http = httptest.NewUnstartedServer(mux)
	s.http.StartTLS() // httptest listens on 127.0.0.1
	s.Issuer = s.http.URL

	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		s.http.Close()
		return nil, fmt.Errorf("oidctest: %w", err)
	}
	s.op, err = op.NewProvider(&op.Config{
		CryptoKey:      cryptoKey,
		CodeMethodS256: true,
		AuthMethodPost: true,
		DeviceAuthorization: op.DeviceAuthorizationConfig{
			Lifetime: 5 * time.Minute, PollInterval: cmp.Or(cfg.DevicePollInterval, time.Second),
			UserFormPath: "/device", UserCode: op.UserCodeBase20,
		},
	}, st, op.StaticIssuer(s.Issuer))
	if err != nil {
		s.http.Close()
		return nil, fmt.Errorf("oidctest: provider: %w", err)
	}
	mux.HandleFunc("/login", s.login)
	mux.HandleFunc("/device", s.device)
	mux.Handle("/", s.op)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.http.Close() }

// HTTPClient returns a new client that trusts the server's certificate,
// with no cookie jar.
func (s *Server) HTTPClient() *http.Client {
	c := s.http.Client()
	return &http.Client{Transport: c.Transport}
}

// Transport returns a transport that trusts the server's certificate (and
// that of any other httptest TLS server, which share one).
func (s *Server) Transport() http.RoundTripper { return s.http.Client().Transport }

// AddClient registers a client (or replaces one of the same ID).
func (s *Server) AddClient(c Client) {
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	s.storage.clients[c.ID] = &client{c}
}

// SignWithUnpublishedKey makes the provider sign tokens with a fresh key
// that its key set does not list (on), or with its published key again
// (off).
func (s *Server) SignWithUnpublishedKey(on bool) error {
	var k *signingKey
	if on {
		var err error
		if k, err = newSigningKey(); err != nil {
			return fmt.Errorf("oidctest: signing key: %w", err)
		}
	}
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	s.storage.unlisted = k
	return nil
}

// CodesIssued returns how many authorization codes the provider has issued.
func (s *Server) CodesIssued() int {
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	return s.storage.codesIssue
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<title>Test provider login</title>
<form method="post" action="/login">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label>Username <input name="username" value="{{.Username}}"></label>
<button type="submit">Log in</button>
</form>
`))

// login is the provider's login page: GET shows the form (or approves at
// once with AutoLogin), POST approves the request as the named user and
// sends the browser back through the provider's callback.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Form.Get("authRequestID")
	username := r.Form.Get("username")
	if r.Method == http.MethodGet {
		if s.cfg.AutoLogin == "" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			def := ""
			if len(s.cfg.Users) > 0 {
				def = s.cfg.Users[0].Username
			}
			_ = loginForm.Execute(w, struct{ ID, Username string }{id, def})
			return
		}
		username = s.cfg.AutoLogin
	} else if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := s.storage.approve(id, username); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	// The provider's own callback turns the approved request into a code.
	http.Redirect(w, r, s.op.AuthorizationEndpoint().Absolute(s.Issuer)+"/callback?id="+id, http.StatusFound)
}

// SetUser adds a user, or replaces the one with the same subject (its
// groups, say): later logins and tokens see the new one.
func (s *Server) SetUser(u User) {
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	s.storage.users[u.Subject] = u
}
