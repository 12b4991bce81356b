package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// replaceOnce replaces old with new in s and fails unless old occurs
// exactly once, so that the README and this test cannot drift apart.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("README nginx snippet: %q occurs %d times, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// TestREADMENginxConfig takes the README's "Behind a proxy" nginx snippet
// and settings, checks the snippet with nginx -t, and runs it, as an
// unprivileged nginx on free loopback ports, in front of a real kith
// serve with the README's trusted_proxies. Clients reach nginx from
// distinct loopback addresses: each keeps a budget of its own through
// the proxy, and an X-Forwarded-For a client sends itself buys nothing.
// HTTPS and the WKD location reach Kith too.
func TestREADMENginxConfig(t *testing.T) {
	t.Parallel()
	nginx := testkit.Tool(t, "nginx")
	snippet := readmeBlock(t, "nginx", "upstream kith")
	settings := readmeBlock(t, "toml", "trusted_proxies")

	dir := tempDir(t)
	conf := filepath.Join(dir, "kith.toml")
	if err := os.WriteFile(conf, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	// The README's settings; the test's own address, database and a
	// small budget.
	srv := startServe(t, dir, nil, "--config", conf, "--database-url", pgtest.NewDatabase(t),
		"--challenges-per-minute", "2", "--wkd-domains", "example.org")

	// nginx's files, in a directory an unprivileged nginx owns.
	ngx := filepath.Join(dir, "nginx")
	for _, d := range []string{"", "tmp"} {
		if err := os.Mkdir(filepath.Join(ngx, d), 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	ca := testkit.NewCA(t)
	cert, key := ca.IssueFiles(t, ngx, "kith", "keys.example.org", "openpgpkey.example.org")
	// nginx runs as nobody when the test runs as root.
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	hkpPort, tlsPort := testkit.FreePort(t), testkit.FreePort(t)
	site := replaceOnce(t, snippet, "server 127.0.0.1:8080;", "server "+srv.addr+";")
	site = replaceOnce(t, site, "listen 11371;", fmt.Sprintf("listen 127.0.0.1:%d;", hkpPort))
	site = replaceOnce(t, site, "listen 443 ssl;", fmt.Sprintf("listen 127.0.0.1:%d ssl;", tlsPort))
	// The machine may have no IPv6.
	site = replaceOnce(t, site, "listen [::]:11371;", "")
	site = replaceOnce(t, site, "listen [::]:443 ssl;", "")
	site = replaceOnce(t, site, "/etc/ssl/kith/fullchain.pem", cert)
	site = replaceOnce(t, site, "/etc/ssl/kith/privkey.pem", key)
	for _, line := range strings.Split(site, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if m := regexp.MustCompile(`/etc/\S*`).FindString(line); m != "" {
			t.Fatalf("README nginx snippet: a path the test does not replace: %s", m)
		}
	}
	os.WriteFile(filepath.Join(ngx, "kith.conf"), []byte(site), 0o644)
	// What /etc/nginx/nginx.conf would hold, for one process in the
	// foreground that writes only below ngx.
	tmp := filepath.Join(ngx, "tmp")
	main := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[1]s/kith.conf;
}
`, ngx, tmp)
	mainConf := filepath.Join(ngx, "nginx.conf")
	os.WriteFile(mainConf, []byte(main), 0o644)

	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// Unprivileged: nobody, owning its directory.
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		filepath.Walk(ngx, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
		os.Chmod(dir, 0o755)
	}
	nginxCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command(nginx, append([]string{"-e", "stderr", "-p", ngx, "-c", mainConf}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	if out, err := nginxCmd("-t").CombinedOutput(); err != nil {
		t.Fatalf("nginx -t refuses the README's snippet: %v\n%s\n%s", err, out, site)
	}
	run := nginxCmd()
	var log testkit.SyncBuffer
	run.Stdout, run.Stderr = &log, &log
	if err := subprocess.Start(run, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { run.Wait(); close(exited) }()
	t.Cleanup(func() { run.Process.Kill(); <-exited })

	hkpURL := fmt.Sprintf("http://127.0.0.1:%d", hkpPort)
	direct := clientFrom("127.0.0.1")
	if !testkit.PollEvery(2*time.Minute, 50*time.Millisecond, func() bool {
		select {
		case <-exited:
			t.Fatalf("nginx exited:\n%s", log.String())
		case <-srv.exited:
			t.Fatalf("kith serve exited (%v):\n%s", srv.err, srv.stderr.String())
		default:
		}
		resp, err := direct.Get(hkpURL + "/pks/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("kith behind nginx not healthy:\n%s\n%s", log.String(), srv.stderr.String())
	}

	viaNginx := &server{addr: fmt.Sprintf("127.0.0.1:%d", hkpPort)}
	alice, bob := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	for i := range 2 {
		if code := challenge(t, alice, viaNginx, ""); code == http.StatusTooManyRequests {
			t.Fatalf("alice's challenge %d refused within her budget", i+1)
		}
	}
	if code := challenge(t, alice, viaNginx, ""); code != http.StatusTooManyRequests {
		t.Errorf("alice's third challenge: %d, want 429", code)
	}
	if code := challenge(t, alice, viaNginx, "203.0.113.9"); code != http.StatusTooManyRequests {
		t.Errorf("alice's challenge naming another address herself: %d, want 429", code)
	}
	if code := challenge(t, bob, viaNginx, "127.0.0.2"); code == http.StatusTooManyRequests {
		t.Error("bob shares alice's budget (he named her address; nginx appended his)")
	}

	// HTTPS, with the WKD location, names the domain by Host.
	tlsClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "openpgpkey.example.org"}}}
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/.well-known/openpgpkey/example.org/policy", tlsPort), nil)
	req.Host = "openpgpkey.example.org"
	resp, err := tlsClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("WKD policy over nginx's HTTPS: %d", resp.StatusCode)
	}
}
