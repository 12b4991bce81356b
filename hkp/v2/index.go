// index.go: index/{identity}, the JSON index (the draft's section 7.1.1).

package v2

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/kith-keyserver/kith/pgp"
)

// IndexKey is one certificate of a JSON index. The draft requires only
// the version and fingerprint of key material and the uidString of user
// IDs; the rest is what a client needs to choose a key without fetching
// it. Fingerprints are lower-case hex without "0x"; times are RFC 3339 in
// UTC, absent when there is none (a key that never expires).
type IndexKey struct {
	Version     int       `json:"version"`
	Fingerprint string    `json:"fingerprint"`
	KeyID       string    `json:"keyID"`
	Algorithm   Algorithm `json:"algorithm"`
	Creation    string    `json:"creation,omitempty"`
	Expiration  string    `json:"expiration,omitempty"`
	IsRevoked   bool      `json:"isRevoked"`
	// Capabilities are the primary key's usage letters, gpg's way ("sc").
	Capabilities string        `json:"capabilities,omitempty"`
	UserIDs      []IndexUserID `json:"userIDs"`
	Subkeys      []IndexSubkey `json:"subkeys,omitempty"`
}

// Algorithm is a key's public-key algorithm: its RFC 9580 ID, name, size
// and curve.
type Algorithm struct {
	Code      int    `json:"code"`
	Name      string `json:"name"`
	BitLength int    `json:"bitLength,omitempty"`
	Curve     string `json:"curve,omitempty"`
}

// IndexUserID is one user ID of a JSON index, with its confidence
// (confidence.go) from Kith's evidence.
type IndexUserID struct {
	UIDString  string `json:"uidString"`
	Confidence int    `json:"confidence"`
	Creation   string `json:"creation,omitempty"`
	Expiration string `json:"expiration,omitempty"`
	IsRevoked  bool   `json:"isRevoked"`
	IsPrimary  bool   `json:"isPrimary,omitempty"`
}

// IndexSubkey is one subkey of a JSON index.
type IndexSubkey struct {
	Version      int       `json:"version"`
	Fingerprint  string    `json:"fingerprint"`
	Algorithm    Algorithm `json:"algorithm"`
	Creation     string    `json:"creation,omitempty"`
	Expiration   string    `json:"expiration,omitempty"`
	IsRevoked    bool      `json:"isRevoked"`
	Capabilities string    `json:"capabilities,omitempty"`
}

// serveIndex answers index/{identity}: the keys by-identity answers, as
// a JSON array in the same order (section 5.1.5), or 404.
func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	ks, ok := h.byIdentity(w, r)
	if !ok {
		return
	}
	out := make([]IndexKey, 0, len(ks))
	for _, f := range ks {
		k, err := pgp.ParseKey(f.stored.Packets)
		if err != nil {
			h.fail(w, r, "parse stored key", err)
			return
		}
		out = append(out, indexKey(k, f.conf))
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// User IDs keep their angle brackets: the answer is JSON, never HTML
	// (nosniff).
	enc.SetEscapeHTML(false)
	enc.Encode(out)
}

// indexKey describes k for the index, each user ID with its confidence.
func indexKey(k *pgp.Key, conf confidence) IndexKey {
	d := k.Describe()
	out := IndexKey{
		Version: d.Version, Fingerprint: hex.EncodeToString(d.Fingerprint),
		KeyID:     hex.EncodeToString(keyID(d.KeyID)),
		Algorithm: algorithm(int(d.Algorithm), d.Bits, d.Curve),
		Creation:  timestamp(d.Created), Expiration: timestamp(d.Expires),
		IsRevoked: d.Revoked, Capabilities: d.Capabilities.String(),
		UserIDs: []IndexUserID{},
	}
	for _, u := range d.UserIDs {
		c := conf.of(u.Email)
		if u.Revoked || d.Revoked {
			// A revoked user ID (or key) vouches for nothing now.
			c = ConfidenceClaimed
		}
		out.UserIDs = append(out.UserIDs, IndexUserID{UIDString: u.Text, Confidence: c,
			Creation: timestamp(u.Created), Expiration: timestamp(u.Expires), IsRevoked: u.Revoked, IsPrimary: u.Primary})
	}
	for _, s := range d.Subkeys {
		out.Subkeys = append(out.Subkeys, IndexSubkey{Version: s.Version, Fingerprint: hex.EncodeToString(s.Fingerprint),
			Algorithm: algorithm(int(s.Algorithm), s.Bits, s.Curve),
			Creation:  timestamp(s.Created), Expiration: timestamp(s.Expires), IsRevoked: s.Revoked,
			Capabilities: s.Capabilities.String()})
	}
	return out
}

func algorithm(code, bits int, curve string) Algorithm {
	return Algorithm{Code: code, Name: pgp.AlgorithmName(code, 0, ""), BitLength: bits, Curve: curve}
}

func keyID(id uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[7-i] = byte(id >> (8 * i))
	}
	return b
}

// timestamp is t in RFC 3339 (section 5.6) in UTC, or empty for none.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
