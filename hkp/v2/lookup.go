// lookup.go: the typed key lookups, by versioned fingerprint and by key
// ID.

package v2

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"

	"github.com/kith-keyserver/kith/identity/keys"
)

// serveByVFingerprint answers
// /pks/v2/certs/by-vfingerprint/{version}/{fpr}: the key whose primary
// key or subkey has that fingerprint of that key version (4: 40 hex
// digits; 6: 64).
func (h *Handler) serveByVFingerprint(w http.ResponseWriter, r *http.Request) {
	fp, ok := parseVFingerprint(r.PathValue("version"), r.PathValue("fpr"))
	if !ok {
		Error(w, http.StatusBadRequest, "not a versioned fingerprint: 4 and 40 hex digits, or 6 and 64")
		return
	}
	h.serveQuery(w, r, keys.Query{Fingerprint: fp, Limit: 1}, r.PathValue("fpr"))
}

// serveByKeyID answers /pks/v2/certs/by-keyid/{keyid}: the keys whose
// primary key or a subkey has that 64-bit key ID (16 hex digits).
func (h *Handler) serveByKeyID(w http.ResponseWriter, r *http.Request) {
	s := r.PathValue("keyid")
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != 16 {
		Error(w, http.StatusBadRequest, "not a key ID: 16 hex digits, without 0x")
		return
	}
	h.serveQuery(w, r, keys.Query{KeyID: id, Limit: h.opts.MaxResults}, s)
}

// parseVFingerprint reads a key version and a fingerprint of that
// version's length, in hex of either case.
func parseVFingerprint(version, s string) ([]byte, bool) {
	n := map[string]int{"4": 20, "6": 32}[version]
	if n == 0 || len(s) != 2*n {
		return nil, false
	}
	fp, err := hex.DecodeString(s)
	return fp, err == nil
}

// serveQuery answers the keys q selects, or 404.
func (h *Handler) serveQuery(w http.ResponseWriter, r *http.Request, q keys.Query, name string) {
	q.MaxBytes = h.opts.MaxAnswerSize
	q.NoUserIDs = true
	found, _, err := h.keys.FindKeys(r.Context(), q)
	if errors.Is(err, keys.ErrAnswerTooLarge) {
		Error(w, http.StatusBadRequest, "the keys found are too large for one answer")
		return
	}
	if err != nil {
		h.fail(w, r, "find keys", err)
		return
	}
	writeKeys(w, found, name)
}
