// merge.go: merging an uploaded key into a stored one.

package pgp

import (
	"bytes"
	"fmt"
)

// Merge returns the union of stored's and upload's packets (each component
// keeps the signatures both sides gave it; exact duplicates collapse) with
// the policy applied again, so new user IDs, subkeys, revocations and
// refreshed self-signatures all merge in. The keys must have the same
// primary key (else ErrFingerprintMismatch). Merge is commutative and
// idempotent: Merge(a, b) and Merge(b, a) hold the same packets, and
// Merge(m, a) == m for m = Merge(a, b).
func (p Policy) Merge(stored, upload *Key) (*Key, Report, error) {
	a, err := structure(stored.packets)
	if err != nil {
		return nil, Report{}, fmt.Errorf("pgp: merge: stored key: %w", err)
	}
	b, err := structure(upload.packets)
	if err != nil {
		return nil, Report{}, fmt.Errorf("pgp: merge: uploaded key: %w", err)
	}
	if !bytes.Equal(a.primary.Body, b.primary.Body) {
		return nil, Report{}, fmt.Errorf("pgp: merge: %X and %X: %w", stored.Fingerprint(), upload.Fingerprint(), ErrFingerprintMismatch)
	}
	u := &structured{primary: a.primary, stray: a.stray}
	u.stray.Add(b.stray)
	u.direct = append(append(make([]Packet, 0, len(a.direct)+len(b.direct)), a.direct...), b.direct...)
	u.comps = append(append(make([]*component, 0, len(a.comps)+len(b.comps)), a.comps...), b.comps...)
	return p.apply(u)
}
