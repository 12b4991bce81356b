// certificate.go: OpenSSH certificates for SSH keys proven for an
// identity: user certificates for a person's keys, host certificates
// (valid for the host's name alone) for a host identity's host keys. The key's holder signs a fresh certificate statement (SSHSIG,
// purpose certificate); the Service checks that the key is proven for the
// identity at that moment, has the CA sign a short-lived certificate whose
// serial is the log record that publishes it, and appends that record
// (ssh.certificate, with the certificate itself) in the same transaction.
// A certificate is revoked as soon as its key stops being proven for the
// identity (CertificateRevoked); the revocation list (KRL) a frontend
// serves lists the revoked certificates still within their validity.

package identity

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The methods of the certificate authority's records.
const (
	// MethodSSHCertificate: the CA issued an OpenSSH certificate for the
	// SSH key From, proven for the identity Handle at that point of the
	// log: a user certificate, or for a host identity a host certificate
	// whose one principal is the host's name. Purpose: PurposeCertificate; Statement and Signature: the
	// certificate statement and the key's SSHSIG over it (its request);
	// SignerKey: the certificate (wire form), whose serial is the
	// record's Seq and whose key is From's; Label: the certificate's key
	// ID; Expires: the end of its validity.
	MethodSSHCertificate Method = "ssh.certificate"
	// MethodSSHCAKey: the public key of the CA that signs the
	// certificates of later ssh.certificate records, recorded before the
	// first of them, so that verify-log checks certificates only against
	// CA keys the log published earlier (a CA key that changes shows in
	// the log). From: the CA key as an SSH factor; Statement: which
	// server, when; SignerKey: the key blob. The server's word, not a
	// proof.
	MethodSSHCAKey Method = "ssh.ca-key"
)

// PurposeCertificate: a statement asking for an SSH user certificate for
// the statement's key, as the statement's handle.
const PurposeCertificate Purpose = "certificate"

// CAKeyStatementTitle starts the statement of every ssh.ca-key record.
const CAKeyStatementTitle = "Kith SSH user certificate authority"

// Refusal codes of certificate issuance.
const (
	CodeCADisabled          Code = "ca_disabled"           // this server issues no certificates
	CodePrincipalNotAllowed Code = "principal_not_allowed" // the identity does not have the principal
	CodeBadValidity         Code = "bad_validity"          // longer than the server's maximum, or not positive
)

// CertificateAuthority signs OpenSSH user and host certificates (an
// identity/verify adapter over package ssh is one).
type CertificateAuthority interface {
	// PublicKey returns the CA's public key, wire form.
	PublicKey() []byte
	// SignUserCertificate signs a user certificate and returns its wire
	// form.
	SignUserCertificate(ctx context.Context, t CertificateTemplate) ([]byte, error)
	// SignHostCertificate signs a host certificate (its Principals are
	// host names; it carries no options or extensions) and returns its
	// wire form.
	SignHostCertificate(ctx context.Context, t CertificateTemplate) ([]byte, error)
}

// CertificateTemplate is what a certificate says.
type CertificateTemplate struct {
	// Key is the certified key's blob.
	Key        []byte
	Serial     uint64
	KeyID      string
	Principals []string
	// ValidAfter and ValidBefore bound its validity (whole seconds).
	ValidAfter, ValidBefore time.Time
	// CriticalOptions and Extensions are as configured.
	CriticalOptions, Extensions map[string]string
}

// CertificatePolicy is what the server puts in certificates and how
// often it issues them.
type CertificatePolicy struct {
	// Validity is how long a certificate is valid when the request names
	// no validity; zero means 16 hours.
	Validity time.Duration
	// MaxValidity is the longest validity a request may ask for; zero
	// means 24 hours.
	MaxValidity time.Duration
	// PerHour is how many certificates one identity may get in an hour;
	// zero means 10, negative no limit. The count is read from the log
	// in the issuing transaction, so it holds across nodes.
	PerHour int
	// Principals returns the principals an identity has besides its
	// handle (configured by the operator), or nil.
	Principals func(h Handle) []string
	// ClaimPrincipals grant principals from the claims of the login that
	// approves a certificate (CertificateRequest.Approval); a certificate
	// without such a login gets none of them.
	ClaimPrincipals []ClaimPrincipal
	// CriticalOptions and Extensions go into every certificate.
	CriticalOptions, Extensions map[string]string
}

// The policy's defaults.
const (
	DefaultCertificateValidity    = 16 * time.Hour
	DefaultMaxCertificateValidity = 24 * time.Hour
	DefaultCertificatesPerHour    = 10
)

// clockSkew is how far before its issuance a certificate is valid from,
// so that a server whose clock runs a little ahead still accepts it.
const clockSkew = 5 * time.Minute

func (p CertificatePolicy) withDefaults() CertificatePolicy {
	if p.Validity <= 0 {
		p.Validity = DefaultCertificateValidity
	}
	if p.MaxValidity <= 0 {
		p.MaxValidity = DefaultMaxCertificateValidity
	}
	if p.PerHour == 0 {
		p.PerHour = DefaultCertificatesPerHour
	}
	return p
}

// CAEnabled reports whether the Service issues SSH certificates.
func (s *Service) CAEnabled() bool { return s.ca != nil }

// CAPublicKey returns the CA's public key blob, or nil when the Service
// issues no certificates.
func (s *Service) CAPublicKey() []byte {
	if s.ca == nil {
		return nil
	}
	return s.ca.PublicKey()
}

// CertificateRequest asks for a certificate.
type CertificateRequest struct {
	// Statement is the issued certificate statement, as signed.
	Statement []byte
	// Signature is the SSHSIG over Statement by the statement's key.
	Signature []byte
	// Validity is how long the certificate should be valid; zero means
	// the server's default.
	Validity time.Duration
	// Principals, when not empty, are the principals to certify: a
	// subset of the identity's. Empty means all of them.
	Principals []string
	// Approval, when set, is a login through the device authorization
	// grant, made after the statement was issued and bound to it by the
	// frontend (see device.go): its account, proven for the identity,
	// approves the certificate, so the key needs no proof beyond its
	// signature. Its Claims carry the values of the claims the policy's
	// ClaimPrincipals read.
	Approval *Login
}

// Certificate is an issued certificate.
type Certificate struct {
	// Certificate is its wire form.
	Certificate []byte
	// Record is the ssh.certificate record that publishes it; its Seq is
	// the serial.
	Record     Evidence
	KeyID      string
	Principals []string
	// Grants are the principals granted by the approving login's claims.
	Grants []PrincipalGrant
	// ValidAfter and ValidBefore bound its validity.
	ValidAfter, ValidBefore time.Time
}

// IssueCertificate checks a signed certificate statement and issues an
// OpenSSH user certificate for its key: the key must be proven for the
// statement's identity now (a claimed key never gets one), the identity
// must not have had PerHour certificates in the last hour, and the
// requested validity and principals must be within the policy. The
// certificate's serial is the Seq of the ssh.certificate record that
// publishes it, appended in the same transaction.
func (s *Service) IssueCertificate(ctx context.Context, req CertificateRequest) (*Certificate, error) {
	if s.ca == nil {
		return nil, Refuse(CodeCADisabled, "this server issues no SSH certificates")
	}
	c, err := s.statement(req.Statement, PurposeCertificate)
	if err != nil {
		return nil, err
	}
	if c.Factor.Kind != KindSSH {
		return nil, Refuse(CodeUnsupported, "only an SSH key gets an SSH certificate, not %s", c.Factor)
	}
	validity := req.Validity
	switch {
	case validity == 0:
		validity = s.certs.Validity
	case validity < 0:
		return nil, Refuse(CodeBadValidity, "validity %s is not positive", validity)
	case validity > s.certs.MaxValidity:
		return nil, Refuse(CodeBadValidity, "validity %s is longer than this server's maximum, %s", validity, s.certs.MaxValidity)
	}
	v, err := s.verify(ctx, Proof{Signature: req.Signature}, c.Factor, req.Statement)
	if err != nil {
		return nil, err
	}
	var approver *verified
	if req.Approval != nil {
		if approver, err = s.verifyApproval(ctx, c, *req.Approval); err != nil {
			return nil, err
		}
	}
	var out *Certificate
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		if err := s.consume(ctx, tx, c, req.Statement, now); err != nil {
			return err
		}
		_, recs, err := tx.IdentityRecords(ctx, c.Handle)
		if err != nil {
			return asUnknown(err, c.Handle)
		}
		a := Assess(c.Handle, recs, now)
		var grants []PrincipalGrant
		switch {
		case approver != nil:
			if !a.Proven(approver.factor) {
				return Refuse(CodeNotProven, "%s is not proven for %q: only an account proven for the identity approves its certificates", approver.factor, c.Handle)
			}
			grants = grantsFor(s.certs.ClaimPrincipals, req.Approval.Claims)
		case !a.Proven(v.factor):
			return Refuse(CodeNotProven, "%s is not proven for %q: only a key proven by its own signature gets a certificate", v.factor, c.Handle)
		}
		if n := issuedSince(recs, c.Handle, now.Add(-time.Hour)); s.certs.PerHour > 0 && n >= s.certs.PerHour {
			return Refuse(CodeRateLimited, "%q has had %d certificates in the last hour, the most this server issues: use one of them, or wait", c.Handle, n)
		}
		principals, err := s.principals(c.Handle, req.Principals, grants)
		if err != nil {
			return err
		}
		grants = slices.DeleteFunc(grants, func(g PrincipalGrant) bool { return !slices.Contains(principals, g.Principal) })
		_, isHost := c.Handle.Host()
		if err := s.recordCAKey(ctx, tx, now); err != nil {
			return err
		}
		var to Factor
		if approver != nil {
			to = approver.factor
			if err := tx.Append(ctx, s.approvalRecord(c, req, *approver, grants, now)); err != nil {
				return err
			}
		}
		seq, err := tx.NextSeq(ctx)
		if err != nil {
			return err
		}
		t := CertificateTemplate{
			Key: v.factor.Data, Serial: uint64(seq), KeyID: CertificateKeyID(c.Handle, seq), Principals: principals,
			ValidAfter: now.Add(-clockSkew).Truncate(time.Second), ValidBefore: now.Add(validity).Truncate(time.Second),
		}
		var cert []byte
		if isHost {
			cert, err = s.ca.SignHostCertificate(ctx, t)
		} else {
			t.CriticalOptions, t.Extensions = s.certs.CriticalOptions, s.certs.Extensions
			cert, err = s.ca.SignUserCertificate(ctx, t)
		}
		if err != nil {
			return fmt.Errorf("sign the certificate: %w", err)
		}
		e := &Evidence{
			Method: MethodSSHCertificate, Purpose: PurposeCertificate, Handle: c.Handle, From: v.factor, To: to, Label: t.KeyID,
			Statement: bytes.Clone(req.Statement), Signature: bytes.Clone(req.Signature), SignerKey: cert,
			Created: now, Expires: t.ValidBefore,
		}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
		if e.Seq != seq {
			return fmt.Errorf("the certificate record got seq %d, not the serial %d", e.Seq, seq)
		}
		out = &Certificate{Certificate: cert, Record: *e, KeyID: t.KeyID, Principals: principals, Grants: grants,
			ValidAfter: t.ValidAfter, ValidBefore: t.ValidBefore}
		return nil
	})
	if err != nil {
		return nil, wrapOp("issue certificate", err)
	}
	return out, nil
}

// CertificateKeyID is the key ID of the certificate that record seq
// publishes for handle h: what sshd logs beside the serial.
func CertificateKeyID(h Handle, seq int64) string {
	return fmt.Sprintf("kith %s record %d", h, seq)
}

// asUnknown turns a store's ErrNotFound for h into a refusal.
func asUnknown(err error, h Handle) error {
	if errors.Is(err, ErrNotFound) {
		return Refuse(CodeUnknownIdentity, "no identity has handle %q", h)
	}
	return err
}

// issuedSince counts h's certificate records created after since.
func issuedSince(recs []Evidence, h Handle, since time.Time) int {
	n := 0
	for _, e := range recs {
		if e.Method == MethodSSHCertificate && e.Handle == h && e.Created.After(since) {
			n++
		}
	}
	return n
}

// Principals returns the principals the identity h has: its handle, then
// the operator's extras for it. A handle that names a system account
// (IsSystemAccount, held from before the names were kept) is no
// principal: such an account is the operator's to grant, by the extras.
// Principals granted by a login's claims come on top, for a certificate
// that login approves.
func (s *Service) Principals(h Handle) []string {
	var out []string
	if !IsSystemAccount(string(h)) {
		out = append(out, string(h))
	}
	if s.certs.Principals != nil {
		for _, p := range s.certs.Principals(h) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// principals returns the principals to certify for h, whose approving
// login's claims granted grants: those asked for, each of which h must
// have, or all of h's. A host has one, its name.
func (s *Service) principals(h Handle, asked []string, grants []PrincipalGrant) ([]string, error) {
	if name, ok := h.Host(); ok {
		for _, p := range asked {
			if p != name {
				return nil, Refuse(CodePrincipalNotAllowed, "a host certificate for %q names that host alone, not %q", h, clip(p))
			}
		}
		return []string{name}, nil
	}
	have := s.Principals(h)
	for _, g := range grants {
		if !slices.Contains(have, g.Principal) {
			have = append(have, g.Principal)
		}
	}
	if len(have) == 0 {
		// A certificate without principals is valid for every account.
		return nil, Refuse(CodePrincipalNotAllowed, "%q is a system account's name, which no certificate names unless the operator grants it (ssh_ca.principals_file); %q has no other principal", h, h)
	}
	if len(asked) == 0 {
		return have, nil
	}
	var out []string
	for _, p := range asked {
		if !slices.Contains(have, p) {
			return nil, Refuse(CodePrincipalNotAllowed, "%q does not have the principal %q (it has %s)", h, clip(p), strings.Join(have, ", "))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// recordCAKey appends the ssh.ca-key record of the CA's key unless the
// log holds it already.
func (s *Service) recordCAKey(ctx context.Context, tx Tx, now time.Time) error {
	key := s.ca.PublicKey()
	ok, err := tx.KeyRecorded(ctx, MethodSSHCAKey, key)
	if err != nil || ok {
		return err
	}
	f := SSHFactor(SSHFingerprint(key), key)
	statement := fmt.Sprintf("%s\n\nserver: %s\nkey: %s %s\nrecorded: %s\n", CAKeyStatementTitle, s.server,
		sshKeyType(key), base64.StdEncoding.EncodeToString(key), now.Format(time.RFC3339))
	return tx.Append(ctx, &Evidence{
		Method: MethodSSHCAKey, From: f, Label: "the SSH user certificate authority of " + s.server,
		Statement: []byte(statement), SignerKey: bytes.Clone(key), Created: now,
	})
}

// SSHFingerprint returns the OpenSSH SHA256 fingerprint of a key blob.
func SSHFingerprint(blob []byte) string {
	sum := sha256.Sum256(blob)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// CertificateRevoked reports whether the certificate that the
// ssh.certificate record e published is revoked, by a the assessment of
// e's identity now: its key (or the account that approved it, see
// CertificateStandsOn) is no longer proven for the identity, or the
// proof it stands on now came after the certificate (the link was revoked
// and made again since: a revocation is not undone by a new link).
func CertificateRevoked(a *Assessment, e *Evidence) bool {
	st, ok := a.Status(CertificateStandsOn(e))
	if !ok || st.Level != LevelProven {
		return true
	}
	for _, seq := range st.Via {
		if seq > e.Seq {
			return true
		}
	}
	return false
}

// CertificateState is "valid", "expired" or "revoked": the standing of
// the certificate the ssh.certificate record e published, by the
// assessment a of its identity at now.
func CertificateState(a *Assessment, e *Evidence, now time.Time) string {
	switch {
	case !e.Expires.After(now):
		return "expired"
	case CertificateRevoked(a, e):
		return "revoked"
	}
	return "valid"
}

// RevokedCertificates returns the ssh.certificate records, with every
// byte, of the certificates still within their validity that are revoked
// now (CertificateRevoked): what a revocation list must name. Expired
// certificates are left out: sshd refuses them anyway.
func (s *Service) RevokedCertificates(ctx context.Context) ([]Evidence, error) {
	now := s.now()
	live, err := s.store.LiveCertificates(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("identity: revoked certificates: %w", err)
	}
	byHandle := map[Handle][]int{}
	var order []Handle
	for i, e := range live {
		if _, ok := byHandle[e.Handle]; !ok {
			order = append(order, e.Handle)
		}
		byHandle[e.Handle] = append(byHandle[e.Handle], i)
	}
	var out []Evidence
	for _, h := range order {
		_, recs, err := s.store.IdentityRecords(ctx, h)
		var a *Assessment
		switch {
		case errors.Is(err, ErrNotFound):
			a = &Assessment{Handle: h}
		case err != nil:
			return nil, fmt.Errorf("identity: revoked certificates: %s: %w", h, err)
		default:
			a = Assess(h, recs, now)
		}
		for _, i := range byHandle[h] {
			if CertificateRevoked(a, &live[i]) {
				out = append(out, live[i])
			}
		}
	}
	slices.SortFunc(out, func(x, y Evidence) int { return cmp.Compare(x.Seq, y.Seq) })
	return out, nil
}
