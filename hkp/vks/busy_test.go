package vks_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/pgp"
)

func TestUploadAnswers503WithRetryAfterBeyondConcurrentUploads(t *testing.T) {
	st := inprocess.New(inprocess.Options{})
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Logger: slog.New(slog.DiscardHandler), MaxConcurrentUploads: 1})
	h, err := vks.NewHandler(st, ks, nil, nil, vks.Options{PublicURL: "http://test", Server: "Kith <http://test>",
		TokenKey: bytes.Repeat([]byte{7}, 32), Mailer: &mail.SMTP{Address: "127.0.0.1:1", From: "kith@test"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)

	// Another upload request holds the only slot, and keeps it past
	// keys.UploadAdmitWait: the upload is read, then refused.
	held, ok := ks.Admit(t.Context())
	if !ok {
		t.Fatal("not admitted")
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/vks/v1/upload", strings.NewReader(`{"keytext": "-----BEGIN PGP PUBLIC KEY BLOCK-----"}`)))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != strconv.Itoa(keys.UploadRetryAfterSeconds) {
		t.Errorf("upload while busy: %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	held.Done()
	// With the slot free, the same request is read (and refused for what
	// it holds, a truncated key).
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/vks/v1/upload", strings.NewReader(`{"keytext": "-----BEGIN PGP PUBLIC KEY BLOCK-----"}`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("upload with the slot free: %d %s, want 400", rec.Code, rec.Body)
	}
	if n := ks.UploadsInProgress(); n != 0 {
		t.Errorf("%d uploads in progress after the answer", n)
	}
}
