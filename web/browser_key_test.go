package web_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/identity"
)

// step runs browser actions with a deadline, failing t with what.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s (at %s): %v", what, loc, err)
	}
}

// signInBrowser answers the sign page Chromium shows: it reads the
// statement the page shows, checks that it is the one the form sends
// back, signs it with each key and pastes the signatures.
func signInBrowser(t *testing.T, ctx context.Context, fields map[string]string) {
	t.Helper()
	step(t, ctx, "sign page", chromedp.WaitVisible(chromedp.CSS("#statement")))
	shown := text(t, ctx, "#statement")
	enc, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name=statement]`)))
	if err != nil {
		t.Fatal(err)
	}
	statement, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(shown) != strings.TrimSpace(string(statement)) {
		t.Fatalf("the page shows\n%s\nbut sends back\n%s", shown, statement)
	}
	if cmd := text(t, ctx, "#command"); !strings.HasPrefix(cmd, "ssh-keygen -Y sign -n kith -f ") {
		t.Errorf("sign command %q", cmd)
	}
	for field, key := range fields {
		step(t, ctx, "paste "+field, chromedp.SetValue(chromedp.CSS("#"+field), sshSign(t, key, statement)))
	}
	step(t, ctx, "send the signature", chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
}

// TestChromiumClaimLinkAndLoginByKey: in headless Chromium, with no
// OpenID provider configured, a person claims a handle with an SSH key,
// logs in by signing a login statement, links a second key, and sees
// the profile's picture: one node per factor.
func TestChromiumClaimLinkAndLoginByKey(t *testing.T) {
	ctx := chromium(t)
	s := newKeySite(t)
	k1, pub1 := sshKey(t)
	k2, pub2 := sshKey(t)

	navigate(t, ctx, s.srv.URL+"/")
	step(t, ctx, "follow the login link", chromedp.Click(chromedp.CSS(`header nav a[href="/login"]`)), chromedp.WaitVisible(chromedp.CSS("#claim-link")))
	step(t, ctx, "follow the claim link", chromedp.Click(chromedp.CSS("#claim-link")), chromedp.WaitVisible(chromedp.CSS(`form[action="/claim"]`)))
	step(t, ctx, "fill in the claim",
		chromedp.SetValue(chromedp.CSS("#handle"), "nora"),
		chromedp.SetValue(chromedp.CSS("#key"), pub1),
		chromedp.Click(chromedp.CSS(`form[action="/claim"] button[type=submit]`)))
	step(t, ctx, "sign page", chromedp.WaitVisible(chromedp.CSS("#one-liner")))
	shootWidths(t, ctx, "claim-sign")
	// A signature over a copy that lost its final newline: the page says so.
	enc, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`input[name=statement]`)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "paste a signature over the statement without its final newline",
		chromedp.SetValue(chromedp.CSS("#signature"), sshSign(t, k1, []byte(strings.TrimSuffix(string(st), "\n")))),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#problem")))
	if got := text(t, ctx, "#problem"); !strings.Contains(got, "without its final newline") {
		t.Errorf("refusal %q names no cause", got)
	}
	shootWidths(t, ctx, "claim-hint")
	signInBrowser(t, ctx, map[string]string{"signature": k1})

	// The one signature claimed the handle and logged the browser in.
	step(t, ctx, "claimed page", chromedp.WaitVisible(chromedp.CSS("#claimed")))
	if got := text(t, ctx, "#claimed"); got != "You now own nora" {
		t.Errorf("claimed page heading %q", got)
	}
	shootWidths(t, ctx, "claimed")
	step(t, ctx, "account page", chromedp.Click(chromedp.CSS("#account-link")), chromedp.WaitVisible(chromedp.CSS("#key-session-note")))
	if got := text(t, ctx, "#handle"); got != "nora" {
		t.Fatalf("account page handle %q", got)
	}

	// Link the second key: signed by it and by the key logged in with.
	step(t, ctx, "ask to link k2",
		chromedp.SetValue(chromedp.CSS("#sshkey"), pub2),
		chromedp.Click(chromedp.CSS(`form[action="/account/challenge"] button[type=submit]`)))
	signInBrowser(t, ctx, map[string]string{"signature": k2, "by_signature": k1})
	step(t, ctx, "linked", chromedp.WaitVisible(chromedp.CSS(`p.note[role=status]`)))
	if got := text(t, ctx, `p.note[role=status]`); !strings.Contains(got, "The key is linked") {
		t.Fatalf("after linking: %q", got)
	}

	navigate(t, ctx, s.srv.URL+"/u/nora")
	step(t, ctx, "profile picture", chromedp.WaitVisible(chromedp.CSS("#identity-picture")))
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#identity-picture g.node')).map(n => n.dataset.kind + ' ' + n.dataset.level)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0] != "ssh proven" || nodes[1] != "ssh proven" {
		t.Errorf("picture nodes %q, want two proven SSH keys", nodes)
	}
	edges, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#identity-picture g.edge text')).map(n => n.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		if !strings.Contains(e, "ssh.challenge") {
			t.Errorf("edge label %q does not say how the key was proven", e)
		}
	}
	if got := text(t, ctx, "#verify-command"); got != "kith verify-log --server "+s.srv.URL {
		t.Errorf("verify command %q", got)
	}
	shoot(t, ctx, "profile-by-key")

	// A certificate for k1, then k2 revoked: the profile and the account
	// page fold k2 away with no copy button and list the certificate.
	f1, f2 := sshFactor(t, pub1), sshFactor(t, pub2)
	c, err := s.svc.IssueChallenge(t.Context(), identity.PurposeCertificate, "nora", f1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.IssueCertificate(t.Context(), identity.CertificateRequest{Statement: c.Statement, Signature: []byte(sshSign(t, k1, c.Statement))}); err != nil {
		t.Fatal(err)
	}
	if c, err = s.svc.IssueChallenge(t.Context(), identity.PurposeRevoke, "nora", f2); err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Revoke(t.Context(), identity.RevokeRequest{Statement: c.Statement, By: identity.Proof{Factor: f1, Signature: []byte(sshSign(t, k1, c.Statement))}}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/u/nora", "/account"} {
		navigate(t, ctx, s.srv.URL+path)
		step(t, ctx, path+" certificates", chromedp.WaitVisible(chromedp.CSS(`li.certificate[data-state=valid]`)))
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#inactive-factors [data-copy], #inactive-factors button.copy').length`))
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: the revoked key has %d copyable parts", path, n)
		}
		step(t, ctx, "unfold "+path, chromedp.Click(chromedp.CSS("#inactive-factors > summary")))
		shootWidths(t, ctx, strings.Trim(strings.ReplaceAll(path, "/", "-"), "-")+"-revoked")
	}
}
