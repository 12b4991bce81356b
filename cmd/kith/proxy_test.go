package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address local (127.0.0.2 is another peer than 127.0.0.1 to the server).
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// challenge asks srv for an identity challenge as the client c, with an
// X-Forwarded-For of xff ("" for none), and returns the status: 429 when
// the client's budget is spent, 400 (the body names no factor) otherwise.
func challenge(t *testing.T, c *http.Client, srv *server, xff string) int {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+srv.addr+"/api/v1/challenges", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	return resp.StatusCode
}

// TestLimitsHoldPerClientBehindATrustedProxy: with trusted_proxies, each
// address a trusted proxy names in X-Forwarded-For has a budget of its
// own (IPv6 by /64), and what a client wrote left of the proxy's entry
// changes nothing; from a peer outside trusted_proxies the header is
// ignored, and all its requests share the peer's budget. Before
// trusted_proxies, every client behind a proxy shared the proxy's.
func TestLimitsHoldPerClientBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	srv := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t),
		"--trusted-proxies", "127.0.0.1/32", "--challenges-per-minute", "2")
	srv.waitHealth(t, 200, 2*time.Minute)
	proxy, stranger := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	spend := func(c *http.Client, xff string) {
		t.Helper()
		for i := range 2 {
			if code := challenge(t, c, srv, xff); code == http.StatusTooManyRequests {
				t.Fatalf("X-Forwarded-For %q: request %d refused within the budget\n%s", xff, i+1, srv.stderr.String())
			}
		}
	}
	refused := func(c *http.Client, xff, why string) {
		t.Helper()
		if code := challenge(t, c, srv, xff); code != http.StatusTooManyRequests {
			t.Errorf("X-Forwarded-For %q: %d, want 429: %s", xff, code, why)
		}
	}
	// Through the trusted proxy: one budget per client.
	spend(proxy, "203.0.113.1")
	refused(proxy, "203.0.113.1", "the client's budget is spent")
	refused(proxy, "198.51.100.99, 203.0.113.1", "an address the client wrote left of the proxy's entry bought a budget")
	spend(proxy, "203.0.113.2")
	spend(proxy, "") // the proxy's own requests are its own client
	// IPv6 clients by /64.
	spend(proxy, "2001:db8:1:2::1")
	refused(proxy, "2001:db8:1:2:ffff::7", "another address of the same /64 got a budget")
	spend(proxy, "2001:db8:1:3::1")

	// From an untrusted peer the header is ignored: one budget.
	if code := challenge(t, stranger, srv, "192.0.2.1"); code == http.StatusTooManyRequests {
		t.Fatal("the untrusted peer's first request refused")
	}
	if code := challenge(t, stranger, srv, "192.0.2.2"); code == http.StatusTooManyRequests {
		t.Fatal("the untrusted peer's second request refused")
	}
	refused(stranger, "192.0.2.3", "an untrusted peer bought a budget per X-Forwarded-For")
}

// TestForwardedHeadersAreIgnoredWithoutTrustedProxies: by default no peer
// is trusted: X-Forwarded-For and Forwarded change no client's budget.
func TestForwardedHeadersAreIgnoredWithoutTrustedProxies(t *testing.T) {
	t.Parallel()
	srv := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t), "--challenges-per-minute", "2")
	srv.waitHealth(t, 200, 2*time.Minute)
	c := clientFrom("127.0.0.1")
	for i, xff := range []string{"203.0.113.1", "203.0.113.2"} {
		if code := challenge(t, c, srv, xff); code == http.StatusTooManyRequests {
			t.Fatalf("request %d refused within the budget", i+1)
		}
	}
	if code := challenge(t, c, srv, "203.0.113.3"); code != http.StatusTooManyRequests {
		t.Errorf("a third X-Forwarded-For: %d, want 429 (the header bought a budget)", code)
	}
	req, _ := http.NewRequest("POST", "http://"+srv.addr+"/api/v1/challenges", strings.NewReader("{}"))
	req.Header.Set("Forwarded", "for=203.0.113.4")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("Forwarded: %d, want 429 (the header bought a budget)", resp.StatusCode)
	}
	if _, errOut, err := kithExecErr(t, "serve", "--trusted-proxies", "10.0.0.0/33"); err == nil || !strings.Contains(errOut, "setting trusted_proxies") {
		t.Errorf("a bad trusted_proxies: %v %s", err, errOut)
	}
}

// send makes one request as the client behind the proxy named by xff and
// returns the status.
func send(t *testing.T, srv *server, xff, method, path, contentType, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+srv.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-Forwarded-For", xff)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s %s: 429 without Retry-After", method, path)
	}
	return resp.StatusCode
}

// TestUploadAndEmailLookupBudgetsAreSharedAcrossRoutes: through the real
// binary behind a trusted proxy, a client's uploads count alike through
// HKP and VKS, and its lookups by email through HKP, VKS and the pages:
// switching protocols buys no new budget; another client has its own;
// lookups by fingerprint are free.
func TestUploadAndEmailLookupBudgetsAreSharedAcrossRoutes(t *testing.T) {
	t.Parallel()
	srv := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t), "--trusted-proxies", "127.0.0.0/8",
		"--uploads-per-minute", "2", "--email-lookups-per-minute", "3")
	srv.waitHealth(t, 200, 2*time.Minute)
	const form = "application/x-www-form-urlencoded"
	hkpAdd := func(xff, uid string) int {
		return send(t, srv, xff, "POST", "/pks/add", form, url.Values{"keytext": {armoredKey(t, uid)}}.Encode())
	}
	vksUpload := func(xff, uid string) int {
		b, _ := json.Marshal(map[string]string{"keytext": armoredKey(t, uid)})
		return send(t, srv, xff, "POST", "/vks/v1/upload", "application/json", string(b))
	}
	if code := hkpAdd("203.0.113.1", "Alice <alice@example.org>"); code != http.StatusOK {
		t.Fatalf("first upload: %d", code)
	}
	if code := vksUpload("203.0.113.1", "Bob <bob@example.org>"); code != http.StatusOK {
		t.Fatalf("second upload, through VKS: %d", code)
	}
	if code := hkpAdd("203.0.113.1", "Carol <carol@example.org>"); code != http.StatusTooManyRequests {
		t.Errorf("third upload, through HKP: %d, want 429", code)
	}
	if code := vksUpload("203.0.113.1", "Carol <carol@example.org>"); code != http.StatusTooManyRequests {
		t.Errorf("third upload, through VKS: %d, want 429", code)
	}
	if code := send(t, srv, "203.0.113.1", "POST", "/pks/v2/certs", "application/pgp", armoredKey(t, "Carol <carol@example.org>")); code != http.StatusTooManyRequests {
		t.Errorf("third upload, through HKP v2: %d, want 429", code)
	}
	if code := hkpAdd("203.0.113.2", "Carol <carol@example.org>"); code != http.StatusOK {
		t.Errorf("another client's upload: %d", code)
	}

	get := func(xff, path string) int { return send(t, srv, xff, "GET", path, "", "") }
	for i, path := range []string{"/pks/lookup?op=get&options=mr&search=alice@example.org",
		"/vks/v1/by-email/alice@example.org", "/search?q=alice%40example.org"} {
		if code := get("203.0.113.1", path); code == http.StatusTooManyRequests {
			t.Fatalf("lookup by email %d (%s) refused within the budget", i+1, path)
		}
	}
	if code := get("203.0.113.1", "/pks/lookup?op=index&options=mr&search=alice"); code != http.StatusOK {
		t.Errorf("a search by words counted as one by email: %d", code)
	}
	for _, path := range []string{"/pks/lookup?op=index&options=mr&search=bob@example.org",
		"/vks/v1/by-email/bob@example.org", "/search?q=bob@example.org", "/pks/v2/certs/by-identity/bob@example.org",
		"/pks/v2/index/bob@example.org", "/pks/v2/canonical/bob@example.org"} {
		if code := get("203.0.113.1", path); code != http.StatusTooManyRequests {
			t.Errorf("%s past the budget: %d, want 429", path, code)
		}
	}
	if code := get("203.0.113.2", "/vks/v1/by-email/alice@example.org"); code == http.StatusTooManyRequests {
		t.Error("another client's lookup by email refused")
	}
}
