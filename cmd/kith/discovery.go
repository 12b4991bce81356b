// discovery.go: wiring the key-discovery frontends beside HKP: the VKS
// API with its verification mails, and WKD.

package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/hkp/wkd"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/proof"
)

// mountDiscovery adds the VKS routes (and the mailed links' page) to mux,
// and the Web Key Directory of the configured domains.
func mountDiscovery(ctx context.Context, mux *http.ServeMux, cfg Config, st *postgres.Store, svc *identity.Service, ks *keys.Service,
	limits clientLimits, log *slog.Logger) error {
	mailer, err := cfg.mailer(log.With("component", "mail"))
	if err != nil {
		return err
	}
	key, err := st.Secret(ctx, "vks.upload_token_key", 32)
	if err != nil {
		return err
	}
	proofs := &proof.Source{Tree: st, Log: svc.Log, EmailVerification: svc.EmailVerification}
	h, err := vks.NewHandler(st, ks, st, svc, vks.Options{PublicURL: cfg.publicURL(), Server: cfg.serverName(),
		TokenKey: key, Mailer: mailer, RequestsPerMinute: cfg.MailRequestsPerMinute, Proofs: proofs,
		UploadLimit: limits.uploads, EmailLookupLimit: limits.emailLookups, Logger: log.With("component", "vks")})
	if err != nil {
		return err
	}
	h.Register(mux)
	if len(cfg.WKD.Domains) > 0 {
		wkd.NewHandler(st, st, cfg.WKD.Domains, limits.emailLookups, log.With("component", "wkd")).WithProofs(proofs).Register(mux)
	}
	return nil
}

// hkpVerifiedEmails is what HKP email searches answer from with
// hkp.email_lookup = "verified"; nil (every key naming the address, as
// SKS) otherwise.
func hkpVerifiedEmails(cfg Config, st *postgres.Store) identity.VerifiedEmailReader {
	if cfg.HKP.EmailLookup == "verified" {
		return st
	}
	return nil
}
