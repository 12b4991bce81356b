package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/identity"
)

// TestChromiumPagesFitDesktopAndPhone renders home, search, a key, the
// upload form and a profile (with an SSH key and an OpenPGP key, one user
// ID revoked), then the claim's statement page, and logged in the
// account page with its sessions and the profile, at desktop and phone
// widths: no page is wider than the screen, the header takes at most two
// rows, dates and commands do not break inside, and each page is saved
// as a screenshot (KITH_SCREENSHOT_DIR keeps them) to look at.
func TestChromiumPagesFitDesktopAndPhone(t *testing.T) {
	ctx := chromium(t)
	s := newKeySite(t)
	b := s.browser()
	k1, pub1 := sshKey(t)
	_, pub2 := sshKey(t)
	b.claimByKey("nora", k1, pub1)
	g := newGnuPG(t)
	fpr := g.newKey("Nora Example <nora@example.org>")
	g.run("", "--quick-add-uid", fpr, "Nora at work <nora@work.example>")
	g.run("", "--quick-revoke-uid", fpr, "Nora at work <nora@work.example>")
	carol := g.newKey("Carol Certifier <carol@example.org>")
	g.run("", "--local-user", carol, "--quick-sign-key", fpr)
	b.upload(g.run("", "--export", "--armor", carol))
	b.upload(g.run("", "--export", "--armor", fpr))
	revoked := g.newKey("Old Nora <nora@old.example>")
	g.run("", "--quick-add-key", revoked, "ed25519", "sign", "2y")
	b.upload(g.run("", "--export", "--armor", revoked))
	b.upload(revokeKey(t, revoked, g.run("", "--export-secret-keys", revoked)))
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
		"upload":  "/upload",
		// A revoked key, with a signing subkey that expires.
		"key-revoked": "/keys/" + revoked,
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		step(t, ctx, "viewport "+size.name, chromedp.EmulateViewport(size.w, size.h))
		for name, path := range pages {
			navigate(t, ctx, s.srv.URL+path)
			checkLayout(t, ctx, name, size.name)
		}
		// The statement to sign for a claim.
		navigate(t, ctx, s.srv.URL+"/claim")
		step(t, ctx, "claim zoe",
			chromedp.SetValue(chromedp.CSS("#handle"), "zoe"),
			chromedp.SetValue(chromedp.CSS("#key"), pub2),
			chromedp.Click(chromedp.CSS(`form[action="/claim"] button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS("#statement")))
		checkLayout(t, ctx, "claim-statement", size.name)
	}

	// Logged in (by key, the session cookie handed to Chromium): the
	// header, the account page's sessions and the profile.
	b.loginByKey("nora", k1, pub1)
	cookie := b.cookie("kith-session")
	secure, httpOnly := true, true
	if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{
		Name: cookie.Name, Value: cookie.Value, URL: s.srv.URL + "/", Path: "/", Secure: &secure, HTTPOnly: &httpOnly,
		SameSite: network.CookieSameSiteLax,
	}); err != nil {
		t.Fatal(err)
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		step(t, ctx, "viewport "+size.name, chromedp.EmulateViewport(size.w, size.h))
		for name, path := range map[string]string{"account": "/account", "profile-logged-in": "/u/nora"} {
			navigate(t, ctx, s.srv.URL+path)
			checkLayout(t, ctx, name, size.name)
			rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](headerRows))
			if err != nil {
				t.Fatal(err)
			}
			if rows > 2 {
				t.Errorf("%s at %s width: the logged-in header takes %d rows", name, size.name, rows)
			}
		}
		navigate(t, ctx, s.srv.URL+"/account")
		cramped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](crampedCells))
		if err != nil {
			t.Fatal(err)
		}
		if len(cramped) > 0 {
			t.Errorf("the sessions table at %s width breaks %q into a line per word", size.name, cramped)
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

// checkLayout fails t when the page is wider than the screen or breaks a
// fingerprint group, a date or a command's word across lines, and saves
// a screenshot.
func checkLayout(t *testing.T, ctx context.Context, name, size string) {
	t.Helper()
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if wide {
		t.Errorf("%s at %s width is wider than the screen", name, size)
	}
	broken, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](brokenGroups))
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) > 0 {
		t.Errorf("%s at %s width breaks fingerprint groups, dates or command words %q across lines", name, size, broken)
	}
	shoot(t, ctx, name+"-"+size)
}

// headerRows counts the rows the site header's brand and navigation
// items take.
const headerRows = `(() => {
	const boxes = Array.from(document.querySelectorAll('header.site .brand, header.site nav li')).map(el => el.getBoundingClientRect()).sort((a, b) => a.top - b.top);
	let rows = 0, bottom = -Infinity;
	for (const r of boxes) {
		if (r.top >= bottom - 1) { rows++; bottom = r.bottom; } else { bottom = Math.max(bottom, r.bottom); }
	}
	return rows;
})()`

// crampedCells lists the sessions table's cells of several words that
// the browser laid out one word per line.
const crampedCells = `Array.from(document.querySelectorAll('table[aria-labelledby=sessions] td')).filter(td => {
	const words = td.textContent.trim().split(/\s+/).length;
	const lh = parseFloat(getComputedStyle(td).lineHeight) || 24;
	const pad = parseFloat(getComputedStyle(td).paddingTop) + parseFloat(getComputedStyle(td).paddingBottom);
	return words > 1 && Math.round((td.clientHeight - pad) / lh) >= words;
}).map(td => td.textContent.trim())`

// brokenGroups lists the groups of every fingerprint (.fp), date (.date)
// and command word (.cmd .nobr) on the page that the browser laid out
// across more than one line.
const brokenGroups = `Array.from(document.querySelectorAll('.fp, .date, .cmd .nobr')).flatMap(el => {
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
