// lookup.go: GET by-fingerprint, by-keyid and by-email. Every key is
// served with only its verified addresses' user IDs.

package vks

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/mail"
	"slices"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/proof"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/pgp"
)

// serveByFingerprint answers /vks/v1/by-fingerprint/{FPR}: 40 or 64
// upper-case hex digits without 0x, of the primary key or a subkey.
func (h *Handler) serveByFingerprint(w http.ResponseWriter, r *http.Request) {
	s := r.PathValue("fpr")
	fp, err := hex.DecodeString(s)
	if err != nil || (len(fp) != 20 && len(fp) != 32) || s != strings.ToUpper(s) {
		textError(w, http.StatusBadRequest, "not a fingerprint: 40 or 64 upper-case hex digits, without 0x")
		return
	}
	h.serveKeys(w, r, keys.Query{Fingerprint: fp, Limit: 1}, "fingerprint "+s)
}

// serveByKeyID answers /vks/v1/by-keyid/{KEYID}: 16 upper-case hex
// digits without 0x.
func (h *Handler) serveByKeyID(w http.ResponseWriter, r *http.Request) {
	s := r.PathValue("keyid")
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != 16 || s != strings.ToUpper(s) {
		textError(w, http.StatusBadRequest, "not a key ID: 16 upper-case hex digits, without 0x")
		return
	}
	h.serveKeys(w, r, keys.Query{KeyID: id, Limit: 10}, "key ID "+s)
}

// serveByEmail answers /vks/v1/by-email/{EMAIL}: the keys for which the
// address is verified, with only verified addresses.
func (h *Handler) serveByEmail(w http.ResponseWriter, r *http.Request) {
	if !h.opts.EmailLookupLimit.Allow(w, r) {
		textError(w, http.StatusTooManyRequests, "too many lookups by email from this address: try again later")
		return
	}
	addr, ok := parseAddress(r.PathValue("email"))
	if !ok {
		textError(w, http.StatusBadRequest, "not an email address")
		return
	}
	fps, err := h.verified.VerifiedKeys(r.Context(), addr)
	if err != nil {
		h.fail(w, r, "verified keys", err)
		return
	}
	var found []*pgp.Key
	var served []identity.Factor
	for _, f := range fps {
		fp, _ := hex.DecodeString(f.Value)
		ks, err := h.servable(r, keys.Query{Fingerprints: [][]byte{fp}, Limit: 1})
		if err != nil {
			h.fail(w, r, "find key", err)
			return
		}
		found = append(found, ks...)
		if len(ks) > 0 {
			served = append(served, f)
		}
	}
	// People pipe VKS answers into gpg --import too, and gpg refuses a
	// whole answer at a v6 key; a v6 key asked for alone is sent whole.
	found, served = pgp.KeepForLegacyClients(found, served, func(i int) int { return found[i].Version() })
	if r.URL.Query().Get("proof") == "1" {
		h.serveProof(w, r, found, served, addr)
		return
	}
	h.writeKeys(w, found, "No key found for email address "+addr)
}

// serveProof answers a by-email lookup asked with ?proof=1 with its
// proof bundle (package identity/proof): the armored keys, and for each
// the email.verified record that verifies addr for it, opened for addr.
func (h *Handler) serveProof(w http.ResponseWriter, r *http.Request, found []*pgp.Key, served []identity.Factor, addr string) {
	if h.opts.Proofs == nil {
		textError(w, http.StatusNotFound, "this server has no transparency log to prove answers with")
		return
	}
	if len(found) == 0 {
		textError(w, http.StatusNotFound, "No key found for email address "+addr)
		return
	}
	old, err := proof.ParseOld(r.URL.Query().Get("old"))
	if err != nil {
		textError(w, http.StatusBadRequest, err.Error())
		return
	}
	var body bytes.Buffer
	if err := pgp.WriteArmored(&body, found...); err != nil {
		h.fail(w, r, "armor", err)
		return
	}
	b, err := h.opts.Proofs.ByAddress(r.Context(), body.Bytes(), "application/pgp-keys", true, served, addr, old)
	if errors.Is(err, tlog.ErrNoCheckpoint) {
		textError(w, http.StatusServiceUnavailable, "no checkpoint signed yet")
		return
	}
	if err != nil {
		h.fail(w, r, "proof", err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Access-Control-Allow-Origin", "*")
	json.NewEncoder(w).Encode(b)
}

// parseAddress reads a bare address, lower-cased.
func parseAddress(s string) (string, bool) {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || len(s) > 254 {
		return "", false
	}
	return strings.ToLower(s), true
}

func (h *Handler) serveKeys(w http.ResponseWriter, r *http.Request, q keys.Query, what string) {
	keys, err := h.servable(r, q)
	if err != nil {
		h.fail(w, r, "find key", err)
		return
	}
	keys, _ = pgp.KeepForLegacyClients(keys, []identity.Factor(nil), func(i int) int { return keys[i].Version() })
	h.writeKeys(w, keys, "No key found for "+what)
}

// servable finds the keys q selects and cuts each down to its verified
// addresses.
func (h *Handler) servable(r *http.Request, q keys.Query) ([]*pgp.Key, error) {
	stored, _, err := h.keys.FindKeys(r.Context(), q)
	if err != nil {
		return nil, err
	}
	var out []*pgp.Key
	for _, sk := range stored {
		k, err := h.verifiedOnly(r, sk)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// verifiedOnly returns the stored key with only its verified addresses'
// user IDs.
func (h *Handler) verifiedOnly(r *http.Request, sk keys.Stored) (*pgp.Key, error) {
	k, err := pgp.ParseKey(sk.Packets)
	if err != nil {
		return nil, err
	}
	emails, err := h.verified.VerifiedEmails(r.Context(), identity.PGPFactor(sk.Fingerprint).Value)
	if err != nil {
		return nil, err
	}
	return k.WithUserIDs(func(e string) bool { return e != "" && slices.Contains(emails, e) }), nil
}

// writeKeys answers the keys armored, or 404 with notFound.
func (h *Handler) writeKeys(w http.ResponseWriter, keys []*pgp.Key, notFound string) {
	if len(keys) == 0 {
		textError(w, http.StatusNotFound, notFound)
		return
	}
	var b bytes.Buffer
	if err := pgp.WriteArmored(&b, keys...); err != nil {
		textError(w, http.StatusInternalServerError, "internal error")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/pgp-keys")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Access-Control-Allow-Origin", "*")
	w.Write(b.Bytes())
}

// fail logs an internal failure and answers 500 without its detail.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() == nil {
		h.log.Error("vks: "+what, "route", r.Pattern, "err", err)
	}
	textError(w, http.StatusInternalServerError, "internal error: try again later")
}
