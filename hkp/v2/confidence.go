// confidence.go: each user ID's confidence, from Kith's evidence.

package v2

import (
	"net/http"
	"slices"

	"github.com/kith-keyserver/kith/identity"
)

// The confidences Kith gives a user ID (the draft's section 8: a number
// whose values of 120 and above mean complete confidence that the user
// ID belongs to the key's holder; the scale follows OpenPGP's trust
// amounts, where 60 is partial and 120 complete). They come from the
// evidence, never from the key alone, since anyone can write any address
// into a key of their own:
const (
	// ConfidenceClaimed: only the key's self-signed user ID names the
	// address (or the user ID carries none); a claim anyone can make.
	ConfidenceClaimed = 0
	// ConfidenceCorroborated: a provider verified the address for an
	// account proven for the same identity as the key (an
	// oidc.email-verified record; identity.CorroboratedEmails). The
	// provider vouches for the identity's mailbox, not for this key's
	// user ID, so the confidence is partial and the key is not
	// authoritative for the address.
	ConfidenceCorroborated = 60
	// ConfidenceVerified: a mail sent to the address for this key was
	// followed (an email.verified record, not withdrawn, of a user ID the
	// key still carries): the rule by which VKS, WKD and the canonical
	// lookup answer for an address.
	ConfidenceVerified = 120
)

// confidence holds a key's addresses that are more than claimed.
type confidence struct {
	verified, corroborated []string
}

// of returns the confidence of a user ID with address email ("" for
// none).
func (c confidence) of(email string) int {
	switch {
	case email == "":
		return ConfidenceClaimed
	case slices.Contains(c.verified, email):
		return ConfidenceVerified
	case slices.Contains(c.corroborated, email):
		return ConfidenceCorroborated
	}
	return ConfidenceClaimed
}

// confidences reads what the evidence says of the addresses of the key
// with fingerprint fp.
func (h *Handler) confidences(r *http.Request, fp []byte) (confidence, error) {
	f := identity.PGPFactor(fp)
	var c confidence
	var err error
	if c.verified, err = h.verified.VerifiedEmails(r.Context(), f.Value); err != nil {
		return c, err
	}
	if h.opts.Corroborations != nil {
		if c.corroborated, err = h.opts.Corroborations.CorroboratedKeyEmails(r.Context(), f); err != nil {
			return c, err
		}
	}
	return c, nil
}
