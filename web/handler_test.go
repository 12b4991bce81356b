package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web"
)

// panickyKeys is a key store whose searches panic.
type panickyKeys struct{ keys.Reader }

func (panickyKeys) FindKeys(context.Context, keys.Query) ([]keys.Stored, bool, error) {
	panic("the key store exploded")
}

// TestPanicBecomesAnErrorPage: a panic in a page is logged and answered
// with a 500 page that does not show it.
func TestPanicBecomesAnErrorPage(t *testing.T) {
	st := pgtest.NewStore(t)
	svc, _ := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: "Kith"})
	h, err := web.NewHandler(web.Deps{Keys: panickyKeys{st}, Uploads: keys.NewService(st, keys.Options{}), Identities: svc, Sessions: st},
		web.Options{CSRFKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/search?q=alice", nil))
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "exploded") {
		t.Fatalf("panic: %d:\n%s", rec.Code, rec.Body)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	// Without login providers, the login page says so and the key pages work.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/login/kith", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("login without providers: %d", rec.Code)
	}
}

// TestNewHandlerRefusesShortCSRFKey: the CSRF key must be 32 bytes or more.
func TestNewHandlerRefusesShortCSRFKey(t *testing.T) {
	st := pgtest.NewStore(t)
	svc, _ := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: "Kith"})
	if _, err := web.NewHandler(web.Deps{Keys: st, Uploads: keys.NewService(st, keys.Options{}), Identities: svc, Sessions: st}, web.Options{CSRFKey: make([]byte, 16)}); err == nil {
		t.Fatal("a 16-byte CSRF key was accepted")
	}
}
