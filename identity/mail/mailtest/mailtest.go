// Package mailtest runs a real SMTP server (github.com/emersion/go-smtp)
// on loopback for tests: it accepts every mail, optionally over STARTTLS
// and with PLAIN authentication, and hands each received message to the
// test, parsed.
package mailtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one received mail.
type Message struct {
	From    string
	To      []string
	Subject string
	Header  mail.Header
	// Body is the decoded text body.
	Body string
	// Raw is the message as received.
	Raw []byte
}

// Options configure a Server.
type Options struct {
	// TLS offers STARTTLS with a throwaway certificate for 127.0.0.1 and
	// localhost; RootCAs in the Server then trusts it.
	TLS bool
	// Username and Password, when set, are required (PLAIN).
	Username, Password string
}

// Server is a running SMTP server.
type Server struct {
	// Addr is the server's host:port.
	Addr string
	// RootCAs trusts the server's certificate (with Options.TLS).
	RootCAs *x509.CertPool

	srv  *smtp.Server
	opts Options

	mu       sync.Mutex
	received []Message
	arrived  chan struct{}
}

// Start starts a server on 127.0.0.1 and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), opts: opts, arrived: make(chan struct{}, 1000)}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout, s.srv.WriteTimeout = time.Minute, time.Minute
	s.srv.AllowInsecureAuth = !opts.TLS
	if opts.TLS {
		cert, pool := selfSigned(t)
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.RootCAs = pool
	}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// Wait returns the next message not yet returned, waiting for it up to
// timeout (a bound for a test that would otherwise hang, not a
// measurement).
func (s *Server) Wait(t testing.TB, timeout time.Duration) Message {
	t.Helper()
	select {
	case <-s.arrived:
	case <-time.After(timeout):
		t.Fatalf("no mail arrived at %s within %s", s.Addr, timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.received[0]
	s.received = s.received[1:]
	return m
}

// Pending returns how many received messages Wait has not returned.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received)
}

type session struct {
	s      *Server
	authed bool
	from   string
	to     []string
}

func (x *session) AuthMechanisms() []string {
	if x.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (x *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != x.s.opts.Username || password != x.s.opts.Password {
			return errors.New("invalid credentials")
		}
		x.authed = true
		return nil
	}), nil
}

func (x *session) Mail(from string, opts *smtp.MailOptions) error {
	if x.s.opts.Username != "" && !x.authed {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, opts *smtp.RcptOptions) error {
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := Message{From: x.from, To: x.to, Raw: raw}
	pm, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	m.Header = pm.Header
	m.Subject, _ = new(mime.WordDecoder).DecodeHeader(pm.Header.Get("Subject"))
	body := pm.Body
	if strings.EqualFold(pm.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	m.Body = strings.ReplaceAll(string(b), "\r\n", "\n")
	x.s.mu.Lock()
	x.s.received = append(x.s.received, m)
	x.s.mu.Unlock()
	x.s.arrived <- struct{}{}
	return nil
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

// selfSigned makes a throwaway certificate for loopback and a pool that
// trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, pool
}
