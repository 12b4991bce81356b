package oidc

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// outage is a transport that fails every request while down is set, as if
// the provider were unreachable.
type outage struct {
	down atomic.Bool
	rt   http.RoundTripper
}

func (o *outage) RoundTrip(r *http.Request) (*http.Response, error) {
	if o.down.Load() {
		return nil, errors.New("connection refused (simulated outage)")
	}
	return o.rt.RoundTrip(r)
}

func TestProviderDownAtStartIsDiscoveredLater(t *testing.T) {
	h := defaultHarness(t)
	net := &outage{rt: h.op.Transport()}
	net.down.Store(true)
	opts := h.options()
	opts.RequireDiscovery = false
	opts.HTTPClient = &http.Client{Transport: net}
	cfg := ProviderConfig{Name: clientID, ClientID: clientID}
	h.fill(&cfg)
	p, err := NewProvider(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("a provider down at start stopped NewProvider: %v", err)
	}
	wantErr(t, p.Ready(t.Context()), ErrProviderUnavailable)
	w := newRecorder()
	wantErr(t, p.Begin(w, httpRequest(h.rp.URL+"/login/kith"), "/"), ErrProviderUnavailable)
	if len(w.Result().Cookies()) != 0 || w.Code != http.StatusOK {
		t.Errorf("a failed Begin wrote a response: %d %v", w.Code, w.Result().Cookies())
	}

	// Back up, but within the retry interval: not tried again yet.
	net.down.Store(false)
	wantErr(t, p.Ready(t.Context()), ErrProviderUnavailable)
	h.clock.advance(DefaultRetryInterval + time.Second)
	if err := p.Ready(t.Context()); err != nil {
		t.Fatalf("after the retry interval: %v", err)
	}

	// And logins work through it.
	h.providers.byName[clientID] = p
	if _, err := h.login(h.browser(), clientID, "/", alice); err != nil {
		t.Fatalf("login after recovery: %v", err)
	}
}
