package web_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/web"
)

// TestUploadPageFollowsTheUploadPolicy: under hkp.uploads = "identities"
// the upload page refuses a visitor's unproven key with the reason and
// takes the same key from a logged-in person; a blocked key is refused
// as blocked.
func TestUploadPageFollowsTheUploadPolicy(t *testing.T) {
	s := newSiteWith(t, web.Options{}, true, keys.UploadsIdentities)
	g := newGnuPG(t)
	fpr := g.newKey("Dana Scully <dana@example.org>")
	armored := g.run("", "--armor", "--export", fpr)

	visitor := s.browser()
	up := visitor.upload(armored)
	if up.status != http.StatusUnprocessableEntity || !strings.Contains(up.body, "accepts only keys proven for one of its identities") {
		t.Fatalf("visitor's upload: %d:\n%s", up.status, up.body)
	}
	if p := visitor.get("/keys/" + fpr); p.status != http.StatusNotFound {
		t.Fatalf("the refused key has a page: %d", p.status)
	}

	member := s.browser()
	member.signUp(alice, "alice")
	if up := member.upload(armored); up.status != http.StatusOK || !strings.Contains(up.body, "inserted") {
		t.Fatalf("logged-in upload: %d:\n%s", up.status, up.body)
	}

	raw, err := hex.DecodeString(fpr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.AddBlock(context.Background(), identity.Block{Fingerprint: raw, Reason: "test", Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	if up := member.upload(armored); up.status != http.StatusUnprocessableEntity || !strings.Contains(up.body, "blocked on this server") {
		t.Fatalf("upload of a blocked key: %d:\n%s", up.status, up.body)
	}
}

// TestUploadFormNamesThisServerAndTakesAFile: the upload form names the
// server's own HKP address for gpg --send-keys (not a placeholder), and
// a key file (gpg's binary export) chosen in the form is stored as
// pasted text is, within the same size cap.
func TestUploadFormNamesThisServerAndTakesAFile(t *testing.T) {
	s := newSiteWith(t, web.Options{MaxUploadSize: 64 << 10}, false, keys.UploadsOpen)
	b := s.browser()
	form := b.get("/upload")
	hkpAddr := "hkps://" + strings.TrimPrefix(s.srv.URL, "https://")
	if strings.Contains(form.body, "this-server") || !strings.Contains(form.body, `<span class="nobr">`+hkpAddr+`</span> <span class="nobr">--send-keys</span>`) {
		t.Errorf("the form does not name %s for --send-keys:\n%s", hkpAddr, form.body)
	}
	if !strings.Contains(form.body, `type="file"`) || !strings.Contains(form.body, `enctype="multipart/form-data"`) {
		t.Fatalf("the form has no file input:\n%s", form.body)
	}

	g := newGnuPG(t)
	fpr := g.newKey("Dana Scully <dana@example.org>")
	send := func(file []byte) page {
		t.Helper()
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		mw.WriteField("csrf", form.csrf(t))
		mw.WriteField("keytext", "")
		fw, err := mw.CreateFormFile("keyfile", "dana.gpg")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
		mw.Close()
		req, _ := http.NewRequest(http.MethodPost, b.abs("/upload"), &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return b.do(req)
	}
	if up := send([]byte(g.run("", "--export", fpr))); up.status != http.StatusOK || !strings.Contains(up.body, "inserted") || !strings.Contains(up.body, fpr) {
		t.Fatalf("file upload: %d:\n%s", up.status, up.body)
	}
	if p := b.get("/keys/" + fpr); p.status != http.StatusOK {
		t.Errorf("the uploaded file's key has no page: %d", p.status)
	}
	if up := send(bytes.Repeat([]byte("x"), 80<<10)); up.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a file over the cap: %d:\n%s", up.status, up.body)
	}
}
