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

// Justifies checks that recs lead from the factor f to the identity h at
// time now: a possession record (a challenge or login) of h signed by f,
// or by a factor that reaches f through records of h authorising it or
// through records a key carries itself (an authentication subkey binding,
// a mail verification), none of them a revocation, a withdrawal or
// expired. The caller re-verifies each record (Record) and proves it in
// the log first.
//
// It shows that the log holds records linking f to h; not that f is
// still linked: a later revocation is not among recs, and only the whole
// log (or a monitor of it) shows one.
func Justifies(h identity.Handle, f identity.Factor, recs []*identity.Evidence, now time.Time) error {
	reach := map[string]bool{key(f): true}
	usable := func(e *identity.Evidence) bool {
		if e.Method == identity.MethodRevocation || e.Purpose == identity.PurposeRevoke {
			return false
		}
		return e.Expires.IsZero() || e.Expires.After(now)
	}
	for grew := true; grew; {
		grew = false
		for _, e := range recs {
			if !usable(e) {
				continue
			}
			switch {
			case e.Handle == h && e.Method.IsChallenge() && e.To.IsZero() && reach[key(e.From)]:
				return nil
			case e.Handle == h && e.Method.IsChallenge() && !e.To.IsZero() && reach[key(e.To)],
				e.Handle == "" && (e.Method.KeyCarried() || e.Method == identity.MethodEmailVerified) && reach[key(e.To)]:
				if !reach[key(e.From)] {
					reach[key(e.From)], grew = true, true
				}
			}
		}
	}
	return fmt.Errorf("verify: no record links %s to %s", f, h)
}

func key(f identity.Factor) string { return string(f.Kind) + " " + f.Value }
