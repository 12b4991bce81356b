// device.go: certificates approved by a login on another device (the
// OAuth 2.0 device authorization grant, RFC 8628), for a host without a
// browser, and the principals an operator grants from the login's
// claims (a group, say).
//
// The SSH key signs a certificate statement as for any certificate (its
// possession); a login by an account proven for the statement's identity
// approves it, in place of the key being proven itself. The device grant
// carries no nonce, so the ID token cannot commit to the statement as a
// consent login's does: the frontend binds the device code to the
// statement (package oidc seals it with a hash of the statement) and the
// Service records the approval as an oidc.device-approval record, whose
// statement names the certificate statement's hash, the key, the account
// and the principals granted by claims, right before the ssh.certificate
// record, which names the account. What keeps one login from approving a
// second request: the frontend redeems a device code only for the
// statement it was started for, whose challenge answers once (a provider
// may hand out the token again: Dex does until the code expires); the
// token never leaves the server (its record keeps it private, whatever it
// carries); and the login must be later than the request's statement.

package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MethodOIDCDeviceApproval: the account From, logged in through the
// device authorization grant, approved the certificate request (a
// certificate statement signed by the SSH key To) for the identity
// Handle. Purpose: PurposeCertificate; Statement: the approval statement
// (DeviceApprovalTitle); Signature: the ID token (always a private
// artifact); SignerKey: the provider's JWK. It precedes the
// ssh.certificate record it approves, in the same transaction. It links
// nothing: assessment ignores it.
const MethodOIDCDeviceApproval Method = "oidc.device-approval"

// DeviceApprovalTitle starts the statement of every oidc.device-approval
// record.
const DeviceApprovalTitle = "Kith device login approval"

// ClaimPrincipal grants a principal from a login's claim: a login whose
// claim Claim has the value Value (a string claim equal to it, or a list
// of strings holding it) gets Principal.
type ClaimPrincipal struct {
	Claim, Value, Principal string
}

// claimName is what a claim's name may be.
var claimName = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,64}$`)

// Check checks a claim principal's form: a claim name of letters,
// digits and _ . / -, a value of one line, a principal as certificates
// carry them.
func (c ClaimPrincipal) Check() error {
	switch {
	case !claimName.MatchString(c.Claim):
		return fmt.Errorf("claim %q: a claim name is 1 to 64 letters, digits, _ . / or -", c.Claim)
	case c.Value == "" || strings.ContainsAny(c.Value, "\r\n") || len(c.Value) > 256:
		return fmt.Errorf("claim %s: value %q must be one non-empty line of at most 256 bytes", c.Claim, c.Value)
	case !ValidPrincipal(c.Principal):
		return fmt.Errorf("claim %s=%s: principal %q is not one word without commas", c.Claim, c.Value, c.Principal)
	}
	return nil
}

// ValidPrincipal reports whether p can be a certificate's principal: one
// word of printable characters without a comma (sshd splits lists of
// them on commas).
func ValidPrincipal(p string) bool {
	return p != "" && len(p) <= 256 && !strings.ContainsFunc(p, func(r rune) bool {
		return r <= ' ' || r == ',' || r == 0x7f
	})
}

// PrincipalGrant is a principal granted by a claim value of the login
// that approved a certificate.
type PrincipalGrant struct {
	Principal, Claim, Value string
}

// ClaimNames returns the claims the rules read, each once.
func ClaimNames(rules []ClaimPrincipal) []string {
	var out []string
	for _, r := range rules {
		if !slices.Contains(out, r.Claim) {
			out = append(out, r.Claim)
		}
	}
	return out
}

// grantsFor returns the principals the rules grant a login with claims,
// in the rules' order, each principal once.
func grantsFor(rules []ClaimPrincipal, claims map[string][]string) []PrincipalGrant {
	var out []PrincipalGrant
	for _, r := range rules {
		if !slices.Contains(claims[r.Claim], r.Value) {
			continue
		}
		if slices.ContainsFunc(out, func(g PrincipalGrant) bool { return g.Principal == r.Principal }) {
			continue
		}
		out = append(out, PrincipalGrant{Principal: r.Principal, Claim: r.Claim, Value: r.Value})
	}
	return out
}

// DeviceApproval is what an oidc.device-approval statement says.
type DeviceApproval struct {
	Server string
	Handle Handle
	// Key is the SSH key the certificate is for, by fingerprint.
	Key string
	// Request is the hex SHA-256 of the certificate statement approved.
	Request string
	// Signer is the account that logged in, as a factor string.
	Signer   string
	Provider string
	ClientID string
	// Authenticated and Recorded are the login's auth time and the
	// record's time.
	Authenticated, Recorded time.Time
	// Grants are the principals granted by the login's claims.
	Grants []PrincipalGrant
}

// RequestHash is the hex SHA-256 of a certificate statement, as an
// approval names it.
func RequestHash(statement []byte) string {
	sum := sha256.Sum256(statement)
	return hex.EncodeToString(sum[:])
}

// Marshal writes the approval statement.
func (d DeviceApproval) Marshal() []byte {
	var b strings.Builder
	b.WriteString(DeviceApprovalTitle + "\n\n")
	fmt.Fprintf(&b, "server: %s\n", d.Server)
	fmt.Fprintf(&b, "handle: %s\n", d.Handle)
	fmt.Fprintf(&b, "key: %s\n", d.Key)
	fmt.Fprintf(&b, "request: %s\n", d.Request)
	fmt.Fprintf(&b, "signer: %s\n", d.Signer)
	fmt.Fprintf(&b, "provider: %s\n", d.Provider)
	fmt.Fprintf(&b, "client_id: %s\n", d.ClientID)
	fmt.Fprintf(&b, "authenticated: %s\n", d.Authenticated.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "recorded: %s\n", d.Recorded.UTC().Format(time.RFC3339))
	for _, g := range d.Grants {
		fmt.Fprintf(&b, "grant: %s %s %s\n", g.Principal, g.Claim, strconv.Quote(g.Value))
	}
	return []byte(b.String())
}

// ParseDeviceApproval reads an approval statement.
func ParseDeviceApproval(text []byte) (*DeviceApproval, error) {
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	if len(lines) < 3 || lines[0] != DeviceApprovalTitle || lines[1] != "" {
		return nil, fmt.Errorf("%w: not a device approval statement", ErrBadStatement)
	}
	d := &DeviceApproval{}
	seen := map[string]bool{}
	for _, l := range lines[2:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%w: approval line %q is not \"name: value\"", ErrBadStatement, clip(l))
		}
		if k != "grant" && seen[k] {
			return nil, fmt.Errorf("%w: approval gives %s twice", ErrBadStatement, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "server":
			d.Server = v
		case "handle":
			d.Handle = Handle(v)
		case "key":
			d.Key = v
		case "request":
			d.Request = v
		case "signer":
			d.Signer = v
		case "provider":
			d.Provider = v
		case "client_id":
			d.ClientID = v
		case "authenticated":
			d.Authenticated, err = time.Parse(time.RFC3339, v)
		case "recorded":
			d.Recorded, err = time.Parse(time.RFC3339, v)
		case "grant":
			var g PrincipalGrant
			g, err = parseGrant(v)
			d.Grants = append(d.Grants, g)
		default:
			err = fmt.Errorf("unknown line %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: approval %s: %v", ErrBadStatement, k, err)
		}
	}
	for _, k := range []string{"server", "handle", "key", "request", "signer", "client_id", "recorded"} {
		if !seen[k] {
			return nil, fmt.Errorf("%w: approval has no %s line", ErrBadStatement, k)
		}
	}
	return d, nil
}

// parseGrant reads "PRINCIPAL CLAIM \"VALUE\"".
func parseGrant(v string) (PrincipalGrant, error) {
	p, rest, ok1 := strings.Cut(v, " ")
	c, q, ok2 := strings.Cut(rest, " ")
	val, err := strconv.Unquote(q)
	if !ok1 || !ok2 || err != nil {
		return PrincipalGrant{}, fmt.Errorf("%q is not: principal claim \"value\"", clip(v))
	}
	g := PrincipalGrant{Principal: p, Claim: c, Value: val}
	if err := (ClaimPrincipal{Claim: c, Value: val, Principal: p}).Check(); err != nil {
		return PrincipalGrant{}, err
	}
	return g, nil
}

// CertificateStandsOn returns the factor an ssh.certificate record's
// certificate stands on: the account that approved it, for a certificate
// a device login approved (To), else the certified key (From). The
// certificate is revoked when that factor stops being proven.
func CertificateStandsOn(e *Evidence) Factor {
	if e.To.Kind == KindOIDC {
		return e.To
	}
	return e.From
}

// verifyApproval checks a device login approving the certificate
// statement c: its ID token verifies (with the claim values it names),
// and the login was made after the statement was issued, so that no
// earlier login approves it.
func (s *Service) verifyApproval(ctx context.Context, c *Challenge, l Login) (*verified, error) {
	if l.Nonce != "" {
		return nil, Refuse(CodeBadRequest, "a device login carries no nonce for the Service to check")
	}
	if _, ok := c.Handle.Host(); ok {
		return nil, Refuse(CodeUnsupported, "a login approves user certificates only: %q is a host, whose certificates its proven host keys ask for", c.Handle)
	}
	if !l.AuthTime.IsZero() && l.AuthTime.Before(c.Issued.Add(-clockSkew)) {
		return nil, Refuse(CodeExpired, "the login (at %s) is older than the request (issued %s): log in again to approve it",
			l.AuthTime.UTC().Format(time.RFC3339), c.Issued.UTC().Format(time.RFC3339))
	}
	v, err := s.verifyLogin(ctx, l)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// CheckCertificateRequest checks a certificate request before a device
// login is started for it: a certificate statement this server issued,
// still open, signed by its SSH key. IssueCertificate checks it all again,
// and more.
func (s *Service) CheckCertificateRequest(ctx context.Context, statement, signature []byte) error {
	if s.ca == nil {
		return Refuse(CodeCADisabled, "this server issues no SSH certificates")
	}
	c, err := s.statement(statement, PurposeCertificate)
	if err != nil {
		return err
	}
	if c.Factor.Kind != KindSSH {
		return Refuse(CodeUnsupported, "only an SSH key gets an SSH certificate, not %s", c.Factor)
	}
	if s.clock().After(c.Expires) {
		return Refuse(CodeExpired, "the challenge expired at %s", c.Expires.Format(time.RFC3339))
	}
	_, err = s.verify(ctx, Proof{Signature: signature}, c.Factor, statement)
	return err
}

// CertificateClaims returns the names of the claims a login approving a
// certificate must bring the values of (Login.Claims): those the
// policy's ClaimPrincipals read.
func (s *Service) CertificateClaims() []string { return ClaimNames(s.certs.ClaimPrincipals) }

// approvalRecord is the oidc.device-approval record of the login by,
// which approves req, granting grants.
func (s *Service) approvalRecord(c *Challenge, req CertificateRequest, by verified, grants []PrincipalGrant, now time.Time) *Evidence {
	l := req.Approval
	d := DeviceApproval{
		Server: s.server, Handle: c.Handle, Key: c.Factor.Value, Request: RequestHash(req.Statement),
		Signer: by.factor.String(), Provider: l.Provider, ClientID: l.ClientID,
		Authenticated: l.AuthTime, Recorded: now, Grants: grants,
	}
	return &Evidence{
		Method: MethodOIDCDeviceApproval, Purpose: PurposeCertificate, Handle: c.Handle, From: by.factor, To: c.Factor,
		Statement: d.Marshal(), Signature: by.signature, SignerKey: by.signerKey, Created: now,
		privateToken: true, subject: by.subject,
	}
}
