package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSearchFindsPeople: a handle, @handle, an SSH fingerprint and an
// OpenPGP fingerprint find the identity; exact ones jump to its page;
// I'm Feeling Lucky jumps to the best match; revoked user IDs are marked,
// listed last and never primary.
func TestSearchFindsPeople(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	k1, pub1 := sshKey(t)
	if p := b.claimByKey("nora", k1, pub1); p.url.Path != "/claim/done" {
		t.Fatalf("claim: %d at %s", p.status, p.url)
	}
	fp := sshFactor(t, pub1).Value

	g := newGnuPG(t)
	fpr := g.newKey("Nora Example <nora@example.org>")
	g.run("", "--quick-add-uid", fpr, "Old Nora <old@example.org>")
	g.run("", "--quick-revoke-uid", fpr, "Old Nora <old@example.org>")
	if p := b.upload(g.run("", "--export", "--armor", fpr)); p.status != http.StatusOK {
		t.Fatalf("upload: %d\n%s", p.status, p.body)
	}

	for _, tc := range []struct{ q, want string }{
		{"nora", "/u/nora"},
		{"@nora", "/u/nora"},
		{"@NORA", "/u/nora"},
		{fp, "/u/nora"},
		{fpr, "/keys/" + fpr},
	} {
		if p := b.get("/search?q=" + url.QueryEscape(tc.q)); p.url.Path != tc.want {
			t.Errorf("search %q ended at %s, want %s", tc.q, p.url.Path, tc.want)
		}
	}
	if p := b.get("/search?q=" + url.QueryEscape("SHA256:"+strings.Repeat("A", 43))); p.status != http.StatusOK || !strings.Contains(p.body, "no identity has that handle") {
		t.Errorf("search for an unknown SSH key: %d\n%s", p.status, p.body)
	}
	if p := b.get("/search?q=nobody-here"); p.url.Path != "/search" {
		t.Errorf("search for an unknown handle jumped to %s", p.url)
	}
	// Lucky: a word search jumps to its best (first) key.
	if p := b.get("/search?lucky=1&q=" + url.QueryEscape("nora@example.org")); p.url.Path != "/keys/"+fpr {
		t.Errorf("lucky search ended at %s", p.url)
	}

	// The word search lists the revoked user ID last, marked.
	p := b.get("/search?q=" + url.QueryEscape("nora example"))
	live, old := strings.Index(p.body, "Nora Example &lt;nora@example.org&gt;"), strings.Index(p.body, "Old Nora &lt;old@example.org&gt;")
	if live < 0 || old < live || !strings.Contains(p.body[old:], "revoked") {
		t.Errorf("search results: live user ID at %d, revoked at %d:\n%s", live, old, p.body)
	}
	kp := b.get("/keys/" + fpr)
	live, old = strings.Index(kp.body, "Nora Example"), strings.Index(kp.body, "Old Nora")
	if live < 0 || old < live {
		t.Errorf("key page lists the revoked user ID first")
	}
	if seg := kp.body[old:]; strings.Contains(seg[:min(len(seg), 400)], ">primary<") {
		t.Errorf("key page marks the revoked user ID primary")
	}
}
