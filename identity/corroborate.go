// corroborate.go: emails that two independent sources vouch for. An email
// in a self-signed user ID of a key proven for an identity is only a claim
// by the key's holder; when a provider of an account proven for the same
// identity verified the same email (an oidc.email-verified record), the
// claim is corroborated. This is computed from the records when asked and
// never stored: the email's assurance stays "claimed", and only a followed
// mail link (email.verified) makes a key answer for an address. The pages
// show corroborated emails; HKP v2 gives them a partial confidence.

package identity

import (
	"context"
	"fmt"
)

// ProviderVerifiedEmails returns the emails that oidc.email-verified
// records of accounts proven now for a's identity assert, each with the
// accounts.
func ProviderVerifiedEmails(a *Assessment, recs []Evidence) map[string][]Factor {
	out := map[string][]Factor{}
	for _, e := range recs {
		if e.Method != MethodOIDCEmailVerified || e.Handle != a.Handle || e.To.Kind != KindEmail {
			continue
		}
		if !a.Proven(e.From) {
			continue
		}
		out[e.To.Value] = append(out[e.To.Value], e.From)
	}
	return out
}

// CorroboratedEmails returns the email statuses of a that a linked
// OpenPGP key claims (a self-signed user ID of a key proven for the
// identity) and that a provider verified for the same identity. Each
// status's Parent is the key.
func CorroboratedEmails(a *Assessment, recs []Evidence) []FactorStatus {
	verified := ProviderVerifiedEmails(a, recs)
	var out []FactorStatus
	for _, st := range a.Of(KindEmail, LevelClaimed) {
		if st.Parent.Kind != KindPGP || !a.Proven(st.Parent) {
			continue
		}
		if len(verified[st.Factor.Value]) > 0 {
			out = append(out, st)
		}
	}
	return out
}

// CorroboratedKeyEmails returns the addresses of the OpenPGP key's user
// IDs that a provider verified for the identity the key is proven for
// (CorroboratedEmails), now; none when no identity has proven the key.
func (s *Service) CorroboratedKeyEmails(ctx context.Context, key Factor) ([]string, error) {
	h, err := s.WhoProves(ctx, key)
	if CodeOf(err) == CodeNotLinked {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("identity: corroborated emails of %s: %w", key, err)
	}
	_, a, recs, err := s.Lookup(ctx, string(h))
	if CodeOf(err) != "" {
		// The identity went away since WhoProves.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("identity: corroborated emails of %s: %w", key, err)
	}
	var out []string
	for _, st := range CorroboratedEmails(a, recs) {
		if st.Parent.Same(key) {
			out = append(out, st.Factor.Value)
		}
	}
	return out, nil
}
