package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// httpsClient trusts roots only and follows no redirect; dial, if set,
// is where every connection goes (whatever host the URL names).
func httpsClient(roots *x509.CertPool, dial string) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	if dial != "" {
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, dial)
		}
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// fetch GETs (or POSTs, with a body) u with c and returns the response
// with its body read.
func fetch(t *testing.T, c *http.Client, method, u, contentType string, body []byte) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// free443 returns a loopback address 127.0.14.X:443 that was free a
// moment ago: WKD clients ask port 443 only, and an address of its own
// meets no other server on the machine.
func free443(t *testing.T) string {
	t.Helper()
	var last error
	for range 20 {
		addr := fmt.Sprintf("127.0.14.%d:443", 2+mrand.IntN(250))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			return addr
		}
		last = err
	}
	t.Fatalf("no loopback address with a free port 443: %v", last)
	return ""
}

// TestServeHKPSAndWKDOverItsOwnTLS: kith serve with tls.listen and a
// certificate from files (a throwaway CA's). The real gpg sends and
// receives a key over hkps:// (dirmngr trusting the CA through
// hkp-cacert), the address is verified with the mailed link over https,
// and gpg --locate-keys finds the key through WKD at openpgpkey.DOMAIN
// on port 443. The plain listener keeps HKP and sends browsers to https;
// cookies over TLS are Secure.
func TestServeHKPSAndWKDOverItsOwnTLS(t *testing.T) {
	t.Parallel()
	gpg := testkit.Tool(t, "gpg")
	unshare := testkit.Tool(t, "unshare")
	testkit.Root(t, "for port 443 and a private mount namespace")
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(bundle); err != nil {
		t.Fatalf("%s: %v (Debian package ca-certificates)", bundle, err)
	}
	dir := tempDir(t)
	ca := testkit.NewCA(t)
	caFile := ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	tlsAddr := free443(t)
	ip, _, _ := net.SplitHostPort(tlsAddr)
	certFile, keyFile := ca.IssueFiles(t, dir, "kith", ip, "openpgpkey.example.org", "example.org")
	data := filepath.Join(dir, "data")
	s := startServeEnv(t, nil, "--database-url", pgtest.NewDatabase(t), "--data-dir", data,
		"--tls-listen", tlsAddr, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--wkd-domains", "example.org")
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "https://" + ip // port 443
	c := httpsClient(ca.Pool, "")
	if resp, body := fetch(t, c, "GET", base+"/pks/health", "", nil); resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("https health: %d %s", resp.StatusCode, body)
	}

	// The plain listener: HKP as it was, pages sent to https.
	plain := httpsClient(nil, "")
	if resp, _ := fetch(t, plain, "GET", "http://"+s.addr+"/pks/lookup?op=stats&options=mr", "", nil); resp.StatusCode != 200 {
		t.Errorf("plain op=stats: %d, want it answered over http", resp.StatusCode)
	}
	if resp, _ := fetch(t, plain, "GET", "http://"+s.addr+"/login?next=%2F", "", nil); resp.StatusCode != http.StatusMovedPermanently ||
		resp.Header.Get("Location") != "https://127.0.0.1/login?next=%2F" {
		t.Errorf("plain GET /login: %d to %q, want 301 to https", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Over TLS, cookies are Secure (with the __Host- prefix).
	resp, _ := fetch(t, c, "GET", base+"/login", "", nil)
	cookies := resp.Cookies()
	if len(cookies) == 0 {
		t.Fatal("GET /login over https set no cookie")
	}
	for _, ck := range cookies {
		if !ck.Secure || !strings.HasPrefix(ck.Name, "__Host-") {
			t.Errorf("cookie %s over https: Secure %v", ck.Name, ck.Secure)
		}
	}

	// gpg over hkps://, trusting the test CA.
	alice := gpgtest.New(t)
	fpr := alice.NewKey("Alice <alice@example.org>", "sign")
	alice.UseKeyserverURL("hkps://"+ip, "hkp-cacert "+caFile)
	if errOut, err := alice.Try("--send-keys", fpr); err != nil {
		t.Fatalf("gpg --send-keys over hkps: %v\n%s\n%s", err, errOut, s.stderr)
	}
	bob := gpgtest.New(t)
	bob.UseKeyserverURL("hkps://"+ip, "hkp-cacert "+caFile)
	if errOut, err := bob.Try("--recv-keys", fpr); err != nil {
		t.Fatalf("gpg --recv-keys over hkps: %v\n%s", err, errOut)
	}
	if out := bob.Run("", "--with-colons", "--list-keys", fpr); !strings.Contains(string(out), fpr) {
		t.Fatalf("gpg did not import %s over hkps:\n%s", fpr, out)
	}

	// WKD serves verified addresses only: verify alice@example.org with
	// the mailed link (public_url defaults to https://tls.listen).
	b, _ := json.Marshal(map[string]string{"keytext": string(alice.Run("", "--export", "--armor", fpr))})
	resp, body := fetch(t, c, "POST", base+"/vks/v1/upload", "application/json", b)
	var up struct{ Token string }
	if json.Unmarshal([]byte(body), &up); resp.StatusCode != 200 || up.Token == "" {
		t.Fatalf("VKS upload over https: %d %s", resp.StatusCode, body)
	}
	b, _ = json.Marshal(map[string]any{"token": up.Token, "addresses": []string{"alice@example.org"}})
	if resp, body := fetch(t, c, "POST", base+"/vks/v1/request-verify", "application/json", b); resp.StatusCode != 200 {
		t.Fatalf("request-verify: %d %s", resp.StatusCode, body)
	}
	files, _ := filepath.Glob(filepath.Join(data, "outbox", "*.eml"))
	if len(files) != 1 {
		t.Fatalf("outbox: %v", files)
	}
	eml, _ := os.ReadFile(files[0])
	link := strings.Fields(string(eml[bytes.Index(eml, []byte(base+"/email/confirm/")):]))[0]
	if resp, page := fetch(t, c, "POST", link, "", nil); resp.StatusCode != 200 {
		t.Fatalf("follow %s: %d %s", link, resp.StatusCode, page)
	}

	// gpg --locate-keys in a mount namespace of its own, where a hosts
	// file maps the domain's names to Kith's TLS address and the system
	// CA bundle is the test CA (the machine's are never touched); the
	// dirmngr gpg starts there sees both.
	carol := gpgtest.New(t)
	if err := os.WriteFile(filepath.Join(carol.Dir, "dirmngr.conf"), []byte("standard-resolver\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(dir, "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+ip+" openpgpkey.example.org example.org\n"), 0o644)
	script := `mount --bind "$1" /etc/hosts && mount --bind "$2" ` + bundle + ` && exec "$3" --batch --no-tty --auto-key-locate clear,wkd,nodefault --locate-keys alice@example.org`
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", hosts, caFile, gpg)
	cmd.Env = carol.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpg --locate-keys over WKD: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fpr) {
		t.Fatalf("gpg did not locate %s:\n%s", fpr, out)
	}
	s.stop(t)
}
