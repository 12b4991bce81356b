// tlsca.go: a throwaway X.509 certificate authority, for tests that run
// a TLS server (Kith's own HTTPS, nginx in front of it, a WKD host) and a
// client (Go, gpg's dirmngr, Pebble) that must trust it.

package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: its certificate is
// valid for a day around now and trusted by nothing but the test.
type CA struct {
	// Cert is the CA's certificate; PEM is the same, PEM-encoded.
	Cert *x509.Certificate
	PEM  []byte
	// Pool holds Cert alone, for a Go client's RootCAs.
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newECKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Kith test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, PEM: pemBlock("CERTIFICATE", der), Pool: x509.NewCertPool(), key: key}
	ca.Pool.AddCert(cert)
	return ca
}

// WriteCert writes the CA's certificate, PEM, to path (for a client told
// a file: dirmngr's hkp-cacert, SSL_CERT_FILE) and returns path.
func (ca *CA) WriteCert(t testing.TB, path string) string {
	t.Helper()
	if err := os.WriteFile(path, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue returns a server certificate for names (host names and IP
// addresses; the first is the subject), its chain and key, for a server
// the test runs in-process.
func (ca *CA) Issue(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	der, key := ca.issue(t, names)
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key}
}

// IssueFiles writes a server certificate for names and its key, PEM, to
// dir/NAME.pem and dir/NAME-key.pem, for a server told files, and
// returns their paths.
func (ca *CA) IssueFiles(t testing.TB, dir, name string, names ...string) (certFile, keyFile string) {
	t.Helper()
	der, key := ca.issue(t, names)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pemBlock("PRIVATE KEY", kb), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func (ca *CA) issue(t testing.TB, names []string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("testkit: a certificate for no name")
	}
	key := newECKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func newECKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
