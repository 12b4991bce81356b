// login.go: what a finished login yields, the ID token claims Kith reads,
// and the handle a login proposes.

package oidc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Login is a verified login at a provider.
//
// Kith keeps only the claims it needs, and says why:
//   - iss and sub (Issuer, Subject): the OIDC factor itself, the account
//     that authenticated; the pair is the only stable identifier.
//   - email and email_verified: an email factor, and whether the provider
//     vouches for the mailbox (the oidc.email-verified evidence); also the
//     AllowedEmailDomains check.
//   - preferred_username and name: to propose a handle and a display name;
//     neither identifies the account (both can change at the provider).
//   - auth_time, iat and exp: when the person authenticated, for the
//     evidence record.
//
// Nothing else (address, phone, birthdate, the access token, the refresh
// token) is read or kept, except a claim the caller reads from Claims by
// name (Claims.Strings: the groups an operator maps to SSH principals).
// RawIDToken holds what the provider signed, and may contain more claims
// than these: it is stored as evidence, not read for data.
type Login struct {
	Provider          string // the ProviderConfig.Name
	Issuer            string // iss
	Subject           string // sub
	Email             string // email, as given (may be empty)
	EmailVerified     bool   // email_verified
	PreferredUsername string // preferred_username
	Name              string // name

	// ProposedHandle comes from the HandleClaim (preferred_username by
	// default, falling back to the email's local part), normalised to Kith's
	// handle syntax: lower-case ASCII letters, digits and '-', 2 to 39
	// characters. It is empty when nothing usable remains. It is only a
	// proposal: package identity decides whether it is reserved or taken.
	ProposedHandle string

	// RawIDToken is the ID token (a JWT) as the provider signed it: the
	// evidence of this login.
	RawIDToken string
	// SigningKey is the provider's public JWK, exactly as its key set
	// published it, that verified RawIDToken; with VerifyEvidence anyone can
	// re-check the login later without trusting Kith or reaching the
	// provider.
	SigningKey []byte

	AuthTime time.Time // auth_time; zero when the provider did not say
	IssuedAt time.Time // iat
	Expiry   time.Time // exp

	// Next is where to send the person now: a same-site path (see
	// SafeNext), "/" by default.
	Next string
	// Nonce is the token's nonce, the one the login sent (a consent
	// login's commitment, see BeginOptions.Nonce).
	Nonce string
	// Pending is what BeginOptions.Pending handed to the login's start.
	Pending string
	// Claims are the verified token's claims, for a claim Login does not
	// name (Claims.Strings reads it: groups, say).
	Claims *Claims
	// MinimalClaims reports that the ID token carries nothing but the
	// account, the client, times, the nonce and the protocol's claims (as
	// a consent login's, with scope openid, should): nothing private.
	MinimalClaims bool
}

// Claims are the claims of a verified ID token that Kith reads (see Login
// for why these), plus the header fields that name the signing key.
type Claims struct {
	Issuer            string
	Subject           string
	Audience          []string
	AuthorizedParty   string // azp
	Nonce             string
	Email             string
	EmailVerified     bool
	PreferredUsername string
	Name              string
	AuthTime          time.Time
	IssuedAt          time.Time
	Expiry            time.Time
	KeyID             string // the JWS header's kid (set by VerifyEvidence)
	Algorithm         string // the JWS header's alg (set by VerifyEvidence)

	// payload is the verified payload, for Strings.
	payload []byte
}

// Strings returns the values of the claim name of the verified token: a
// string claim as one value, a list of strings as its strings; nothing for
// a missing claim or one of another type (a number, an object). It is
// how a claim such as groups, which Claims does not name, is read.
func (c *Claims) Strings(name string) []string {
	var all map[string]json.RawMessage
	if json.Unmarshal(c.payload, &all) != nil {
		return nil
	}
	raw, ok := all[name]
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	return nil
}

// rawClaims decodes an ID token payload, tolerating the variants providers
// send: aud as a string or a list, email_verified as a boolean or a string,
// times as integers or fractions.
type rawClaims struct {
	Issuer            string       `json:"iss"`
	Subject           string       `json:"sub"`
	Audience          audience     `json:"aud"`
	AuthorizedParty   string       `json:"azp"`
	Nonce             string       `json:"nonce"`
	Email             string       `json:"email"`
	EmailVerified     boolish      `json:"email_verified"`
	PreferredUsername string       `json:"preferred_username"`
	Name              string       `json:"name"`
	AuthTime          *numericDate `json:"auth_time"`
	IssuedAt          *numericDate `json:"iat"`
	Expiry            *numericDate `json:"exp"`
}

// parseClaims decodes a verified payload.
func parseClaims(payload []byte) (*Claims, error) {
	var r rawClaims
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrIDToken, err)
	}
	if r.Subject == "" {
		return nil, fmt.Errorf("%w: no sub claim", ErrIDToken)
	}
	return &Claims{
		Issuer:            r.Issuer,
		Subject:           r.Subject,
		Audience:          r.Audience,
		AuthorizedParty:   r.AuthorizedParty,
		Nonce:             r.Nonce,
		Email:             r.Email,
		EmailVerified:     bool(r.EmailVerified),
		PreferredUsername: r.PreferredUsername,
		Name:              r.Name,
		AuthTime:          r.AuthTime.time(),
		IssuedAt:          r.IssuedAt.time(),
		Expiry:            r.Expiry.time(),
		payload:           payload,
	}, nil
}

type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		return json.Unmarshal(b, (*[]string)(a))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*a = audience{s}
	return nil
}

type boolish bool

func (v *boolish) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*v = boolish(s == "true")
		return nil
	}
	return json.Unmarshal(b, (*bool)(v))
}

type numericDate time.Time

func (d *numericDate) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
	if err != nil {
		return fmt.Errorf("not a NumericDate: %s", b)
	}
	sec := int64(f)
	*d = numericDate(time.Unix(sec, int64((f-float64(sec))*1e9)).UTC())
	return nil
}

func (d *numericDate) time() time.Time {
	if d == nil {
		return time.Time{}
	}
	return time.Time(*d)
}

// Limits of a proposed handle; they are identity.Handle's, repeated here
// so that the protocol package does not reach into the domain for a
// proposal (identity.ParseHandle has the last word).
const (
	minHandleLen = 2
	maxHandleLen = 39
)

// ProposeHandle turns a claim value (a username, or an email whose local
// part is taken) into handle syntax: accents dropped ("José" → "jose"),
// lower case, every run of other characters a single '-', no '-' at either
// end, at most 39 characters. It returns "" when fewer than 2 remain.
func ProposeHandle(s string) string {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	dash := false
	for _, r := range norm.NFKD.String(s) {
		switch {
		case unicode.Is(unicode.Mn, r):
			continue // a combining accent
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		default:
			dash = b.Len() > 0
			continue
		}
		if dash {
			b.WriteByte('-')
			dash = false
		}
		b.WriteRune(r)
	}
	h := b.String()
	if len(h) > maxHandleLen {
		h = strings.TrimRight(h[:maxHandleLen], "-")
	}
	if len(h) < minHandleLen {
		return ""
	}
	return h
}

// proposeHandle picks the claim the provider is configured with.
func proposeHandle(handleClaim string, c *Claims) string {
	if handleClaim == HandleClaimPreferredUsername {
		if h := ProposeHandle(c.PreferredUsername); h != "" {
			return h
		}
	}
	return ProposeHandle(c.Email)
}
