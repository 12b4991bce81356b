package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/web"
)

// TestUploadAnswers503BeyondConcurrentUploads: while every upload slot is
// taken (and stays so past keys.UploadAdmitWait), the upload page reads
// the form and answers 503, saying to come back; once a slot is free the
// same upload is admitted and checked.
func TestUploadAnswers503BeyondConcurrentUploads(t *testing.T) {
	s := newSite(t, web.Options{})
	var held []*keys.Admission
	for range keys.DefaultMaxConcurrentUploads() {
		a, ok := s.keys.Admit(t.Context())
		if !ok {
			t.Fatal("not admitted")
		}
		held = append(held, a)
	}
	b := s.browser()
	upload := func() page {
		form := b.get("/upload")
		return b.post("/upload", url.Values{"csrf": {form.csrf(t)}, "keytext": {"x"}})
	}
	if up := upload(); up.status != http.StatusServiceUnavailable || !strings.Contains(up.body, "Try again in a few seconds") {
		t.Errorf("upload while busy: %d:\n%s", up.status, up.body)
	}
	held[0].Done()
	if up := upload(); up.status != http.StatusUnprocessableEntity {
		t.Errorf("upload with a slot free: %d, want 422 (admitted, and nothing in it is a key):\n%s", up.status, up.body)
	}
	for _, a := range held[1:] {
		a.Done()
	}
	if n := s.keys.UploadsInProgress(); n != 0 {
		t.Errorf("%d uploads in progress after the answers", n)
	}
}
