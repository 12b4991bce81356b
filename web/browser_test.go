package web_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/web"
)

// chromium starts headless Chromium for t (skipping without it, failing
// with CI=true) and returns a browser context.
func chromium(t *testing.T) context.Context {
	t.Helper()
	path := testkit.AnyTool(t, "chromium", "chromium-browser", "google-chrome")
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// The test server's certificate is httptest's own.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1024, 900),
	)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// shoot saves a full-page screenshot and checks it is a real image.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() < 300 {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("KITH_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	f := filepath.Join(dir, name+".png")
	if err := os.WriteFile(f, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", f)
}

// text returns the visible text of the first element matching sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("element %s: %v", sel, err)
	}
	return s
}

func navigate(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(u)); err != nil {
		t.Fatalf("navigate %s: %v", u, err)
	}
}

// TestChromiumRendersHomeKeyAndAccountPages loads the home page, a key's
// page and the account page in headless Chromium, with real data, and
// checks their elements.
func TestChromiumRendersHomeKeyAndAccountPages(t *testing.T) {
	ctx := chromium(t)
	s := newSite(t, web.Options{})

	e, err := keygen.NewEd25519("Ada Lovelace", "ada@example.org", time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), 7)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if err := keygen.Serialize(&raw, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(raw.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.AddKey(t.Context(), applied); err != nil {
		t.Fatal(err)
	}
	fpr := applied.Describe().FingerprintHex()

	navigate(t, ctx, s.srv.URL+"/")
	if got := text(t, ctx, `form[role=search] label[for=q]`); got != "Search people and keys" {
		t.Errorf("search form label %q", got)
	}
	if _, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(`form[action="/search"] input[name=q]`))); err != nil {
		t.Errorf("no search box: %v", err)
	}
	shoot(t, ctx, "home")

	navigate(t, ctx, s.srv.URL+"/keys/"+fpr)
	if got := text(t, ctx, "#fingerprint"); strings.ReplaceAll(got, " ", "") != fpr { // shown in groups of four
		t.Errorf("fingerprint cell %q, want %s", got, fpr)
	}
	if got := text(t, ctx, ".uid-text"); got != "Ada Lovelace <ada@example.org>" {
		t.Errorf("user ID text %q", got)
	}
	shoot(t, ctx, "key")

	// Log in over HTTP, then hand the session cookie to Chromium.
	b := s.browser()
	b.signUp(alice, "alice")
	c := b.cookie("kith-session")
	secure, httpOnly := true, true
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(tctx, network.SetCookie, network.SetCookieParams{
		Name: c.Name, Value: c.Value, URL: s.srv.URL + "/", Path: "/", Secure: &secure, HTTPOnly: &httpOnly,
		SameSite: network.CookieSameSiteLax,
	}); err != nil {
		t.Fatal(err)
	}
	navigate(t, ctx, s.srv.URL+"/account")
	if got := text(t, ctx, "#handle"); got != "alice" {
		t.Errorf("account page handle %q", got)
	}
	if got := text(t, ctx, "ul.factors li.factor"); !strings.Contains(got, "OpenID Connect account") || !strings.Contains(got, "proven") {
		t.Errorf("account factors %q", got)
	}
	if _, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(`form[action="/account/challenge"] textarea[name=key]`))); err != nil {
		t.Errorf("no SSH link form: %v", err)
	}
	shoot(t, ctx, "account")
}
