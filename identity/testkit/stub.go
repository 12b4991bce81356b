// stub.go: stand-ins for a server's answers, for the clients' tests.

package testkit

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// StubServer is an HTTP server on loopback that answers every request
// with the status and body the test last set (200 and nothing at first);
// status 0 makes it hang until the client gives up. It closes when the
// test ends.
type StubServer struct {
	// URL is the server's base URL.
	URL string

	mu     sync.Mutex
	status int
	body   string
}

// NewStubServer starts a StubServer.
func NewStubServer(t testing.TB) *StubServer {
	t.Helper()
	s := &StubServer{status: http.StatusOK}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		status, body := s.status, s.body
		s.mu.Unlock()
		if status == 0 {
			<-r.Context().Done() // the client's timeout, not ours
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Answer sets what the server answers from now on.
func (s *StubServer) Answer(status int, body string) {
	s.mu.Lock()
	s.status, s.body = status, body
	s.mu.Unlock()
}

// DeadURL returns an http URL on loopback that refuses connections.
func DeadURL(t testing.TB) string {
	t.Helper()
	return "http://" + FreeAddr(t)
}

// AuthorizedKeyLine returns a fresh Ed25519 key as an authorized_keys
// line (with its newline).
func AuthorizedKeyLine(t testing.TB) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(gossh.MarshalAuthorizedKey(k))
}
