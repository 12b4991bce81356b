package api

import (
	"net/http"
	"testing"

	"github.com/kith-keyserver/kith/identity"
)

// TestLimitRefusalsAreTooManyRequests: a refusal because a limit was
// reached (a client's, an identity's certificates, an address's mails)
// answers 429, so clients know to wait rather than change the request.
func TestLimitRefusalsAreTooManyRequests(t *testing.T) {
	for _, c := range []identity.Code{identity.CodeRateLimited, identity.CodeRecipientCapped} {
		if got := statusOf(c); got != http.StatusTooManyRequests {
			t.Errorf("%s: %d, want 429", c, got)
		}
	}
}
