package hkp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// spyBody is a request body that records whether anyone read it.
type spyBody struct {
	io.Reader
	read bool
}

func (b *spyBody) Read(p []byte) (int, error) { b.read = true; return b.Reader.Read(p) }
func (b *spyBody) Close() error               { return nil }

func TestAddAnswers503WithRetryAfterBeyondConcurrentUploads(t *testing.T) {
	st := inprocess.New(inprocess.Options{})
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Logger: quietLogger(), MaxConcurrentUploads: 1})
	h := NewHandler(st, ks, Options{Logger: quietLogger()})
	srv := httptest.NewServer(h)
	defer srv.Close()
	key := armored(t, binaryKey(t, newEntity(t, "Alice", "alice@example.org", 1)))

	// A slow upload: its body arrives in two parts, and the server holds
	// its slot while it waits for the second.
	pr, pw := io.Pipe()
	slow := make(chan response, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/pks/add", pr)
		req.Header.Set("Content-Type", "application/pgp-keys")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- response{code: -1, body: err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		slow <- response{code: res.StatusCode, body: string(b)}
	}()
	if _, err := io.WriteString(pw, key[:len(key)/2]); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the slow upload admitted", func() bool { return ks.UploadsInProgress() == 1 })

	// Another upload meanwhile: 503, told when to come back, its body
	// never read.
	body := &spyBody{Reader: strings.NewReader(key)}
	req := httptest.NewRequest("POST", "/pks/add", body)
	req.Header.Set("Content-Type", "application/pgp-keys")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("second upload: %d %s, want 503", rec.Code, rec.Body)
	}
	if ra := rec.Header().Get("Retry-After"); ra != strconv.Itoa(keys.UploadRetryAfterSeconds) {
		t.Errorf("Retry-After %q", ra)
	}
	if body.read {
		t.Error("the refused upload's body was read")
	}

	// The slow upload completes, and gives its slot back.
	if _, err := io.WriteString(pw, key[len(key)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if r := <-slow; r.code != http.StatusOK || !strings.Contains(r.body, "1 inserted") {
		t.Fatalf("slow upload: %d %s", r.code, r.body)
	}
	if n := ks.UploadsInProgress(); n != 0 {
		t.Errorf("%d uploads in progress after both answered", n)
	}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("POST", "/pks/add", strings.NewReader(key))
	req.Header.Set("Content-Type", "application/pgp-keys")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("upload after the slot was freed: %d %s", rec.Code, rec.Body)
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
