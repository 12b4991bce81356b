package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web"
)

// spyBody is a request body that records whether anyone read it.
type spyBody struct {
	io.Reader
	read bool
}

func (b *spyBody) Read(p []byte) (int, error) { b.read = true; return b.Reader.Read(p) }

// TestUploadAnswers503WithRetryAfterBeyondConcurrentUploads: while the
// upload path admits no more requests, the upload page answers 503 with
// Retry-After and does not read the body.
func TestUploadAnswers503WithRetryAfterBeyondConcurrentUploads(t *testing.T) {
	st := pgtest.NewStore(t)
	svc, _ := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: "Kith"})
	ks := keys.NewService(st, keys.Options{MaxConcurrentUploads: 1})
	h, err := web.NewHandler(web.Deps{Keys: st, Uploads: ks, Identities: svc, Sessions: st}, web.Options{CSRFKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	held, ok := ks.Admit()
	if !ok {
		t.Fatal("not admitted")
	}
	defer held.Done()
	body := &spyBody{Reader: strings.NewReader("keytext=x")}
	req := httptest.NewRequest(http.MethodPost, "/upload", io.NopCloser(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != strconv.Itoa(keys.UploadRetryAfterSeconds) {
		t.Errorf("upload while busy: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if body.read {
		t.Error("the refused upload's body was read")
	}
}
