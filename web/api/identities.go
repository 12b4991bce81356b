// identities.go: the write endpoints: challenges, claims, adds and
// revocations. Each one is one identity.Service call, hence one store
// transaction.

package api

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// ChallengeRequest asks for a statement to sign.
type ChallengeRequest struct {
	Handle string `json:"handle"`
	// Factor is an SSH public key line ("ssh-ed25519 AAAA... comment")
	// or an OpenPGP fingerprint (hex).
	Factor  string `json:"factor"`
	Purpose string `json:"purpose"`
}

// ChallengeResponse is an issued statement.
type ChallengeResponse struct {
	Nonce     string    `json:"nonce"`
	Purpose   string    `json:"purpose"`
	Handle    string    `json:"handle"`
	Factor    string    `json:"factor"`
	Issued    time.Time `json:"issued"`
	Expires   time.Time `json:"expires"`
	Statement string    `json:"statement"`
	// Sign shows how to sign the statement saved as statement.txt.
	Sign []string `json:"sign"`
}

// parseFactor reads a factor as requests give it: an SSH public key line,
// or an OpenPGP fingerprint. It returns the factor and, for an SSH key,
// its comment.
func parseFactor(s string) (identity.Factor, string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return identity.Factor{}, "", identity.Refuse(identity.CodeBadFactor, "no factor given")
	}
	if f, err := identity.ParsePGPFingerprint(s); err == nil {
		return f, "", nil
	}
	k, err := ssh.ParseAuthorizedKey([]byte(s))
	if err != nil {
		return identity.Factor{}, "", identity.RefuseErr(identity.CodeBadFactor, err,
			"the factor is neither an SSH public key line nor an OpenPGP fingerprint")
	}
	if k.Cert != nil {
		return identity.Factor{}, "", identity.Refuse(identity.CodeBadFactor, "certificates cannot be factors: give the plain key")
	}
	if len(k.Options) > 0 {
		return identity.Factor{}, "", identity.Refuse(identity.CodeBadFactor, "give the key without authorized_keys options")
	}
	return identity.SSHFactor(k.Fingerprint().String(), k.Public.Marshal()), ssh.SanitizeComment(k.Comment), nil
}

func (h *Handler) postChallenge(w http.ResponseWriter, r *http.Request) error {
	if !h.limit.Allow(w, r) {
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many challenges from this address; try again in a minute")
		return nil
	}
	var req ChallengeRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	f, _, err := parseFactor(req.Factor)
	if err != nil {
		return err
	}
	var c *identity.Challenge
	if identity.Purpose(req.Purpose) == identity.PurposeDeleteKey {
		if req.Handle != "" {
			return identity.Refuse(identity.CodeBadRequest, "a key deletion names no handle")
		}
		c, err = h.svc.IssueKeyDeletion(r.Context(), f)
	} else {
		c, err = h.svc.IssueChallenge(r.Context(), identity.Purpose(req.Purpose), req.Handle, f)
	}
	if err != nil {
		return err
	}
	sign := []string{"ssh-keygen -Y sign -n " + ssh.Namespace + " -f KEY statement.txt"}
	switch {
	case c.Purpose == identity.PurposeDeleteKey:
		// The primary key itself must sign: "!" keeps gpg from using a
		// signing subkey.
		sign = []string{"gpg --local-user " + f.Value + "! --clearsign statement.txt"}
	case f.Kind == identity.KindPGP:
		sign = []string{"gpg --clearsign statement.txt", "gpg --detach-sign --armor statement.txt"}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, ChallengeResponse{
		Nonce: base64.RawURLEncoding.EncodeToString(c.Nonce), Purpose: string(c.Purpose),
		Handle: string(c.Handle), Factor: c.Factor.String(), Issued: c.Issued, Expires: c.Expires,
		Statement: string(c.Statement), Sign: sign,
	})
	return nil
}

// KeyDeletionResponse is the answer to a key deletion.
type KeyDeletionResponse struct {
	Fingerprint string `json:"fingerprint"`
	// Result says what became of the stored key.
	Result string `json:"result"`
}

// postKeyDeletion deletes the key a signed delete-key statement names:
// the server keeps only its tombstone from then on.
func (h *Handler) postKeyDeletion(w http.ResponseWriter, r *http.Request) error {
	var req SignedStatement
	if err := readJSON(r, &req); err != nil {
		return err
	}
	f, out, err := h.svc.DeleteKey(r.Context(), []byte(req.Statement), []byte(req.Signature))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, KeyDeletionResponse{Fingerprint: f.Value, Result: string(out)})
	return nil
}

// SignedStatement is a statement with a signature over it.
type SignedStatement struct {
	Statement string `json:"statement"`
	// Signature is an armored SSHSIG, a cleartext-signed copy of the
	// statement, or an armored detached OpenPGP signature.
	Signature string `json:"signature"`
}

// ClaimRequest claims a handle with the statement's factor.
type ClaimRequest struct {
	SignedStatement
	// Label is shown with an SSH key (its comment); optional.
	Label string `json:"label,omitempty"`
}

// AddRequest links a factor to an identity.
type AddRequest struct {
	Statement string `json:"statement"`
	// Signature is the new factor's signature over the statement; without
	// it the factor is only claimed.
	Signature string `json:"signature,omitempty"`
	// By and BySignature are a proven factor of the identity (SSH key
	// line, "SHA256:..." fingerprint, or OpenPGP fingerprint) and its
	// signature over the statement; they may be left out when the factor
	// was claimed before.
	By          string `json:"by,omitempty"`
	BySignature string `json:"by_signature,omitempty"`
	Label       string `json:"label,omitempty"`
}

// RevokeRequest unlinks the statement's factor.
type RevokeRequest struct {
	Statement string `json:"statement"`
	// By is the proven factor that signed (defaults to the statement's
	// factor); Signature its signature over the statement.
	By        string `json:"by,omitempty"`
	Signature string `json:"signature"`
}

// signHint says how to sign a statement.
const signHint = "ssh-keygen -Y sign -n kith -f KEY statement.txt, or gpg --clearsign statement.txt"

// missing refuses a request that lacks a field, saying what goes in it.
func missing(field, what string) error {
	return identity.Refuse(identity.CodeBadRequest, "%s is missing: %s", field, what)
}

// needStatement refuses a request without its statement.
func needStatement(statement string, purpose identity.Purpose) error {
	if strings.TrimSpace(statement) == "" {
		return missing("statement", fmt.Sprintf("ask POST /api/v1/challenges (purpose %s) for one and send it back verbatim", purpose))
	}
	return nil
}

func (h *Handler) postClaim(w http.ResponseWriter, r *http.Request) error {
	var req ClaimRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := needStatement(req.Statement, identity.PurposeClaim); err != nil {
		return err
	}
	if strings.TrimSpace(req.Signature) == "" {
		return missing("signature", "the statement's factor signs it ("+signHint+")")
	}
	label := ssh.SanitizeComment(req.Label)
	id, err := h.svc.Claim(r.Context(), identity.ClaimRequest{
		Statement: []byte(req.Statement),
		Proof:     identity.Proof{Signature: []byte(req.Signature)},
		Label:     label,
	})
	if err != nil {
		return err
	}
	return h.writeIdentity(w, r, string(id.Handle), http.StatusCreated)
}

// resolveFactor reads a factor a request names, which for an SSH key may
// be its fingerprint alone when the identity's records hold the key.
func (h *Handler) resolveFactor(r *http.Request, handle, s string) (identity.Factor, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "SHA256:") && !strings.Contains(s, " ") {
		_, a, _, err := h.svc.Lookup(r.Context(), handle)
		if err != nil {
			return identity.Factor{}, err
		}
		st, ok := a.Status(identity.Factor{Kind: identity.KindSSH, Value: s})
		if !ok {
			return identity.Factor{}, identity.Refuse(identity.CodeNotProven, "%s is not a factor of %q", s, handle)
		}
		return st.Factor, nil
	}
	f, _, err := parseFactor(s)
	return f, err
}

func (h *Handler) postAdd(w http.ResponseWriter, r *http.Request) error {
	var req AddRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	handle := r.PathValue("handle")
	if err := needStatement(req.Statement, identity.PurposeAdd); err != nil {
		return err
	}
	if err := statementFor(req.Statement, handle); err != nil {
		return err
	}
	switch {
	case req.Signature == "" && req.By == "" && req.BySignature == "":
		return identity.Refuse(identity.CodeBadRequest,
			"signature, by and by_signature are missing: send signature (the new factor's, over the statement) and by with by_signature (a factor proven for %q and its signature over the same statement)", handle)
	case req.By != "" && req.BySignature == "":
		return missing("by_signature", "by's signature over the statement ("+signHint+")")
	case req.By == "" && req.BySignature != "":
		return missing("by", "name the proven factor that made by_signature (its SSH key line, SHA256:... fingerprint or OpenPGP fingerprint)")
	}
	ar := identity.AddRequest{Statement: []byte(req.Statement), Label: ssh.SanitizeComment(req.Label)}
	if req.Signature != "" {
		ar.New = &identity.Proof{Signature: []byte(req.Signature)}
	}
	if req.By != "" || req.BySignature != "" {
		by, err := h.resolveFactor(r, handle, req.By)
		if err != nil {
			return err
		}
		ar.By = &identity.Proof{Factor: by, Signature: []byte(req.BySignature)}
	}
	if err := h.svc.Add(r.Context(), ar); err != nil {
		return h.withCoSigners(r, handle, "by_signature", err)
	}
	return h.writeIdentity(w, r, handle, http.StatusOK)
}

func (h *Handler) postRevoke(w http.ResponseWriter, r *http.Request) error {
	var req RevokeRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	handle := r.PathValue("handle")
	if err := needStatement(req.Statement, identity.PurposeRevoke); err != nil {
		return err
	}
	if err := statementFor(req.Statement, handle); err != nil {
		return err
	}
	if strings.TrimSpace(req.Signature) == "" {
		return missing("signature", "a factor proven for "+strconv.Quote(handle)+" signs the statement ("+signHint+"); name it in by unless it is the statement's own factor")
	}
	rr := identity.RevokeRequest{Statement: []byte(req.Statement), By: identity.Proof{Signature: []byte(req.Signature)}}
	if req.By != "" {
		by, err := h.resolveFactor(r, handle, req.By)
		if err != nil {
			return err
		}
		rr.By.Factor = by
	}
	if err := h.svc.Revoke(r.Context(), rr); err != nil {
		return h.withCoSigners(r, handle, "signature", err)
	}
	return h.writeIdentity(w, r, handle, http.StatusOK)
}

// withCoSigners adds to a refusal for want of a proven signer which
// factors of the identity may sign, so that a client knows what to send.
func (h *Handler) withCoSigners(r *http.Request, handle, sigField string, err error) error {
	code := identity.CodeOf(err)
	if code != identity.CodeNotAuthorized && code != identity.CodeNotProven {
		return err
	}
	_, a, _, lerr := h.svc.Lookup(r.Context(), handle)
	if lerr != nil {
		return err
	}
	var names []string
	for _, st := range a.Factors {
		if st.Level == identity.LevelProven && st.Factor.Provable() && st.Parent.IsZero() {
			names = append(names, st.Factor.String())
		}
	}
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	var ie *identity.Error
	errors.As(err, &ie)
	return identity.Refuse(code, "%s (send one of the proven factors of %s as by, with its signature over the statement as %s: %s)",
		refusalMessage(ie), handle, sigField, list)
}

// refusalMessage is a refusal's text.
func refusalMessage(e *identity.Error) string {
	if e == nil {
		return ""
	}
	return e.Error()
}

// statementFor refuses a statement for another handle than the URL's.
func statementFor(statement, handle string) error {
	c, err := identity.ParseStatement([]byte(statement))
	if err != nil {
		return identity.RefuseErr(identity.CodeBadStatement, err, "not a statement this server issued")
	}
	if string(c.Handle) != handle {
		return identity.Refuse(identity.CodeBadRequest, "the statement is for handle %q, the URL names %q", c.Handle, handle)
	}
	return nil
}

// writeIdentity answers a write with the identity as it now stands.
func (h *Handler) writeIdentity(w http.ResponseWriter, r *http.Request, handle string, status int) error {
	doc, err := h.identityDoc(r, handle)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/users/"+handle+".json")
	writeJSON(w, status, doc)
	return nil
}
