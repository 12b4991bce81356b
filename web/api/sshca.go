// sshca.go: the SSH certificate authority's endpoints: issuing a user
// certificate for a proven key (POST /api/v1/ssh/certificates), the CA's
// public key for sshd's TrustedUserCAKeys (GET /ssh/ca.pub) and the
// revocation list for its RevokedKeys (GET /ssh/krl). Each is one
// identity.Service call; the KRL is encoded by package ssh.

package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// CertificateRequest asks for an SSH user certificate.
type CertificateRequest struct {
	// Statement is the issued certificate statement (purpose
	// certificate), and Signature the key's SSHSIG over it.
	Statement string `json:"statement"`
	Signature string `json:"signature"`
	// Validity is how long the certificate is to be valid, a duration
	// such as "1h" or "30m"; empty means the server's default.
	Validity string `json:"validity,omitempty"`
	// Principals, when given, are the principals to certify, a subset of
	// the identity's; empty means all of them.
	Principals []string `json:"principals,omitempty"`
}

// CertificateResponse is an issued certificate.
type CertificateResponse struct {
	// Certificate is the certificate as a -cert.pub file holds it.
	Certificate string   `json:"certificate"`
	Serial      uint64   `json:"serial"`
	KeyID       string   `json:"key_id"`
	Principals  []string `json:"principals"`
	// Grants are the principals a device login's claims granted (see
	// POST /api/v1/ssh/device-certificates).
	Grants      []PrincipalGrant `json:"principal_grants,omitempty"`
	ValidAfter  time.Time        `json:"valid_after"`
	ValidBefore time.Time        `json:"valid_before"`
	// Log is the URL of the ssh.certificate record that publishes it.
	Log string `json:"log"`
	// CAKey is the CA's public key line (TrustedUserCAKeys).
	CAKey string `json:"ca_key"`
}

// CertificateDoc is one certificate issued for an identity, in its
// document.
type CertificateDoc struct {
	Serial int64 `json:"serial"`
	// Key is the certified key's SHA256 fingerprint.
	Key     string    `json:"key"`
	KeyID   string    `json:"key_id"`
	Issued  time.Time `json:"issued"`
	Expires time.Time `json:"expires"`
	// State is valid, expired or revoked.
	State string `json:"state"`
	Log   string `json:"log"`
}

// logURL is the API URL of record seq.
func logURL(seq int64) string { return fmt.Sprintf("/api/v1/log?after=%d&limit=1", seq-1) }

// caKeyLine is the CA's public key as a TrustedUserCAKeys line, or nil
// without a CA.
func (h *Handler) caKeyLine() ([]byte, error) {
	return h.caKeyLineNamed("SSH user CA of ")
}

// caKeyLineNamed is the CA's public key line with the comment kind and
// the server's name.
func (h *Handler) caKeyLineNamed(kind string) ([]byte, error) {
	blob := h.svc.CAPublicKey()
	if blob == nil {
		return nil, identity.Refuse(identity.CodeCADisabled, "this server issues no SSH certificates")
	}
	pub, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return nil, fmt.Errorf("api: CA key: %w", err)
	}
	return ssh.MarshalAuthorizedKey(&ssh.Key{Public: pub, Comment: kind + h.svc.Server()}), nil
}

// needSignedCertificateStatement refuses a certificate request without
// its statement (of PurposeCertificate) or without the signature of the
// key it names.
func needSignedCertificateStatement(statement, signature string) error {
	if err := needStatement(statement, identity.PurposeCertificate); err != nil {
		return err
	}
	if strings.TrimSpace(signature) == "" {
		return missing("signature", "the statement's key signs it (ssh-keygen -Y sign -n kith -f KEY statement.txt)")
	}
	return nil
}

func (h *Handler) postCertificate(w http.ResponseWriter, r *http.Request) error {
	var req CertificateRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := needSignedCertificateStatement(req.Statement, req.Signature); err != nil {
		return err
	}
	validity, err := parseValidity(req.Validity)
	if err != nil {
		return err
	}
	c, err := h.svc.IssueCertificate(r.Context(), identity.CertificateRequest{
		Statement: []byte(req.Statement), Signature: []byte(req.Signature),
		Validity: validity, Principals: req.Principals,
	})
	if identity.CodeOf(err) == identity.CodeRateLimited {
		w.Header().Set("Retry-After", "3600")
	}
	if err != nil {
		return err
	}
	return h.writeCertificate(w, c)
}

// parseValidity reads a request's validity: empty is the server's
// default.
func parseValidity(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, identity.RefuseErr(identity.CodeBadValidity, err, "validity %q is not a duration such as 1h or 30m", s)
	}
	if d <= 0 {
		return 0, identity.Refuse(identity.CodeBadValidity, "validity %s is not positive", d)
	}
	return d, nil
}

// writeCertificate answers an issued certificate.
func (h *Handler) writeCertificate(w http.ResponseWriter, c *identity.Certificate) error {
	pub, err := ssh.ParsePublicKey(c.Certificate)
	if err != nil {
		return fmt.Errorf("api: issued certificate: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(&ssh.Key{Public: pub, Comment: c.KeyID})))
	ca, err := h.caKeyLine()
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", logURL(c.Record.Seq))
	var grants []PrincipalGrant
	for _, g := range c.Grants {
		grants = append(grants, PrincipalGrant{Principal: g.Principal, Claim: g.Claim, Value: g.Value})
	}
	writeJSON(w, http.StatusCreated, CertificateResponse{
		Certificate: line, Serial: uint64(c.Record.Seq), KeyID: c.KeyID, Principals: c.Principals, Grants: grants,
		ValidAfter: c.ValidAfter.UTC(), ValidBefore: c.ValidBefore.UTC(), Log: logURL(c.Record.Seq),
		CAKey: strings.TrimSpace(string(ca)),
	})
	return nil
}

// getCAKey serves the CA's public key line, for TrustedUserCAKeys.
func (h *Handler) getCAKey(w http.ResponseWriter, r *http.Request) error {
	line, err := h.caKeyLine()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", h.maxAgeHV)
	w.Write(line)
	return nil
}

// krlCache keeps the last revocation list this node made, for as long as
// no evidence append (on any node: the lookup cache's generation) and no
// more than the lookup TTL has passed. Its lock also makes concurrent
// requests wait for one computation instead of each making their own.
type krlCache struct {
	mu      sync.Mutex
	gen     uint64
	body    []byte
	expires time.Time
}

// getKRL serves the revocation list: for the CA (and any CA that signed
// a certificate still within its validity), the serials of the revoked
// certificates that have not expired. Its version is its generation
// time. A list is reused until an evidence append anywhere, or the
// lookup TTL (a link whose evidence expires revokes without an append).
func (h *Handler) getKRL(w http.ResponseWriter, r *http.Request) error {
	ca := h.svc.CAPublicKey()
	if ca == nil {
		return identity.Refuse(identity.CodeCADisabled, "this server issues no SSH certificates")
	}
	h.krl.mu.Lock()
	defer h.krl.mu.Unlock()
	now := h.now()
	gen := h.cache.generation()
	if h.cache.enabled() && h.krl.body != nil && h.krl.gen == gen && now.Before(h.krl.expires) {
		writeKRL(w, h.krl.body)
		return nil
	}
	body, err := h.makeKRL(r, ca, now)
	if err != nil {
		return err
	}
	h.krl.body, h.krl.gen, h.krl.expires = body, gen, now.Add(h.ttl)
	writeKRL(w, body)
	return nil
}

func writeKRL(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="revoked.krl"`)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// makeKRL computes the revocation list from the log.
func (h *Handler) makeKRL(r *http.Request, ca []byte, now time.Time) ([]byte, error) {
	recs, err := h.svc.RevokedCertificates(r.Context())
	if err != nil {
		return nil, err
	}
	krl := &ssh.KRL{Version: uint64(now.Unix()), Generated: now,
		Comment:      "certificates revoked by " + h.svc.Server(),
		Certificates: []ssh.RevokedCertificates{{CA: ca}}}
	for _, e := range recs {
		cert, err := ssh.ParseCertificate(e.SignerKey)
		if err != nil {
			return nil, fmt.Errorf("api: KRL: record %d: %w", e.Seq, err)
		}
		signer := cert.SignatureKey.Marshal()
		i := 0
		for i < len(krl.Certificates) && !bytes.Equal(krl.Certificates[i].CA, signer) {
			i++
		}
		if i == len(krl.Certificates) {
			krl.Certificates = append(krl.Certificates, ssh.RevokedCertificates{CA: signer})
		}
		krl.Certificates[i].Serials = append(krl.Certificates[i].Serials, cert.Serial)
	}
	return krl.Marshal(), nil
}

// certificateDocs lists the certificates issued for the identity whose
// records and assessment these are.
func certificateDocs(a *identity.Assessment, recs []identity.Evidence, now time.Time) []CertificateDoc {
	var out []CertificateDoc
	for i := range recs {
		e := &recs[i]
		if e.Method != identity.MethodSSHCertificate || e.Handle != a.Handle {
			continue
		}
		out = append(out, CertificateDoc{Serial: e.Seq, Key: e.From.Value, KeyID: e.Label, Issued: e.Created.UTC(),
			Expires: e.Expires.UTC(), State: identity.CertificateState(a, e, now), Log: logURL(e.Seq)})
	}
	return out
}
