package tlsserve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRedirectSendsPagesToHTTPSAndKeepsHKPPlain(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		port, method, host, target string
		want                       string // Location; "" means served as it is
	}{
		{"443", "GET", "keys.example.org:11371", "/", "https://keys.example.org/"},
		{"443", "HEAD", "keys.example.org", "/keys/ABCD?x=1", "https://keys.example.org/keys/ABCD?x=1"},
		{"8443", "GET", "openpgpkey.example.org", "/.well-known/openpgpkey/example.org/policy", "https://openpgpkey.example.org:8443/.well-known/openpgpkey/example.org/policy"},
		{"443", "GET", "[::1]:80", "/login", "https://[::1]/login"},
		{"8443", "GET", "[::1]", "/login", "https://[::1]:8443/login"},
		{"443", "GET", "keys.example.org:11371", "/pks/lookup?op=get&search=0x1234", ""},
		{"443", "GET", "keys.example.org", "/pks/health", ""},
		{"443", "GET", "keys.example.org", "/metrics", ""},
		{"443", "GET", "keys.example.org", "/.well-known/acme-challenge/token", ""},
		{"443", "POST", "keys.example.org", "/pks/add", ""},
		{"443", "POST", "keys.example.org", "/api/v1/claims", ""},
	} {
		r := httptest.NewRequest(tc.method, "http://"+tc.host+tc.target, nil)
		w := httptest.NewRecorder()
		Redirect(served, tc.port).ServeHTTP(w, r)
		switch {
		case tc.want == "" && w.Code != http.StatusTeapot:
			t.Errorf("%s %s%s: %d, want it served as it is", tc.method, tc.host, tc.target, w.Code)
		case tc.want != "" && (w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != tc.want):
			t.Errorf("%s %s%s: %d to %q, want 301 to %q", tc.method, tc.host, tc.target, w.Code, w.Header().Get("Location"), tc.want)
		}
	}
}

// writePair writes a self-signed certificate for name and its key.
func writePair(t *testing.T, certFile, keyFile, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	// The key first: a reader between the two writes sees a mismatched
	// pair, which must not replace the good one.
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCertificateFilesAreReadAgainWhenTheyChange(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := New(Options{CertFile: cert, KeyFile: key}); err == nil {
		t.Fatal("missing files were accepted")
	}
	writePair(t, cert, key, "old.example.org")
	s, err := New(Options{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		c, err := s.TLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: "x"})
		if err != nil || c == nil {
			t.Fatalf("GetCertificate: %v", err)
		}
		return c.Leaf.Subject.CommonName
	}
	if got := served(); got != "old.example.org" {
		t.Fatalf("serves %s", got)
	}
	// A renewal half done (a new key, the old certificate): the last good
	// pair stays.
	writePair(t, filepath.Join(dir, "unused.pem"), key, "half.example.org")
	if got := served(); got != "old.example.org" {
		t.Fatalf("during a renewal serves %s", got)
	}
	writePair(t, cert, key, "new.example.org")
	// The files' times may not move within the clock's resolution; the
	// sizes of two P-256 pairs match, so make the change visible.
	later := time.Now().Add(time.Minute)
	os.Chtimes(cert, later, later)
	if got := served(); got != "new.example.org" {
		t.Fatalf("after renewal serves %s", got)
	}
}

func TestNewRefusesAmbiguousOrMissingSources(t *testing.T) {
	for _, o := range []Options{
		{},
		{CertFile: "c.pem"},
		{ACMENames: []string{"keys.example.org"}},
		{ACMENames: []string{"keys.example.org"}, CertFile: "c.pem", KeyFile: "k.pem", Cache: Cache{}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
