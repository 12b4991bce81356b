// justify.go: whether a handful of records, each already re-verified and
// proven in the log, lead from a served key to the identity it is served
// for: what a client checks of an answer's proof bundle, without the
// rest of the log.

package verify

import (
	"fmt"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// Justifies checks that recs prove the factor f for the identity h at
// time now by the assurance rules (identity.Assess), read from these
// records alone: a factor is proven by its own challenge claiming h; by
// its possession challenge (purpose add) for h after an authorisation of
// it for h (purpose add) signed by a factor proven before that; an SSH
// key by an authentication subkey binding of a proven OpenPGP key that
// embeds the SSH key's own signature, or by any such binding and the SSH
// key's possession challenge for h; an address by a mail verification of
// it for a proven OpenPGP key. Revocations, withdrawals and expired
// records prove nothing, nor does a possession record alone, an
// authorisation alone, a binding the SSH key did not sign, or a user
// ID's claim of an address. The caller re-verifies each record (Record)
// and proves it in the log first.
//
// It shows that the log holds records linking f to h; not that f is
// still linked: a later revocation is not among recs, and only the whole
// log (or a monitor of it) shows one.
func Justifies(h identity.Handle, f identity.Factor, recs []*identity.Evidence, now time.Time) error {
	var live []*identity.Evidence
	for _, e := range recs {
		if e.Method == identity.MethodRevocation || e.Purpose == identity.PurposeRevoke ||
			!e.Expires.IsZero() && !e.Expires.After(now) {
			continue
		}
		live = append(live, e)
	}
	// since: the Seq of the record from which on a factor is proven.
	since := map[string]int64{}
	provenAt := func(g identity.Factor) (int64, bool) {
		s, ok := since[key(g)]
		return s, ok
	}
	for grew := true; grew; {
		grew = false
		prove := func(g identity.Factor, seq int64) {
			if s, ok := since[key(g)]; !ok || seq < s {
				since[key(g)], grew = seq, true
			}
		}
		for _, e := range live {
			own := e.Handle == h && e.Method.IsChallenge() && e.To.IsZero()
			switch {
			case own && e.Purpose == identity.PurposeClaim:
				prove(e.From, e.Seq)
			case own && e.Purpose == identity.PurposeAdd:
				for _, a := range live {
					switch {
					case a.Handle == h && a.Method.IsChallenge() && a.Purpose == identity.PurposeAdd &&
						!a.To.IsZero() && a.To.Same(e.From) && a.Seq < e.Seq:
						if s, ok := provenAt(a.From); ok && s < a.Seq {
							prove(e.From, e.Seq)
						}
					case a.Handle == "" && authSubkey(a.Method) && e.From.Kind == identity.KindSSH && a.To.Same(e.From):
						if s, ok := provenAt(a.From); ok {
							prove(e.From, max(s, a.Seq, e.Seq))
						}
					}
				}
			case e.Handle == "" && e.Method == identity.MethodPGPAuthSubkeySigned && e.To.Kind == identity.KindSSH,
				e.Handle == "" && e.Method == identity.MethodEmailVerified && e.Purpose == "" && e.To.Kind == identity.KindEmail:
				if s, ok := provenAt(e.From); ok {
					prove(e.To, max(s, e.Seq))
				}
			}
		}
	}
	if _, ok := provenAt(f); ok {
		return nil
	}
	return fmt.Errorf("verify: no record links %s to %s", f, h)
}

// authSubkey reports whether m binds an SSH key as an OpenPGP key's
// authentication subkey.
func authSubkey(m identity.Method) bool {
	return m == identity.MethodPGPAuthSubkey || m == identity.MethodPGPAuthSubkeySigned
}

func key(f identity.Factor) string { return string(f.Kind) + " " + f.Value }
