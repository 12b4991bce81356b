package main

import (
	"fmt"
	"log/slog"

	"github.com/kith-keyserver/kith/cmd/internal/tlsserve"
	"github.com/kith-keyserver/kith/identity/postgres"
)

// newTLSServer builds the HTTPS side of kith serve from the [tls]
// section. ACME keeps its account key, certificates and http-01 tokens in
// st's secrets, where every node sharing the database finds them: one
// certificate per name for all nodes, and a challenge one node took up
// answered by whichever node the CA reaches.
func newTLSServer(cfg Config, st *postgres.Store, log *slog.Logger) (*tlsserve.Server, error) {
	opts := tlsserve.Options{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, Logger: log.With("component", "tls")}
	if len(cfg.TLS.ACMENames) > 0 {
		opts.ACMENames = cfg.TLS.ACMENames
		opts.ACMEDirectory = cfg.TLS.ACMEDirectory
		opts.Cache = tlsserve.Cache{Store: st}
	}
	s, err := tlsserve.New(opts)
	if err != nil {
		if len(opts.ACMENames) > 0 {
			return nil, fmt.Errorf("setting tls.acme_names: %w", err)
		}
		return nil, fmt.Errorf("settings tls.cert_file and tls.key_file: %w", err)
	}
	return s, nil
}
