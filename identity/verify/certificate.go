// certificate.go: the SSH certificate authority for package identity over
// package ssh, and re-verifying its records offline: an ssh.ca-key record
// publishes the CA key, and an ssh.certificate record carries the key
// holder's signed request and the certificate, which must verify by a CA
// key published earlier in the log and say what the record says.

package verify

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/oidc"
	"github.com/kith-keyserver/kith/ssh"
)

// CertificateAuthority is identity.CertificateAuthority over an ssh.CA.
type CertificateAuthority struct {
	CA *ssh.CA
}

var _ identity.CertificateAuthority = CertificateAuthority{}

// PublicKey returns the CA's public key blob.
func (c CertificateAuthority) PublicKey() []byte { return c.CA.PublicKey().Marshal() }

// SignHostCertificate signs a host certificate with the CA.
func (c CertificateAuthority) SignHostCertificate(_ context.Context, t identity.CertificateTemplate) ([]byte, error) {
	return c.CA.SignHost(ssh.HostCertificate{
		Key: t.Key, Serial: t.Serial, KeyID: t.KeyID, Principals: t.Principals,
		ValidAfter: t.ValidAfter, ValidBefore: t.ValidBefore,
	})
}

// SignUserCertificate signs a user certificate with the CA.
func (c CertificateAuthority) SignUserCertificate(_ context.Context, t identity.CertificateTemplate) ([]byte, error) {
	return c.CA.SignUser(ssh.UserCertificate{
		Key: t.Key, Serial: t.Serial, KeyID: t.KeyID, Principals: t.Principals,
		ValidAfter: t.ValidAfter, ValidBefore: t.ValidBefore,
		CriticalOptions: t.CriticalOptions, Extensions: t.Extensions,
	})
}

// caKeyRecord checks an ssh.ca-key record's form: an SSH key, named by
// its fingerprint, that the statement names too. That it is the server's
// CA key is the server's word; what the log guarantees is that everyone
// sees the same key before any certificate it signs.
func caKeyRecord(e *identity.Evidence) error {
	if e.Handle != "" || !e.To.IsZero() || e.Purpose != "" || e.From.Kind != identity.KindSSH {
		return fmt.Errorf("an %s record must come from an SSH key and name nothing else", e.Method)
	}
	if !bytes.Equal(e.SignerKey, e.From.Data) {
		return fmt.Errorf("the record's key is not the key of %s", e.From)
	}
	pub, err := ssh.ParsePublicKey(e.SignerKey)
	if err != nil {
		return fmt.Errorf("CA key: %w", err)
	}
	if fp := ssh.FingerprintOf(pub).String(); fp != e.From.Value {
		return fmt.Errorf("CA key has fingerprint %s, record names %s", fp, e.From.Value)
	}
	want := fmt.Sprintf("%s\n\nserver: ", identity.CAKeyStatementTitle)
	line := fmt.Sprintf("\nkey: %s %s\n", pub.Type(), base64.StdEncoding.EncodeToString(e.SignerKey))
	if !bytes.HasPrefix(e.Statement, []byte(want)) || !bytes.Contains(e.Statement, []byte(line)) {
		return fmt.Errorf("the statement does not name the CA key %s", e.From.Value)
	}
	return nil
}

// certificateRecord checks an ssh.certificate record by itself: the key's
// SSHSIG over a certificate statement that names the record's handle and
// key, answered in time, and a certificate signed by the CA it names, for
// that key, whose serial, key ID, principals and validity are the
// record's. Whether the CA is the log's and the key was proven for the
// identity is for LogVerifier, which knows what came before.
func certificateRecord(e *identity.Evidence) error {
	if e.Handle == "" || !e.To.IsZero() && e.To.Kind != identity.KindOIDC || e.Purpose != identity.PurposeCertificate || e.From.Kind != identity.KindSSH {
		return fmt.Errorf("an %s record must be a certificate request by an SSH key for an identity (approved by an account, when it names one)", e.Method)
	}
	if !e.To.IsZero() {
		// checkStatement compares the statement's factor with To when the
		// record names one: here the key is From, the approver To.
		plain := *e
		plain.To = identity.Factor{}
		if err := checkStatement(&plain); err != nil {
			return err
		}
	}
	if e.To.IsZero() {
		if err := checkStatement(e); err != nil {
			return err
		}
	}
	c, err := identity.ParseStatement(e.Statement)
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	if created := e.Created.Truncate(time.Second); created.Before(c.Issued) || created.After(c.Expires) {
		return fmt.Errorf("the certificate was issued at %s, outside the statement's %s to %s", e.Created.Format(time.RFC3339),
			c.Issued.Format(time.RFC3339), c.Expires.Format(time.RFC3339))
	}
	pub, err := ssh.ParsePublicKey(e.From.Data)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if fp := ssh.FingerprintOf(pub).String(); fp != e.From.Value {
		return fmt.Errorf("key has fingerprint %s, record names %s", fp, e.From.Value)
	}
	if err := ssh.VerifySignatureBy(e.Signature, e.Statement, ssh.Namespace, pub); err != nil {
		return err
	}
	cert, err := recordCertificate(e)
	if err != nil {
		return err
	}
	after, before := ssh.CertificateValidity(cert)
	switch {
	case !ssh.SameKey(cert.Key, pub):
		return fmt.Errorf("the certificate is for another key than %s", e.From)
	case cert.Serial != uint64(e.Seq):
		return fmt.Errorf("the certificate's serial %d is not the record's seq %d", cert.Serial, e.Seq)
	case cert.KeyId != identity.CertificateKeyID(e.Handle, e.Seq) || e.Label != cert.KeyId:
		return fmt.Errorf("the certificate's key ID %q is not %q", cert.KeyId, identity.CertificateKeyID(e.Handle, e.Seq))
	case len(cert.ValidPrincipals) == 0:
		return fmt.Errorf("the certificate names no principal, so it would be valid for every user")
	case !before.Equal(e.Expires):
		return fmt.Errorf("the certificate is valid until %s, the record says %s", before.Format(time.RFC3339), e.Expires.Format(time.RFC3339))
	case after.After(e.Created):
		return fmt.Errorf("the certificate is valid only from %s, after it was issued", after.Format(time.RFC3339))
	}
	for _, p := range cert.ValidPrincipals {
		if p == "" || strings.ContainsAny(p, ", \t\r\n") {
			return fmt.Errorf("the certificate names the principal %q", p)
		}
	}
	return nil
}

// recordCertificate reads an ssh.certificate record's certificate, of
// the type its identity gets: a host certificate for the host's name
// alone for a host identity, a user certificate for anyone else.
func recordCertificate(e *identity.Evidence) (*gossh.Certificate, error) {
	name, isHost := e.Handle.Host()
	if !isHost {
		return ssh.ParseUserCertificate(e.SignerKey)
	}
	cert, err := ssh.ParseHostCertificate(e.SignerKey)
	if err != nil {
		return nil, err
	}
	if len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != name {
		return nil, fmt.Errorf("the host certificate of %s names %q, not the host alone", e.Handle, cert.ValidPrincipals)
	}
	return cert, nil
}

// certificateCA returns the blob of the CA key that signed an
// ssh.certificate record's certificate.
func certificateCA(e *identity.Evidence) ([]byte, error) {
	cert, err := recordCertificate(e)
	if err != nil {
		return nil, err
	}
	return cert.SignatureKey.Marshal(), nil
}

// deviceApprovalRecord checks an oidc.device-approval record by itself:
// an account's approval, for an identity, of a certificate request by an
// SSH key, whose statement says what the record says; with its ID token
// (public, or revealed), that the token verifies with the record's JWK,
// was issued by the account's issuer to the client the statement names,
// is about the account's subject, and carries each claim value a grant
// names. That the approval belongs to the certificate after it is for
// LogVerifier.
func deviceApprovalRecord(e *identity.Evidence) error {
	if e.Handle == "" || e.Purpose != identity.PurposeCertificate || e.From.Kind != identity.KindOIDC || e.To.Kind != identity.KindSSH || len(e.Consent) > 0 {
		return fmt.Errorf("an %s record must be an account's approval of an SSH key's certificate for an identity", e.Method)
	}
	d, err := identity.ParseDeviceApproval(e.Statement)
	if err != nil {
		return err
	}
	switch {
	case d.Handle != e.Handle || d.Key != e.To.Value || d.Signer != e.From.String():
		return fmt.Errorf("the approval statement does not describe the record")
	case !d.Recorded.Equal(e.Created.Truncate(time.Second)):
		return fmt.Errorf("the approval statement was recorded at %s, the record at %s", d.Recorded.Format(time.RFC3339), e.Created.Format(time.RFC3339))
	case len(d.Request) != 64 || strings.Trim(d.Request, "0123456789abcdef") != "":
		return fmt.Errorf("the approval names no request hash")
	}
	if len(e.SignerKey) == 0 {
		return ErrNoSigningKey
	}
	if err := withheld(e); err != nil {
		return err
	}
	issuer, _, err := oidcAccount(e.From)
	if err != nil {
		return err
	}
	subject, err := recordSubject(e, e.From)
	if err != nil {
		return err
	}
	claims, err := oidc.VerifyEvidence(string(e.Signature), e.SignerKey, issuer, d.ClientID)
	if err != nil {
		return err
	}
	if claims.Subject != subject {
		return fmt.Errorf("the token is about subject %q, the record names %q", claims.Subject, subject)
	}
	for _, g := range d.Grants {
		if !slices.Contains(claims.Strings(g.Claim), g.Value) {
			return fmt.Errorf("the approval grants %s for %s %q, which the ID token does not carry", g.Principal, g.Claim, g.Value)
		}
	}
	return nil
}

// checkApproved checks a device-approved certificate against its
// approval, the record before it: for this identity, key and account,
// for this very request, by a login made after the request was issued,
// and every principal the approval grants by a claim is in the
// certificate.
func checkApproved(e, approval *identity.Evidence) error {
	if approval == nil || approval.Seq != e.Seq-1 || approval.Method != identity.MethodOIDCDeviceApproval ||
		approval.Handle != e.Handle || !approval.From.Same(e.To) || !approval.To.Same(e.From) {
		return fmt.Errorf("no approval by %s of this key's certificate precedes it", e.To)
	}
	d, err := identity.ParseDeviceApproval(approval.Statement)
	if err != nil {
		return err
	}
	if d.Request != identity.RequestHash(e.Statement) {
		return fmt.Errorf("record %d approved another request", approval.Seq)
	}
	c, err := identity.ParseStatement(e.Statement)
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	if !d.Authenticated.IsZero() && d.Authenticated.Before(c.Issued.Add(-5*time.Minute)) {
		return fmt.Errorf("the approving login (%s) is older than the request (%s)", d.Authenticated.Format(time.RFC3339), c.Issued.Format(time.RFC3339))
	}
	cert, err := ssh.ParseUserCertificate(e.SignerKey)
	if err != nil {
		return err
	}
	for _, g := range d.Grants {
		if !slices.Contains(cert.ValidPrincipals, g.Principal) {
			return fmt.Errorf("the approval grants %s, which the certificate does not name", g.Principal)
		}
	}
	return nil
}

// replay keeps, light, the records that assessing an identity needs, so
// that LogVerifier can tell whether a key was proven for an identity at a
// point of the log, as the server had to when it issued a certificate.
type replay struct {
	// byHandle are the records naming each identity; byFactor the
	// records without an identity that a factor made (links a key
	// carries, their revocations, mailed verifications).
	byHandle map[identity.Handle][]identity.Evidence
	byFactor map[string][]identity.Evidence
}

func factorKey(f identity.Factor) string { return string(f.Kind) + " " + f.Value }

// add remembers e.
func (r *replay) add(e *identity.Evidence) {
	light := *e
	light.Statement, light.Signature, light.SignerKey = nil, nil, nil
	if r.byHandle == nil {
		r.byHandle = map[identity.Handle][]identity.Evidence{}
		r.byFactor = map[string][]identity.Evidence{}
	}
	if e.Handle != "" {
		r.byHandle[e.Handle] = append(r.byHandle[e.Handle], light)
		return
	}
	if e.Method.KeyCarried() || e.Method == identity.MethodRevocation || e.Method == identity.MethodEmailVerified {
		k := factorKey(e.From)
		r.byFactor[k] = append(r.byFactor[k], light)
	}
}

// proven reports whether f was proven for h at t by the records so far:
// the identity's, and those of the factors they name (as the store's
// IdentityRecords gathers them).
func (r *replay) proven(h identity.Handle, f identity.Factor, t time.Time) bool {
	mine := r.byHandle[h]
	recs := slices.Clone(mine)
	seen := map[string]bool{}
	for _, e := range mine {
		for _, g := range []identity.Factor{e.From, e.To} {
			if k := factorKey(g); !g.IsZero() && !seen[k] {
				seen[k] = true
				recs = append(recs, r.byFactor[k]...)
			}
		}
	}
	return identity.Assess(h, recs, t).Proven(f)
}
