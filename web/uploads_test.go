package web_test

import (
	"context"
	"encoding/hex"
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
