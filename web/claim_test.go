package web_test

import (
	"bytes"
	"context"
	"html"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// widerThanScreen lists the innermost elements that reach past the right
// edge of the screen (tag, id and start of text), when the page is wider
// than it.
const widerThanScreen = `document.documentElement.scrollWidth <= window.innerWidth ? [] :
	Array.from(document.querySelectorAll('body *')).filter(el => el.getBoundingClientRect().right > window.innerWidth + 0.5 &&
		!Array.from(el.children).some(c => c.getBoundingClientRect().right > window.innerWidth + 0.5)).
	map(el => el.tagName + '#' + el.id + ' ' + (el.textContent || '').trim().slice(0, 60))`

// shootWidths screenshots the page Chromium shows at desktop and phone
// widths (back to desktop after), failing if it is wider than either
// screen.
func shootWidths(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, size := range []struct {
		name string
		w, h int64
	}{{"phone", 390, 844}, {"desktop", 1280, 900}} {
		step(t, ctx, "viewport "+size.name, chromedp.EmulateViewport(size.w, size.h))
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](widerThanScreen))
		if err != nil {
			t.Fatal(err)
		}
		if len(wide) > 0 {
			t.Errorf("%s at %s width is wider than the screen: %q", name, size.name, wide)
		}
		shoot(t, ctx, name+"-"+size.name)
	}
}

var (
	downloadRE = regexp.MustCompile(`id="download"[^>]* href="([^"]+)"`)
	oneLinerRE = regexp.MustCompile(`<pre id="one-liner"[^>]*>([^<]+)</pre>`)
)

// TestClaimInTheBrowser: the claim's sign page offers the statement as a
// download (its exact bytes, final newline included) and a one-line
// command that fetches and signs it; a signature over a copy that lost
// its final newline is refused with that cause named; the one-liner's
// signature claims the handle and logs the browser in, and the page
// says the handle is now the person's.
func TestClaimInTheBrowser(t *testing.T) {
	testkit.Tool(t, "curl")
	s := newKeySite(t)
	b := s.browser()
	k, pub := sshKey(t)
	p := b.keyStatement("/claim", "erin", pub)
	statement := statementOf(t, p)

	m := downloadRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the sign page offers no download:\n%s", p.body)
	}
	resp, err := b.c.Get(b.abs(html.UnescapeString(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, statement) || !bytes.HasSuffix(got, []byte("\n")) {
		t.Fatalf("download: %d, %q; want the statement %q", resp.StatusCode, got, statement)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") || !strings.Contains(cd, "kith-statement.txt") {
		t.Errorf("download served as %q, not as the file kith-statement.txt", cd)
	}
	if other := b.get("/statement?s=PGh0bWw-"); other.status != http.StatusNotFound {
		t.Errorf("a download of something else than a statement: %d", other.status)
	}

	before := s.logLen()
	bad := b.answer("/claim/verify", p, sshSign(t, k, bytes.TrimSuffix(statement, []byte("\n"))), "")
	if bad.status == http.StatusOK || !strings.Contains(bad.body, "without its final newline") {
		t.Fatalf("a signature over the statement without its final newline: %d at %s:\n%s", bad.status, bad.url, bad.body)
	}
	if b.cookie("kith-session") != nil || s.logLen() != before {
		t.Fatal("a refused claim logged in or wrote records")
	}

	m = oneLinerRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the sign page offers no one-liner:\n%s", p.body)
	}
	line := html.UnescapeString(m[1])
	if !strings.HasPrefix(line, "curl -fsS '"+s.srv.URL+"/statement?") || !strings.HasSuffix(line, "' | ssh-keygen -Y sign -n kith -f ~/.ssh/id_ed25519") {
		t.Fatalf("one-liner %q", line)
	}
	// As the person runs it, with the test server's certificate trusted
	// and the test's key.
	line = strings.Replace(line, "curl -fsS", "curl -fsSk", 1)
	line = strings.Replace(line, "~/.ssh/id_ed25519", k, 1)
	sig, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	done := b.answer("/claim/verify", p, string(sig), "")
	if done.status != http.StatusOK || done.url.Path != "/claim/done" || !strings.Contains(done.body, `You now own <span class="handle">erin</span>`) {
		t.Fatalf("claim: %d at %s:\n%s", done.status, done.url, done.body)
	}
	if acct := b.get("/account"); acct.url.Path != "/account" || !strings.Contains(acct.body, `<span id="handle">erin</span>`) {
		t.Fatalf("after the claim, /account: %d at %s", acct.status, acct.url)
	}
}
