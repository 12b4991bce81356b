// device.go: a certificate approved by a login on another device (the
// device authorization grant, RFC 8628, which the server runs at its
// OpenID provider): the key signs the certificate statement, the server
// answers a user code to show, and the client polls at the interval,
// waiting five seconds more after each slow_down, until the person
// approved (the certificate), denied or let the code expire.

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/web/api"
)

// DeviceCode is what the person is to be shown: where to go and what to
// enter there.
type DeviceCode struct {
	Provider                string
	UserCode                string
	VerificationURI         string
	VerificationURIComplete string
	// Expires is when the code stops working.
	Expires time.Time
}

// DeviceRequest is what DeviceCertificate asks for.
type DeviceRequest struct {
	CertificateRequest
	// Provider names the server's OpenID provider to log in at; empty
	// means the server's first.
	Provider string
	// Show is called once with the code to show, before the polling.
	Show func(DeviceCode)
}

// ErrDeviceDenied and ErrDeviceExpired end a device login: the person
// denied it at the provider, or did not approve it in time.
var (
	ErrDeviceDenied  = errors.New("the device login was denied at the provider")
	ErrDeviceExpired = errors.New("the device login expired before it was approved")
)

// slowDownStep is what each slow_down adds to the interval (RFC 8628,
// 3.5).
const slowDownStep = 5 * time.Second

// DeviceCertificate gets a certificate for the SSH key s as handle,
// approved by a device login: it signs the server's certificate
// statement with s, starts the login, calls req.Show with the code, and
// polls until the person approves, denies or lets it expire. The
// certificate is checked as Certificate checks it.
func (c *Client) DeviceCertificate(ctx context.Context, handle string, s Signer, req DeviceRequest) (*Certificate, error) {
	stmt, err := c.Challenge(ctx, identity.PurposeCertificate, handle, s.Pub)
	if err != nil {
		return nil, err
	}
	sig, err := s.Sign(ctx, stmt)
	if err != nil {
		return nil, err
	}
	var da api.DeviceAuthorizationResponse
	err = c.call(ctx, "start a device login for "+s.ID, http.MethodPost, "/api/v1/ssh/device-authorizations", handle,
		api.DeviceAuthorizationRequest{Statement: stmt, Signature: sig, Provider: req.Provider}, &da)
	if err != nil {
		return nil, err
	}
	if req.Show != nil {
		req.Show(DeviceCode{Provider: da.Provider, UserCode: da.UserCode, VerificationURI: da.VerificationURI,
			VerificationURIComplete: da.VerificationURIComplete, Expires: time.Now().Add(time.Duration(da.ExpiresIn) * time.Second)})
	}
	interval := time.Duration(da.Interval) * time.Second
	if interval <= 0 {
		interval = 5 * time.Second
	}
	poll := api.DeviceCertificateRequest{Statement: stmt, Signature: sig, Provider: da.Provider, Pending: da.Pending,
		Validity: req.Validity, Principals: req.Principals}
	for {
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		var resp api.CertificateResponse
		err := c.call(ctx, "get the certificate of the device login for "+s.ID, http.MethodPost, "/api/v1/ssh/device-certificates", handle, poll, &resp)
		var r *Refusal
		switch {
		case err == nil:
			return c.checkCertificate(ctx, handle, resp, s, req.CAKeys)
		case !errors.As(err, &r):
			return nil, err
		case r.Code == api.CodeAuthorizationPending:
			continue
		case r.Code == api.CodeSlowDown:
			interval += slowDownStep
			continue
		case r.Code == api.CodeAccessDenied:
			return nil, fmt.Errorf("%w: %v", ErrDeviceDenied, err)
		case r.Code == api.CodeExpiredToken:
			return nil, fmt.Errorf("%w: %v", ErrDeviceExpired, err)
		}
		r.Hint = certificateHint(r.Code, handle, s.File)
		return nil, err
	}
}
