// consent.go: logins that approve one statement. A session's word is not
// evidence anyone can check; a fresh login whose OpenID Connect nonce
// commits to the statement is (as OpenPubkey binds a key to an ID token):
// the provider signs the nonce inside the ID token, so the token covers
// the statement, and the random value the commitment is made with, kept
// in the record, lets anyone recompute it.

package identity

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
)

// ConsentSaltSize is the size of the random value a consent nonce commits
// with.
const ConsentSaltSize = 32

// consentDomain separates consent commitments from every other hash.
const consentDomain = "kith consent v1\x00"

// ConsentNonce returns the OpenID Connect nonce of a login that approves
// statement: base64url (no padding) of SHA-256 over "kith consent v1", a
// NUL, the salt's length as 4 bytes big-endian, the salt and the
// statement. Without the salt the nonce reveals nothing about the
// statement; with it, anyone can check which statement the token covers.
func ConsentNonce(statement, salt []byte) string {
	h := sha256.New()
	h.Write([]byte(consentDomain))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(salt))))
	h.Write(salt)
	h.Write(statement)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// NewConsentSalt returns a fresh salt for ConsentNonce, read from r.
func NewConsentSalt(r io.Reader) ([]byte, error) {
	b := make([]byte, ConsentSaltSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("identity: consent salt: %w", err)
	}
	return b, nil
}

// Consent is a login made to approve one statement: the ID token's nonce
// must be ConsentNonce(statement, Salt).
type Consent struct {
	// Login is the fresh login; its account must be proven for the
	// identity the statement names.
	Login Login
	// Salt is the random value the login's nonce commits with; it is
	// kept in the record (Evidence.Consent).
	Salt []byte
}

// check gives the login the nonce it must carry for statement, for the
// Verifier to compare with its ID token's.
func (c Consent) check(statement []byte) (Login, error) {
	if len(c.Salt) != ConsentSaltSize {
		return Login{}, Refuse(CodeBadRequest, "a session's consent needs a login whose nonce commits to the statement (a %d-byte salt, not %d bytes)", ConsentSaltSize, len(c.Salt))
	}
	l := c.Login
	l.Nonce = ConsentNonce(statement, c.Salt)
	return l, nil
}
