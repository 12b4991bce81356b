// device.go: SSH certificates approved by a login on another device (the
// OAuth 2.0 device authorization grant, RFC 8628), for a host without a
// browser. The client signs a certificate statement with its key and
// posts it to POST /api/v1/ssh/device-authorizations, which checks the
// signature, starts the grant at the provider and answers the user code,
// the verification URI and the grant's sealed state (package oidc seals
// the device code to the statement; the client never sees the device
// code). The client shows the code, and polls POST
// /api/v1/ssh/device-certificates with the statement, its signature and
// the sealed state at the interval: the server asks the provider's token
// endpoint once per poll and answers authorization_pending, slow_down,
// expired_token or access_denied as the provider did, or, once the
// person approved, the certificate that identity.Service.IssueCertificate
// issues with the login as its approval.

package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/oidc"
)

// DeviceAuthorizationRequest starts a device login approving a
// certificate request.
type DeviceAuthorizationRequest struct {
	// Statement is the issued certificate statement (purpose
	// certificate), and Signature the key's SSHSIG over it.
	Statement string `json:"statement"`
	Signature string `json:"signature"`
	// Provider names the OpenID provider to log in at; empty means the
	// first configured.
	Provider string `json:"provider,omitempty"`
}

// DeviceAuthorizationResponse is a started device login.
type DeviceAuthorizationResponse struct {
	Provider string `json:"provider"`
	// UserCode is what the person enters at VerificationURI (on a phone,
	// say); VerificationURIComplete, when the provider gives one, carries
	// it already.
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete,omitempty"`
	// ExpiresIn and Interval are in seconds: how long the code works, and
	// how long to wait between polls.
	ExpiresIn int64 `json:"expires_in"`
	Interval  int64 `json:"interval"`
	// Pending is the grant's sealed state, to poll with.
	Pending string `json:"pending"`
}

// DeviceCertificateRequest polls for the certificate a device login
// approves.
type DeviceCertificateRequest struct {
	Statement string `json:"statement"`
	Signature string `json:"signature"`
	Provider  string `json:"provider"`
	Pending   string `json:"pending"`
	// Validity and Principals are as in CertificateRequest.
	Validity   string   `json:"validity,omitempty"`
	Principals []string `json:"principals,omitempty"`
}

// PrincipalGrant is a principal a login's claim granted.
type PrincipalGrant struct {
	Principal string `json:"principal"`
	Claim     string `json:"claim"`
	Value     string `json:"value"`
}

// The refusal codes of a device login still under way or refused at the
// provider: RFC 8628's own (section 3.5).
const (
	CodeAuthorizationPending identity.Code = "authorization_pending"
	CodeSlowDown             identity.Code = "slow_down"
	CodeExpiredToken         identity.Code = "expired_token"
	CodeAccessDenied         identity.Code = "access_denied"
	CodeNoDeviceLogin        identity.Code = "device_login_unavailable"
)

// deviceProvider returns the named provider (empty: the first).
func (h *Handler) deviceProvider(name string) (*oidc.Provider, error) {
	if name == "" {
		if names := h.providers.Names(); len(names) > 0 {
			name = names[0]
		}
	}
	p, ok := h.providers.Get(name)
	if !ok {
		return nil, identity.Refuse(CodeNoDeviceLogin, "this server has no OpenID provider %q to log in at", name)
	}
	return p, nil
}

func (h *Handler) postDeviceAuthorization(w http.ResponseWriter, r *http.Request) error {
	var req DeviceAuthorizationRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := needSignedCertificateStatement(req.Statement, req.Signature); err != nil {
		return err
	}
	if err := h.svc.CheckCertificateRequest(r.Context(), []byte(req.Statement), []byte(req.Signature)); err != nil {
		return err
	}
	p, err := h.deviceProvider(req.Provider)
	if err != nil {
		return err
	}
	da, err := p.StartDevice(r.Context(), nil, []byte(req.Statement))
	if err != nil {
		return deviceRefusal(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, DeviceAuthorizationResponse{
		Provider: p.Name(), UserCode: da.UserCode, VerificationURI: da.VerificationURI,
		VerificationURIComplete: da.VerificationURIComplete, ExpiresIn: int64(da.Expires.Sub(h.now()).Seconds()),
		Interval: int64(da.Interval / time.Second), Pending: da.Pending,
	})
	return nil
}

func (h *Handler) postDeviceCertificate(w http.ResponseWriter, r *http.Request) error {
	var req DeviceCertificateRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := needStatement(req.Statement, identity.PurposeCertificate); err != nil {
		return err
	}
	if strings.TrimSpace(req.Signature) == "" || req.Pending == "" {
		return missing("signature or pending", "send the statement, its signature and the pending state POST /api/v1/ssh/device-authorizations answered")
	}
	validity, err := parseValidity(req.Validity)
	if err != nil {
		return err
	}
	p, err := h.deviceProvider(req.Provider)
	if err != nil {
		return err
	}
	l, err := p.PollDevice(r.Context(), req.Pending, []byte(req.Statement))
	if err != nil {
		return deviceRefusal(err)
	}
	approval, err := h.approvalLogin(r, p, l)
	if err != nil {
		return err
	}
	c, err := h.svc.IssueCertificate(r.Context(), identity.CertificateRequest{
		Statement: []byte(req.Statement), Signature: []byte(req.Signature),
		Validity: validity, Principals: req.Principals, Approval: &approval,
	})
	if identity.CodeOf(err) == identity.CodeRateLimited {
		w.Header().Set("Retry-After", "3600")
	}
	if err != nil {
		return err
	}
	return h.writeCertificate(w, c)
}

// approvalLogin is a device login as the identity service takes it: the
// account as the store records it, the login's time (auth_time, else
// iat) and the values of the claims the certificate policy reads.
func (h *Handler) approvalLogin(r *http.Request, p *oidc.Provider, l *oidc.Login) (identity.Login, error) {
	account, salt, err := h.svc.OIDCAccount(r.Context(), l.Issuer, l.Subject)
	if err != nil {
		return identity.Login{}, err
	}
	at := l.AuthTime
	if at.IsZero() {
		at = l.IssuedAt
	}
	claims := map[string][]string{}
	for _, name := range h.svc.CertificateClaims() {
		if v := l.Claims.Strings(name); v != nil {
			claims[name] = v
		}
	}
	return identity.Login{
		Account: account, Provider: p.Name(), ClientID: p.Config().ClientID, AuthTime: at.UTC(),
		IDToken: l.RawIDToken, SigningKey: l.SigningKey, Subject: l.Subject, SubjectSalt: salt, Claims: claims,
	}, nil
}

// deviceRefusal turns the device grant's errors into refusals with
// RFC 8628's codes.
func deviceRefusal(err error) error {
	for _, c := range []struct {
		err  error
		code identity.Code
	}{
		{oidc.ErrAuthorizationPending, CodeAuthorizationPending}, {oidc.ErrSlowDown, CodeSlowDown},
		{oidc.ErrExpiredToken, CodeExpiredToken}, {oidc.ErrAccessDenied, CodeAccessDenied},
		{oidc.ErrDeviceBinding, identity.CodeStatementChanged},
		{oidc.ErrNoDeviceGrant, CodeNoDeviceLogin}, {oidc.ErrProviderUnavailable, CodeNoDeviceLogin},
	} {
		if errors.Is(err, c.err) {
			return identity.RefuseErr(c.code, err, "device login")
		}
	}
	if errors.Is(err, oidc.ErrIDToken) || errors.Is(err, oidc.ErrExchange) || errors.Is(err, oidc.ErrDenied) || errors.Is(err, oidc.ErrEmailDomain) {
		return identity.RefuseErr(identity.CodeBadSignature, err, "device login")
	}
	return err
}
