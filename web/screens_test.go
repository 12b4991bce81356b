package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/identity"
)

// TestChromiumPagesFitDesktopAndPhone renders home, search, a key and a
// profile (with an SSH key and an OpenPGP key, one user ID revoked) at
// desktop and phone widths: no page is wider than the screen, and each is
// saved as a screenshot (KITH_SCREENSHOT_DIR keeps them) to look at.
func TestChromiumPagesFitDesktopAndPhone(t *testing.T) {
	ctx := chromium(t)
	s := newKeySite(t)
	b := s.browser()
	k1, pub1 := sshKey(t)
	b.claimByKey("nora", k1, pub1)
	g := newGnuPG(t)
	fpr := g.newKey("Nora Example <nora@example.org>")
	g.run("", "--quick-add-uid", fpr, "Nora at work <nora@work.example>")
	g.run("", "--quick-revoke-uid", fpr, "Nora at work <nora@work.example>")
	b.upload(g.run("", "--export", "--armor", fpr))
	pf, err := identity.ParsePGPFingerprint(fpr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.svc.IssueChallenge(t.Context(), identity.PurposeAdd, "nora", pf)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Add(t.Context(), identity.AddRequest{Statement: c.Statement,
		New: &identity.Proof{Signature: []byte(g.run(string(c.Statement), "--local-user", fpr, "--clearsign"))},
		By:  &identity.Proof{Factor: sshFactor(t, pub1), Signature: []byte(sshSign(t, k1, c.Statement))}}); err != nil {
		t.Fatal(err)
	}

	pages := map[string]string{
		"home":    "/",
		"search":  "/search?q=" + url.QueryEscape("nora example"),
		"key":     "/keys/" + fpr,
		"profile": "/u/nora",
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		step(t, ctx, "viewport "+size.name, chromedp.EmulateViewport(size.w, size.h))
		for name, path := range pages {
			navigate(t, ctx, s.srv.URL+path)
			wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
			if err != nil {
				t.Fatal(err)
			}
			if wide {
				t.Errorf("%s at %s width is wider than the screen", name, size.name)
			}
			shoot(t, ctx, name+"-"+size.name)
		}
	}
	// The key page's fingerprint groups never break inside a group.
	navigate(t, ctx, s.srv.URL+"/keys/"+fpr)
	if got := text(t, ctx, "#fingerprint"); strings.ReplaceAll(got, " ", "") != fpr {
		t.Errorf("fingerprint %q", got)
	}
}
