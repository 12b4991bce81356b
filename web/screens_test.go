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
			broken, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](brokenGroups))
			if err != nil {
				t.Fatal(err)
			}
			if len(broken) > 0 {
				t.Errorf("%s at %s width breaks fingerprint groups %q across lines", name, size.name, broken)
			}
			shoot(t, ctx, name+"-"+size.name)
		}
	}
	navigate(t, ctx, s.srv.URL+"/keys/"+fpr)
	if got := text(t, ctx, "#fingerprint"); strings.ReplaceAll(got, " ", "") != fpr {
		t.Errorf("fingerprint %q", got)
	}

	// Copy buttons: one after each command, key and snippet; a click
	// selects what it copies (the clipboard itself is the browser's).
	navigate(t, ctx, s.srv.URL+"/u/nora")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-copy] + button.copy').length`))
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 { // the SSH key, the curl command, the authorized_keys lines, verify-log
		t.Errorf("profile has %d copy buttons, want at least 4", n)
	}
	selected, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.querySelector('#verify-command + button.copy').click(); window.getSelection().toString()`))
	if err != nil {
		t.Fatal(err)
	}
	if selected != "kith verify-log --server "+s.srv.URL {
		t.Errorf("the verify-log copy button took %q", selected)
	}
}

// brokenGroups lists the groups of every fingerprint (.fp) on the page
// that the browser laid out across more than one line.
const brokenGroups = `Array.from(document.querySelectorAll('.fp')).flatMap(el => {
	const out = [];
	const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		for (const m of n.data.matchAll(/\S+/g)) {
			const r = document.createRange();
			r.setStart(n, m.index);
			r.setEnd(n, m.index + m[0].length);
			const tops = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
			if (tops.size > 1) out.push(m[0]);
		}
	}
	return out;
})`
