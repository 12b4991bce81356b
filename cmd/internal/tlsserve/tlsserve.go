// Package tlsserve is the HTTPS of kith serve: the certificate, from
// files (read again when they change) or from an ACME CA
// (golang.org/x/crypto/acme/autocert); the ACME state, kept where every
// node sharing the database finds it; and what the plain-HTTP listeners
// do beside HTTPS: answer ACME http-01 challenges and send browsers to
// https, while HKP keeps answering over plain HTTP (gpg's hkp:// and the
// pool's crawlers use it).
//
// It owns no route of a protocol and does not open listeners: cmd/kith
// binds them and serves its handlers through what this package returns.
package tlsserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// Options says where the certificates come from: CertFile and KeyFile, or
// an ACME CA for ACMENames. Exactly one of the two is set.
type Options struct {
	// CertFile holds the PEM certificate chain, leaf first; KeyFile its
	// PEM private key. Both are read again when either file changes, so
	// a renewal by another tool needs no restart.
	CertFile, KeyFile string
	// ACMENames are the host names to get certificates for from the ACME
	// CA at ACMEDirectory; a handshake for any other name fails.
	ACMENames     []string
	ACMEDirectory string
	// Cache keeps the ACME account key, the certificates and the http-01
	// challenge tokens (see Cache); required with ACMENames.
	Cache autocert.Cache
	// Logger receives certificate reloads and failures.
	Logger *slog.Logger
}

// Server is the TLS side of kith serve.
type Server struct {
	tls  *tls.Config
	acme *autocert.Manager // nil with certificate files
	log  *slog.Logger
}

// New checks opts and returns the Server: with files, their certificate
// is read now, so that a bad pair stops the start.
func New(opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{log: log}
	switch {
	case len(opts.ACMENames) > 0 && opts.CertFile != "":
		return nil, errors.New("tlsserve: certificate files and ACME names are exclusive")
	case len(opts.ACMENames) > 0:
		if opts.Cache == nil {
			return nil, errors.New("tlsserve: ACME needs a cache")
		}
		s.acme = &autocert.Manager{
			// Naming ACME host names is the operator's agreement to the
			// CA's terms (the README says so).
			Prompt:     autocert.AcceptTOS,
			Cache:      opts.Cache,
			HostPolicy: autocert.HostWhitelist(opts.ACMENames...),
			Client:     &acme.Client{DirectoryURL: opts.ACMEDirectory, UserAgent: "kith"},
		}
		// TLSConfig offers the tls-alpn-01 protocol besides h2 and
		// HTTP/1.1: a CA may validate on the HTTPS port alone.
		s.tls = s.acme.TLSConfig()
	case opts.CertFile != "" && opts.KeyFile != "":
		f := &certFiles{cert: opts.CertFile, key: opts.KeyFile, log: log}
		if err := f.load(); err != nil {
			return nil, err
		}
		s.tls = &tls.Config{GetCertificate: f.get, NextProtos: []string{"h2", "http/1.1"}}
	default:
		return nil, errors.New("tlsserve: no certificate: name both files or ACME names")
	}
	s.tls.MinVersion = tls.VersionTLS12
	return s, nil
}

// Prefetch asks for the ACME certificate of each name in turn (from the
// cache, else from the CA) and logs the outcome, so that the first client
// does not wait for an issuance and a misconfiguration (DNS not yet
// pointing here, port 80 or 443 closed) shows in the log at start; a
// failure is retried at the next handshake naming the name. Without ACME
// it does nothing. It returns when every name was tried or ctx ends.
func (s *Server) Prefetch(ctx context.Context, names []string) {
	if s.acme == nil {
		return
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		// A hello offering ECDSA, as every current client does: the
		// manager keeps one certificate per name and key type.
		hello := &tls.ClientHelloInfo{ServerName: name, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}
		cert, err := s.acme.GetCertificate(hello)
		if err != nil {
			s.log.Warn("no TLS certificate from the ACME CA yet; asked again at the next handshake naming it", "name", name, "err", err)
			continue
		}
		s.log.Info("TLS certificate ready", "name", name, "not_after", cert.Leaf.NotAfter)
	}
}

// TLSConfig is the configuration of the HTTPS listener.
func (s *Server) TLSConfig() *tls.Config { return s.tls }

// Challenges wraps next, the handler of every listener, to answer ACME
// http-01 challenges (/.well-known/acme-challenge/) first; without ACME
// it is next. Call it before the HTTPS listener serves: it tells the ACME
// manager that it may try http-01 (after tls-alpn-01, which needs only
// the HTTPS listener).
func (s *Server) Challenges(next http.Handler) http.Handler {
	if s.acme == nil {
		return next
	}
	h := s.acme.HTTPHandler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The manager checks the Host header against the names as it is;
		// a CA asks on port 80, where it carries no port, but a port
		// mapping or a CA told another port (a test CA) adds one. The
		// token, not the port, names the challenge.
		if host, _, err := net.SplitHostPort(r.Host); err == nil && strings.HasPrefix(r.URL.Path, acmeChallengePath) {
			r = r.WithContext(r.Context())
			r.Host = host
		}
		h.ServeHTTP(w, r)
	})
}

// acmeChallengePath is where ACME http-01 challenges are asked.
const acmeChallengePath = "/.well-known/acme-challenge/"

// Redirect wraps next for a plain-HTTP listener beside HTTPS on
// httpsPort: it sends GET and HEAD requests to the same host and path
// over https (301), and hands next what must keep working over plain
// HTTP: HKP (/pks/..., which gpg's hkp://, peers and the pool's crawlers
// ask on port 11371), the metrics scraper's /metrics, ACME http-01
// challenges (which a CA asks over plain HTTP), and every other method
// (a redirect does not replay a POST; API clients keep working).
func Redirect(next http.Handler, httpsPort string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if (r.Method != http.MethodGet && r.Method != http.MethodHead) || plainPath(r.URL.Path) || host == "" {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case httpsPort != "443":
			host = net.JoinHostPort(host, httpsPort)
		case strings.Contains(host, ":"):
			host = "[" + host + "]"
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusMovedPermanently)
	})
}

// plainPath reports whether a path is served over plain HTTP as it is.
func plainPath(path string) bool {
	return strings.HasPrefix(path, "/pks/") || path == "/metrics" || strings.HasPrefix(path, acmeChallengePath)
}

// certFiles is a certificate read from files, read again when either
// file's size or modification time changes.
type certFiles struct {
	cert, key string
	log       *slog.Logger

	mu      sync.Mutex
	current *tls.Certificate
	stamp   [2]fileStamp
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.Size(), fi.ModTime()}, nil
}

// load reads the pair if it changed since the last load.
func (f *certFiles) load() error {
	c, err := stampOf(f.cert)
	if err != nil {
		return fmt.Errorf("tlsserve: certificate: %w", err)
	}
	k, err := stampOf(f.key)
	if err != nil {
		return fmt.Errorf("tlsserve: key: %w", err)
	}
	if f.current != nil && f.stamp == [2]fileStamp{c, k} {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return fmt.Errorf("tlsserve: %s and %s: %w", f.cert, f.key, err)
	}
	if f.current != nil {
		f.log.Info("TLS certificate read again", "cert_file", f.cert, "not_after", pair.Leaf.NotAfter)
	}
	f.current, f.stamp = &pair, [2]fileStamp{c, k}
	return nil
}

// get is the listener's GetCertificate: the files' certificate, read
// again if they changed; while a change does not load (a renewal half
// written, say), the last good one.
func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.load(); err != nil {
		f.log.Warn("TLS certificate files do not load; serving the last good certificate", "err", err)
	}
	return f.current, nil
}

// SecretStore keeps named bytes for every node sharing one database (the
// store's secrets table).
type SecretStore interface {
	// StoredSecret returns the bytes kept under name, and false for none.
	StoredSecret(ctx context.Context, name string) ([]byte, bool, error)
	// PutSecret keeps value under name, replacing what was there.
	PutSecret(ctx context.Context, name string, value []byte) error
	// DeleteSecret removes name; none is not an error.
	DeleteSecret(ctx context.Context, name string) error
}

// Cache is the ACME state in a SecretStore, under names "acme/" + the
// manager's key. It is in the database rather than a data directory
// because nodes share it: one account and one certificate per name for
// all of them (the CA's rate limits count per name), and an http-01
// token one node put is answered by whichever node the CA reaches.
type Cache struct {
	Store SecretStore
}

// cacheName is where key is kept.
func cacheName(key string) string { return "acme/" + key }

// Get implements autocert.Cache.
func (c Cache) Get(ctx context.Context, key string) ([]byte, error) {
	b, ok, err := c.Store.StoredSecret(ctx, cacheName(key))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, autocert.ErrCacheMiss
	}
	return b, nil
}

// Put implements autocert.Cache.
func (c Cache) Put(ctx context.Context, key string, data []byte) error {
	return c.Store.PutSecret(ctx, cacheName(key), data)
}

// Delete implements autocert.Cache.
func (c Cache) Delete(ctx context.Context, key string) error {
	return c.Store.DeleteSecret(ctx, cacheName(key))
}
