package hkp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

func TestAddAnswers503WithRetryAfterBeyondConcurrentUploads(t *testing.T) {
	st := inprocess.New(inprocess.Options{})
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Logger: quietLogger(), MaxConcurrentUploads: 1})
	h := NewHandler(st, ks, Options{Logger: quietLogger()})
	upload := func(body io.Reader) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/pks/add", body)
		req.Header.Set("Content-Type", "application/pgp-keys")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	alice := armored(t, binaryKey(t, newEntity(t, "Alice", "alice@example.org", 1)))
	bob := armored(t, binaryKey(t, newEntity(t, "Bob", "bob@example.org", 2)))

	// A slow upload: the handler has read half of its body and waits for
	// the rest. It holds no slot meanwhile: another upload, under a cap of
	// one, is admitted and stored.
	pr, pw := io.Pipe()
	slow := make(chan *httptest.ResponseRecorder, 1)
	go func() { slow <- upload(pr) }()
	if _, err := io.WriteString(pw, alice[:len(alice)/2]); err != nil { // returns once the handler read it
		t.Fatal(err)
	}
	if rec := upload(strings.NewReader(bob)); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "1 inserted") {
		t.Errorf("upload beside a slow one: %d %s", rec.Code, rec.Body)
	}
	if _, err := io.WriteString(pw, alice[len(alice)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if rec := <-slow; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "1 inserted") {
		t.Fatalf("slow upload: %d %s", rec.Code, rec.Body)
	}

	// Another request holds the only slot past keys.UploadAdmitWait: the
	// upload is read, then refused with 503, told when to come back.
	held, ok := ks.Admit(t.Context())
	if !ok {
		t.Fatal("not admitted")
	}
	rec := upload(strings.NewReader(alice))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("upload while busy: %d %s, want 503", rec.Code, rec.Body)
	}
	if ra := rec.Header().Get("Retry-After"); ra != strconv.Itoa(keys.UploadRetryAfterSeconds) {
		t.Errorf("Retry-After %q", ra)
	}

	// The slot given back, the upload is admitted.
	held.Done()
	if rec := upload(strings.NewReader(alice)); rec.Code != http.StatusOK {
		t.Errorf("upload after the slot was freed: %d %s", rec.Code, rec.Body)
	}
	if n := ks.UploadsInProgress(); n != 0 {
		t.Errorf("%d uploads in progress after the answers", n)
	}
}

func TestAddRefusesSignatureBombCheaply(t *testing.T) {
	ts := newTestServer(t, Options{})
	raw, err := keygen.Bomb{Exponent: 65537}.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := ts.add(armored(t, raw))
	if r.code != http.StatusUnprocessableEntity || !strings.Contains(r.body, pgp.ErrVerifyBudget.Error()) {
		t.Errorf("bomb: %d %s", r.code, r.body)
	}
}
