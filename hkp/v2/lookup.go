// lookup.go: the typed certificate lookups: by versioned fingerprint, by
// key ID, by identity, and the authoritative (canonical) one.

package v2

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// maxIdentity bounds an identity path component: the longest address is
// 254 bytes, and a user ID worth searching for is shorter than 1 KiB.
const maxIdentity = 1024

// serveByVFingerprint answers certs/by-vfingerprint: the key whose
// primary key or a subkey has that fingerprint, of that version. The
// version is the fingerprint's version octet in hex ("04" for 40 hex
// digits, "06" for 64), in its own path segment as in the draft since its
// adoption ({version}/{fingerprint}), or before the fingerprint in one
// segment as in draft-gallagher-openpgp-hkp-10 ({version}{fingerprint}).
// Hex digits of either case; no "0x".
func (h *Handler) serveByVFingerprint(w http.ResponseWriter, r *http.Request) {
	version, fpr := r.PathValue("version"), r.PathValue("fpr")
	if v := r.PathValue("vfpr"); v != "" {
		version, fpr = v[:min(2, len(v))], v[min(2, len(v)):]
	}
	want, fp, ok := parseVFingerprint(version, fpr)
	if !ok {
		Error(w, http.StatusBadRequest, "not a versioned fingerprint: 04 and 40 hex digits, or 06 and 64, without 0x")
		return
	}
	found, ok := h.find(w, r, keys.Query{Fingerprint: fp, Limit: h.opts.MaxResults, NoUserIDs: true})
	if !ok {
		return
	}
	// A v4 fingerprint names no v6 key and the other way round: the
	// version is part of the identifier.
	found = slices.DeleteFunc(found, func(k keys.Stored) bool { return k.Version != want })
	// Anyone can bind another's public key to their own key as an
	// encryption subkey (it needs no back-signature): the key whose
	// primary key has the fingerprint is the answer, whichever was
	// stored first; else the first key with it as a subkey.
	if i := slices.IndexFunc(found, func(k keys.Stored) bool { return bytes.Equal(k.Fingerprint, fp) }); i > 0 {
		found[0] = found[i]
	}
	writeKeys(w, packetsOf(found[:min(1, len(found))]), strings.ToUpper(fpr))
}

// parseVFingerprint reads a version octet in hex and a fingerprint of
// that version's length, in hex of either case.
func parseVFingerprint(version, s string) (int, []byte, bool) {
	v, n := 0, 0
	switch version {
	case "04":
		v, n = 4, 20
	case "06":
		v, n = 6, 32
	default:
		return 0, nil, false
	}
	if len(s) != 2*n {
		return 0, nil, false
	}
	fp, err := hex.DecodeString(s)
	return v, fp, err == nil
}

// serveByKeyID answers certs/by-keyid/{keyid}: the keys whose primary key
// or a subkey has that 64-bit key ID (16 hex digits of either case,
// without 0x). Section 5.1.3: certificates of versions above 4 are never
// answered, since a v6 key ID is no identifier of a v6 key.
func (h *Handler) serveByKeyID(w http.ResponseWriter, r *http.Request) {
	s := r.PathValue("keyid")
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != 16 {
		Error(w, http.StatusBadRequest, "not a key ID: 16 hex digits, without 0x")
		return
	}
	found, ok := h.find(w, r, keys.Query{KeyID: id, Limit: h.opts.MaxResults, NoUserIDs: true})
	if !ok {
		return
	}
	found = slices.DeleteFunc(found, func(k keys.Stored) bool { return k.Version > 4 })
	writeKeys(w, packetsOf(found), strings.ToUpper(s))
}

// serveByIdentity answers certs/by-identity/{identity}: the keys with a
// user ID the identity names (matchIdentity), most confident first.
func (h *Handler) serveByIdentity(w http.ResponseWriter, r *http.Request) {
	ks, ok := h.byIdentity(w, r)
	if !ok {
		return
	}
	packets := make([][]byte, len(ks))
	for i, k := range ks {
		packets[i] = k.stored.Packets
	}
	writeKeys(w, packets, r.PathValue("identity"))
}

// serveCanonical answers canonical/{identity}, the authoritative lookup:
// only the keys for which the address is verified by a followed mail
// link (identity's email.verified records), each with only its verified
// addresses' user IDs, exactly as VKS by-email answers; an address only
// claimed in a user ID, or only corroborated by a provider, is never
// answered here. Section 5.1.4: the canonical bundle, or 404.
func (h *Handler) serveCanonical(w http.ResponseWriter, r *http.Request) {
	id, ok := h.identityOf(w, r)
	if !ok {
		return
	}
	if id.email == "" {
		// Only an address can be verified; a name is never canonical.
		Error(w, http.StatusNotFound, "no key is verified for this identity: only addresses are verified")
		return
	}
	fps, err := h.verified.VerifiedKeys(r.Context(), id.email)
	if err != nil {
		h.fail(w, r, "verified keys", err)
		return
	}
	if len(fps) == 0 {
		Error(w, http.StatusNotFound, "no key is verified for this address")
		return
	}
	var all [][]byte
	for _, f := range fps {
		fp, err := hex.DecodeString(f.Value)
		if err != nil {
			continue
		}
		all = append(all, fp)
	}
	found, ok := h.find(w, r, keys.Query{Fingerprints: all, Limit: h.opts.MaxResults, NoUserIDs: true})
	if !ok {
		return
	}
	sortNewestFirst(found)
	var packets [][]byte
	for _, sk := range found {
		k, err := pgp.ParseKey(sk.Packets)
		if err != nil {
			h.fail(w, r, "parse stored key", err)
			return
		}
		emails, err := h.verified.VerifiedEmails(r.Context(), identity.PGPFactor(sk.Fingerprint).Value)
		if err != nil {
			h.fail(w, r, "verified emails", err)
			return
		}
		packets = append(packets, k.WithUserIDs(func(e string) bool { return e != "" && slices.Contains(emails, e) }).Bytes())
	}
	writeKeys(w, packets, id.email)
}

// identityLookup is a parsed identity path component.
type identityLookup struct {
	// text is the identity as given.
	text string
	// email is the address it is (lower-cased), or empty for the whole
	// text of a user ID without an address.
	email string
}

// identityOf reads the {identity} path component, counting a lookup by
// address against the client's budget. It answers 400 or 429 itself
// and then returns false.
func (h *Handler) identityOf(w http.ResponseWriter, r *http.Request) (identityLookup, bool) {
	s := r.PathValue("identity")
	if s == "" || len(s) > maxIdentity || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		Error(w, http.StatusBadRequest, "not an identity: an email address or a user ID's text")
		return identityLookup{}, false
	}
	id := identityLookup{text: s}
	// Section 5.1.9: the identity is the address between a user ID's
	// angle brackets, or the whole text of a user ID that has none; so an
	// identity with brackets is the text of an address-less user ID.
	if !strings.ContainsAny(s, "<>") {
		id.email = pgp.UserIDAddress(s)
	}
	if id.email != "" && !h.opts.EmailLookupLimit.Allow(w, r) {
		Error(w, http.StatusTooManyRequests, "too many lookups by email from this address: try again later")
		return identityLookup{}, false
	}
	return id, true
}

// found is a key an identity lookup answers, with the confidence of its
// user ID that matched.
type found struct {
	stored keys.Stored
	// conf is what the evidence says of the key's addresses; confidence
	// that of the user ID that matched.
	conf       confidence
	confidence int
}

// byIdentity finds the keys with a user ID that the identity names
// (section 5.1.9: exactly the address between a user ID's angle
// brackets, or exactly a user ID's whole text when it carries no
// address; not case-sensitive), most confident first, then newest first
// (sections 5.1.1 and 5.1.5). With Options.VerifiedOnly an address
// finds only the keys for which it is verified. It answers failures and
// none found (404) itself, and then returns false.
func (h *Handler) byIdentity(w http.ResponseWriter, r *http.Request) ([]found, bool) {
	id, ok := h.identityOf(w, r)
	if !ok {
		return nil, false
	}
	q := keys.Query{Email: id.email, Limit: h.opts.MaxResults}
	if id.email == "" {
		q.Words = keys.SearchWords(id.text)
		if len(q.Words) == 0 || len(q.Words) > keys.MaxSearchWords {
			// No word to find it by: no user ID has this text (or it is
			// too long a name to look for).
			Error(w, http.StatusNotFound, "no key found")
			return nil, false
		}
	}
	stored, ok := h.find(w, r, q)
	if !ok {
		return nil, false
	}
	var out []found
	for _, sk := range stored {
		conf, err := h.confidences(r, sk.Fingerprint)
		if err != nil {
			h.fail(w, r, "confidence", err)
			return nil, false
		}
		best, match := -1, false
		for _, u := range sk.UserIDs {
			if !id.matches(u) {
				continue
			}
			match = true
			best = max(best, conf.of(u.Email))
		}
		if !match || (h.opts.VerifiedOnly && id.email != "" && best < ConfidenceVerified) {
			continue
		}
		out = append(out, found{stored: sk, conf: conf, confidence: best})
	}
	if len(out) == 0 {
		Error(w, http.StatusNotFound, "no key found")
		return nil, false
	}
	slices.SortStableFunc(out, func(a, b found) int {
		if a.confidence != b.confidence {
			return b.confidence - a.confidence
		}
		return b.stored.Created.Compare(a.stored.Created)
	})
	return out, true
}

// matches reports whether the user ID is one the identity names.
func (id identityLookup) matches(u keys.StoredUserID) bool {
	if id.email != "" {
		return u.Email == id.email
	}
	return u.Email == "" && strings.EqualFold(u.Text, id.text)
}

// find runs q with the answer's size cap; it answers 400 (too large) or
// 500 itself and then returns false.
func (h *Handler) find(w http.ResponseWriter, r *http.Request, q keys.Query) ([]keys.Stored, bool) {
	q.MaxBytes = h.opts.MaxAnswerSize
	found, _, err := h.keys.FindKeys(r.Context(), q)
	if errors.Is(err, keys.ErrAnswerTooLarge) {
		Error(w, http.StatusBadRequest, "the keys found are too large for one answer: ask by fingerprint")
		return nil, false
	}
	if err != nil {
		h.fail(w, r, "find keys", err)
		return nil, false
	}
	return found, true
}

func packetsOf(ks []keys.Stored) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = k.Packets
	}
	return out
}

// sortNewestFirst orders keys by creation, newest first, then by
// fingerprint, so that an answer does not depend on the store's order.
func sortNewestFirst(ks []keys.Stored) {
	slices.SortFunc(ks, func(a, b keys.Stored) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return bytes.Compare(a.Fingerprint, b.Fingerprint)
	})
}
