// corroborate.go: emails that two independent sources vouch for. An email
// in a self-signed user ID of a key proven for an identity is only a claim
// by the key's holder; when a provider of an account proven for the same
// identity verified the same email (an oidc.email-verified record), the
// page shows the claim as corroborated. This is computed when shown and
// never stored: the email's assurance stays "claimed".

package web

import "github.com/kith-keyserver/kith/identity"

// verifiedEmails returns the emails that oidc.email-verified records of
// accounts proven now for the identity assert, each with the accounts.
func verifiedEmails(a *identity.Assessment, recs []identity.Evidence) map[string][]identity.Factor {
	out := map[string][]identity.Factor{}
	for _, e := range recs {
		if e.Method != identity.MethodOIDCEmailVerified || e.Handle != a.Handle || e.To.Kind != identity.KindEmail {
			continue
		}
		if !a.Proven(e.From) {
			continue
		}
		out[e.To.Value] = append(out[e.To.Value], e.From)
	}
	return out
}

// corroboratedEmails returns the email statuses of a that a linked
// OpenPGP key claims (a self-signed user ID of a key proven for the
// identity) and that a provider verified for the same identity.
func corroboratedEmails(a *identity.Assessment, recs []identity.Evidence) []identity.FactorStatus {
	verified := verifiedEmails(a, recs)
	var out []identity.FactorStatus
	for _, st := range a.Of(identity.KindEmail, identity.LevelClaimed) {
		if st.Parent.Kind != identity.KindPGP || !a.Proven(st.Parent) {
			continue
		}
		if len(verified[st.Factor.Value]) > 0 {
			out = append(out, st)
		}
	}
	return out
}
