package oidc

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/oidc/oidctest"
)

// approveDevice posts the provider's device form: the user code, the
// user, and approve or deny.
func (h *harness) approveDevice(verificationURI, userCode string, user oidctest.User, approve bool) {
	h.t.Helper()
	action := "deny"
	if approve {
		action = "approve"
	}
	resp, err := h.browser().PostForm(verificationURI, url.Values{"user_code": {userCode}, "username": {user.Username}, "action": {action}})
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("device form: HTTP %d", resp.StatusCode)
	}
}

// TestDeviceGrantPendingThenApproved: the device code is pending until the
// person approves its user code at the verification URI, then yields the
// verified login of the person who approved, with the groups claim when
// asked for; it is redeemed once.
func TestDeviceGrantPendingThenApproved(t *testing.T) {
	h := defaultHarness(t)
	ctx := context.Background()
	p := h.provider(clientID)
	binding := []byte("the statement this login approves")
	da, err := p.StartDevice(ctx, []string{oidctest.ScopeGroups}, binding)
	if err != nil {
		t.Fatal(err)
	}
	if da.UserCode == "" || !strings.HasPrefix(da.VerificationURI, h.op.Issuer) || !strings.Contains(da.VerificationURIComplete, "user_code=") || da.Interval <= 0 {
		t.Fatalf("device authorization %+v", da)
	}
	if strings.Contains(da.Pending, da.UserCode) {
		t.Error("the sealed state shows the user code")
	}
	_, err = p.PollDevice(ctx, da.Pending, binding)
	wantErr(t, err, ErrAuthorizationPending)
	h.approveDevice(da.VerificationURI, da.UserCode, alice, true)
	l, err := p.PollDevice(ctx, da.Pending, binding)
	if err != nil {
		t.Fatal(err)
	}
	if l.Subject != alice.Subject || l.Issuer != h.op.Issuer || l.RawIDToken == "" || len(l.SigningKey) == 0 || l.Nonce != "" {
		t.Errorf("login %+v", l)
	}
	if got := l.Claims.Strings("groups"); !slices.Equal(got, alice.Groups) {
		t.Errorf("groups %q, want %q", got, alice.Groups)
	}
	_, err = p.PollDevice(ctx, da.Pending, binding)
	wantErr(t, err, ErrAccessDenied)
}

// TestDeviceGrantBoundToItsRequest: a device code approved for one
// binding yields nothing for another, nor through another provider's
// state or a changed state; a denied one says so.
func TestDeviceGrantBoundToItsRequest(t *testing.T) {
	h := defaultHarness(t)
	ctx := context.Background()
	p := h.provider(clientID)
	da, err := p.StartDevice(ctx, nil, []byte("key A's request"))
	if err != nil {
		t.Fatal(err)
	}
	h.approveDevice(da.VerificationURI, da.UserCode, alice, true)
	_, err = p.PollDevice(ctx, da.Pending, []byte("key B's request"))
	wantErr(t, err, ErrDeviceBinding)
	changed := da.Pending[:len(da.Pending)-2] + "AA"
	_, err = p.PollDevice(ctx, changed, []byte("key A's request"))
	wantErr(t, err, ErrDeviceBinding)
	if l, err := p.PollDevice(ctx, da.Pending, []byte("key A's request")); err != nil || l.Subject != alice.Subject {
		t.Fatalf("the request it was started for: %v, %v", l, err)
	}

	denied, err := p.StartDevice(ctx, nil, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	h.approveDevice(denied.VerificationURI, denied.UserCode, alice, false)
	_, err = p.PollDevice(ctx, denied.Pending, []byte("x"))
	wantErr(t, err, ErrAccessDenied)

	late, err := p.StartDevice(ctx, nil, []byte("y"))
	if err != nil {
		t.Fatal(err)
	}
	h.clock.advance(late.Expires.Sub(h.clock.now()) + 1)
	_, err = p.PollDevice(ctx, late.Pending, []byte("y"))
	wantErr(t, err, ErrExpiredToken)
}
