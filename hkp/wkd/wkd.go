// Package wkd serves a Web Key Directory (the OpenPGP Web Key Directory
// draft, what `gpg --locate-keys`, Thunderbird, KMail and Kleopatra
// query) for the mail domains the operator lists: the advanced method
// (https://openpgpkey.DOMAIN/.well-known/openpgpkey/DOMAIN/hu/HASH) and
// the direct method (https://DOMAIN/.well-known/openpgpkey/hu/HASH), with
// their policy files.
//
// Only keys whose address is verified by mail are served, and each with
// only that address's user ID (as gpg-wks-client publishes keys). The
// package needs the l= parameter (the local part, which gpg and the
// other clients send) to know which address a hash names; without it the
// answer is 404. TLS and the host names are the operator's (see the
// README); Kith answers the HTTP requests.
package wkd

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/proof"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/pgp"
)

// zbase32 is the z-base-32 alphabet the WKD hashes are written in.
var zbase32 = base32.NewEncoding("ybndrfg8ejkmcpqxot1uwisza345h769").WithPadding(base32.NoPadding)

// Hash returns the WKD hash of a local part: z-base-32 of the SHA-1 of the
// lower-cased local part.
func Hash(local string) string {
	h := sha1.Sum([]byte(strings.ToLower(local)))
	return zbase32.EncodeToString(h[:])
}

// Handler serves the Web Key Directory of its domains.
type Handler struct {
	keys     keys.Finder
	verified identity.VerifiedEmailReader
	domains  []string
	lookups  *ratelimit.Limiter
	log      *slog.Logger
	proofs   *proof.Source // nil: no proof bundles
}

// NewHandler returns a Handler for the lower-case mail domains. lookups
// counts each client's key lookups, which are lookups by email (the
// wiring shares it with the other routes that look up by email); past it
// the answer is 429; nil: no limit.
func NewHandler(finder keys.Finder, verified identity.VerifiedEmailReader, domains []string, lookups *ratelimit.Limiter, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	return &Handler{keys: finder, verified: verified, domains: slices.Clone(domains), lookups: lookups, log: log}
}

// WithProofs has the handler answer a key asked for with ?proof=1 (after
// WKD's own l=) with its proof bundle (package identity/proof): the
// binary answer, and for each key the email.verified record that
// verifies the address for it, opened for the address. It returns h.
func (h *Handler) WithProofs(src *proof.Source) *Handler {
	h.proofs = src
	return h
}

// Register adds the WKD routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/openpgpkey/{domain}/hu/{hash}", h.serveAdvanced)
	// DOMAIN/policy (advanced) and hu/HASH (direct) have one shape; a
	// domain has a dot, "hu" none.
	mux.HandleFunc("GET /.well-known/openpgpkey/{a}/{b}", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.PathValue("a") == "hu":
			h.serveKey(w, r, requestDomain(r), r.PathValue("b"))
		case r.PathValue("b") == "policy":
			h.servePolicy(w, strings.ToLower(r.PathValue("a")))
		default:
			notFound(w)
		}
	})
	mux.HandleFunc("GET /.well-known/openpgpkey/policy", func(w http.ResponseWriter, r *http.Request) {
		h.servePolicy(w, requestDomain(r))
	})
}

func (h *Handler) serves(domain string) bool { return slices.Contains(h.domains, domain) }

// requestDomain is the domain the Host header names (without a port).
func requestDomain(r *http.Request) string {
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func (h *Handler) serveAdvanced(w http.ResponseWriter, r *http.Request) {
	h.serveKey(w, r, strings.ToLower(r.PathValue("domain")), r.PathValue("hash"))
}

// servePolicy answers the policy file: empty (no options) for a served
// domain, which tells clients the domain has a directory.
func (h *Handler) servePolicy(w http.ResponseWriter, domain string) {
	if !h.serves(domain) {
		notFound(w)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
}

// serveKey answers a hash: the keys for which local@domain is verified,
// each with only that user ID, binary; no v6 key beside a v4 one
// (pgp.ForLegacyClients).
func (h *Handler) serveKey(w http.ResponseWriter, r *http.Request, domain, hash string) {
	local := r.URL.Query().Get("l")
	if !h.serves(domain) || local == "" || len(hash) != 32 || Hash(local) != hash || strings.ContainsAny(local, "@ <>") {
		notFound(w)
		return
	}
	if !h.lookups.Allow(w, r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte("too many lookups from this address: try again later\n"))
		return
	}
	addr := strings.ToLower(local + "@" + domain)
	fps, err := h.verified.VerifiedKeys(r.Context(), addr)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The keys found, and their versions, for the rule of what clients of
	// legacy protocols are sent (gpg, WKD's main client, reads no v6 key and
	// refuses a whole answer that holds one).
	var found [][]byte
	var versions []int
	var factors []identity.Factor
	for _, f := range fps {
		fp, _ := hex.DecodeString(f.Value)
		stored, _, err := h.keys.FindKeys(r.Context(), keys.Query{Fingerprints: [][]byte{fp}, Limit: 1})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, sk := range stored {
			if !bytes.Equal(sk.Fingerprint, fp) {
				continue
			}
			k, err := pgp.ParseKey(sk.Packets)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			found = append(found, k.WithUserIDs(func(e string) bool { return e == addr }).Bytes())
			versions = append(versions, sk.Version)
			factors = append(factors, f)
		}
	}
	found, served := pgp.KeepForLegacyClients(found, factors, func(i int) int { return versions[i] })
	body := bytes.Join(found, nil)
	if len(body) == 0 {
		notFound(w)
		return
	}
	if r.URL.Query().Get("proof") == "1" {
		h.serveProof(w, r, body, served, addr)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(body)
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte("no key\n"))
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil {
		h.log.Error("wkd: lookup", "route", r.Pattern, "err", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	w.Write([]byte("internal error\n"))
}

// serveProof answers a key asked for with ?proof=1 with its proof bundle.
func (h *Handler) serveProof(w http.ResponseWriter, r *http.Request, body []byte, served []identity.Factor, addr string) {
	if h.proofs == nil {
		notFound(w)
		return
	}
	old, err := proof.ParseOld(r.URL.Query().Get("old"))
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(err.Error() + "\n"))
		return
	}
	b, err := h.proofs.ByAddress(r.Context(), body, "application/octet-stream", false, served, addr, old)
	if errors.Is(err, tlog.ErrNoCheckpoint) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("no checkpoint signed yet\n"))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "no-cache")
	json.NewEncoder(w).Encode(b)
}
