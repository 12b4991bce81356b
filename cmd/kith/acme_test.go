package main

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// loopbackDNS answers every A question with 127.0.0.1 (and every other
// question with no answer), over TCP as Pebble asks: the ACME server's
// resolver, so that the names it validates reach Kith on loopback.
func loopbackDNS(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qq := range q.Question {
			if qq.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// pebble is a running Pebble, Let's Encrypt's ACME test server.
type pebble struct {
	cmd       *exec.Cmd
	out       *testkit.SyncBuffer
	directory string
	root      *x509.CertPool // its issuing root
}

// startPebble builds Pebble (a tool of this module) and runs it on
// loopback with its HTTPS certificate from ca, resolving names with the
// DNS server at dnsAddr and validating http-01 on httpPort and
// tls-alpn-01 on tlsPort.
func startPebble(t *testing.T, ca *testkit.CA, dir, dnsAddr string, httpPort, tlsPort int) *pebble {
	t.Helper()
	goTool := testkit.Tool(t, "go")
	bin := filepath.Join(dir, "pebble")
	build := exec.Command(goTool, "build", "-o", bin, "github.com/letsencrypt/pebble/v2/cmd/pebble")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build pebble: %v\n%s", err, out)
	}
	certFile, keyFile := ca.IssueFiles(t, dir, "pebble", "127.0.0.1", "localhost")
	acmeAddr, mgmtAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	conf, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": acmeAddr, "managementListenAddress": mgmtAddr,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": httpPort, "tlsPort": tlsPort, "keyAlgorithm": "ecdsa",
	}})
	confFile := filepath.Join(dir, "pebble.json")
	os.WriteFile(confFile, conf, 0o644)
	p := &pebble{cmd: exec.Command(bin, "-config", confFile, "-dnsserver", dnsAddr), out: &testkit.SyncBuffer{},
		directory: "https://" + acmeAddr + "/dir", root: x509.NewCertPool()}
	// No waits before validating, no nonces refused at random, no
	// authorizations reused: each run asks the same way.
	p.cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := subprocess.Start(p.cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	// Its issuing root, from the management API once it answers.
	c := httpsClient(ca.Pool, "")
	c.Timeout = 5 * time.Second
	var rootPEM []byte
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool {
		resp, err := c.Get("https://" + mgmtAddr + "/roots/0")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		rootPEM, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("pebble's management API did not answer:\n%s", p.out)
	}
	if !p.root.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("pebble's root is not PEM: %q", rootPEM)
	}
	return p
}

func (p *pebble) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// TestServeGetsACMECertificateFromPebble: with tls.acme_names, kith serve
// gets a certificate per name from a real ACME server (Pebble, on
// loopback) and serves https with it. Pebble's tls-alpn-01 port is a
// closed one, so the names are validated with http-01 through Kith's
// plain listener (tls.http_listen). The certificates are kept in the
// database: a restart serves the same ones with Pebble gone.
func TestServeGetsACMECertificateFromPebble(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	ca := testkit.NewCA(t)
	caFile := ca.WriteCert(t, filepath.Join(dir, "ca.pem"))
	httpAddr, tlsAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	hp, _ := strconv.Atoi(httpPort)
	p := startPebble(t, ca, dir, loopbackDNS(t), hp, testkit.FreePort(t))
	db := pgtest.NewDatabase(t)
	names := []string{"keys.example.org", "openpgpkey.example.org"}
	start := func() *server {
		// Kith trusts Pebble's ACME API through the test CA.
		s := startServeEnv(t, []string{"SSL_CERT_FILE=" + caFile}, "--database-url", db,
			"--tls-listen", tlsAddr, "--tls-http-listen", httpAddr, "--tls-acme-names", strings.Join(names, ","),
			"--tls-acme-directory", p.directory)
		s.waitHealth(t, http.StatusOK, 60*time.Second)
		return s
	}
	s := start()
	c := httpsClient(p.root, tlsAddr)
	_, port, _ := net.SplitHostPort(tlsAddr)
	serials := map[string]string{}
	for _, name := range names {
		// The first handshake for a name waits for its certificate.
		u := "https://" + name + ":" + port + "/pks/lookup?op=stats&options=mr"
		if _, err := c.Head(u); err != nil {
			t.Fatalf("%s: %v\nkith:\n%s\npebble:\n%s", u, err, s.stderr, p.out)
		}
		resp, body := fetch(t, c, "GET", u, "", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("https://%s: %d %s\n%s", name, resp.StatusCode, body, s.stderr)
		}
		leaf := resp.TLS.PeerCertificates[0]
		if !slices.Contains(leaf.DNSNames, name) {
			t.Errorf("%s served a certificate for %v", name, leaf.DNSNames)
		}
		serials[name] = leaf.SerialNumber.String()
	}
	for _, name := range names {
		if !strings.Contains(p.out.String(), "Attempting to validate w/ HTTP: http://"+name+":"+httpPort+"/") {
			t.Errorf("pebble did not validate %s over http-01:\n%s", name, p.out)
		}
	}
	// Kith asked for them at start, and says so.
	for _, name := range names {
		if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool {
			return strings.Contains(s.stderr.String(), `msg="TLS certificate ready" component=tls name=`+name)
		}) {
			t.Errorf("no log line says the certificate of %s is ready:\n%s", name, s.stderr)
		}
	}
	// A name not listed gets no certificate, and so no TLS.
	if _, err := c.Get("https://other.example.org:" + port + "/"); err == nil {
		t.Error("a name not in tls.acme_names was served")
	}
	// The plain listener sends a browser to https.
	resp, _ := fetch(t, httpsClient(nil, httpAddr), "GET", "http://keys.example.org/", "", nil)
	if want := "https://keys.example.org:" + port + "/"; resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want {
		t.Errorf("plain GET /: %d to %q, want 301 to %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	s.stop(t)

	p.stop()
	s = start()
	for _, name := range names {
		resp, _ := fetch(t, httpsClient(p.root, tlsAddr), "GET", "https://"+name+":"+port+"/pks/health", "", nil)
		if got := resp.TLS.PeerCertificates[0].SerialNumber.String(); resp.StatusCode != 200 || got != serials[name] {
			t.Errorf("after a restart %s: %d, serial %s, want the stored %s", name, resp.StatusCode, got, serials[name])
		}
	}
	s.stop(t)
}
