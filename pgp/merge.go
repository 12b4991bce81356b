// merge.go: merging an uploaded key into a stored one.

package pgp

import (
	"bytes"
	"fmt"
)

// Merge returns the union of stored's and upload's packets (each component
// keeps the signatures both sides gave it; exact duplicates collapse) with
// the policy applied again, so new user IDs, subkeys, revocations and
// refreshed self-signatures all merge in. Stored's self-signatures are
// checked before upload's, so that forged ones in an upload cannot spend
// the verification budget (MaxBadSelfSignatures, MaxVerifyWork) that
// stored's need. The keys must have the same primary key (else
// ErrFingerprintMismatch). While the budget lets every self-signature be
// checked, Merge is commutative and idempotent: Merge(a, b) and
// Merge(b, a) hold the same packets, and Merge(m, a) == m for
// m = Merge(a, b); when it does not, which side is stored decides what
// is checked. When the budget (the key's, or p.Budget, a request's that
// its other keys spent) runs out before every stored self-signature is
// checked, Merge refuses (ErrVerifyBudget) rather than drop what the
// store holds.
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
	// Marks the stored key's signatures, which are checked first.
	u := &structured{primary: a.primary, stray: a.stray, storedDirect: len(a.direct)}
	for _, c := range a.comps {
		c.stored = len(c.sigs)
	}
	u.stray.Add(b.stray)
	u.direct = append(append(make([]Packet, 0, len(a.direct)+len(b.direct)), a.direct...), b.direct...)
	u.comps = append(append(make([]*component, 0, len(a.comps)+len(b.comps)), a.comps...), b.comps...)
	merged, rep, err := p.apply(u)
	if err == nil && rep.storedUnchecked > 0 {
		// Writing merged would drop what the store holds for want of
		// budget (a request's, spent by its other keys): refuse the
		// upload instead, and the stored key stays as it is.
		return nil, rep, fmt.Errorf("pgp: merge: key %X: %d stored self-signatures left unchecked: %w", stored.Fingerprint(), rep.storedUnchecked, ErrVerifyBudget)
	}
	return merged, rep, err
}
