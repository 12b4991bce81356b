package keys_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// TestMergesPayFromTheRequestsBudget is the attack on the request budget
// through the store: one upload request made of partial copies of a
// stored key whose signatures are dear to check. Each copy passes the key
// policy cheaply, differs from the stored key, and makes the store merge
// it, which checks every stored self-signature again. The merges pay from
// the request's budget: once it is spent, the request's later copies are
// refused (pgp.ErrVerifyBudget) and the stored key is unchanged.
func TestMergesPayFromTheRequestsBudget(t *testing.T) {
	ring, err := pgp.ReadKeys(bytes.NewReader(testkit.File(t, testkit.DebianKeyring)))
	if err != nil {
		t.Fatal(err)
	}
	// The key whose merge costs most: the most user IDs on the largest
	// RSA modulus.
	var victim *pgp.Key
	var addrs []string
	most := 0
	for _, k := range ring {
		applied, _, err := pgp.Policy{}.Apply(k)
		if err != nil {
			continue
		}
		d := applied.Describe()
		var as []string
		for _, u := range d.UserIDs {
			if u.Email != "" {
				as = append(as, u.Email)
			}
		}
		if cost := len(as) * d.Bits; len(as) > 1 && cost > most {
			victim, addrs, most = k, as, cost
		}
	}
	if victim == nil {
		t.Fatal("no key with two addresses in the Debian keyring")
	}
	st := inprocess.New(inprocess.Options{})
	svc := keys.NewService(st, keys.Options{})
	ctx := context.Background()
	if _, err := svc.Upload(ctx, victim, keys.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	digests := func() [][16]byte {
		var ds [][16]byte
		if err := st.Digests(ctx, func(d [16]byte) error { ds = append(ds, d); return nil }); err != nil {
			t.Fatal(err)
		}
		return ds
	}
	stored := digests()

	// What one merge of a copy into the stored key checks.
	whole, _, err := pgp.Policy{}.Apply(victim)
	if err != nil {
		t.Fatal(err)
	}
	const plenty = 1 << 40
	b := pgp.NewVerifyBudget(plenty)
	if _, _, err := (pgp.Policy{Budget: b}).Merge(whole, victim.WithUserIDs(func(e string) bool { return e == addrs[0] })); err != nil {
		t.Fatal(err)
	}
	mergeWork := plenty - b.Left()

	a, ok := svc.Admit(ctx)
	if !ok {
		t.Fatal("no upload slot")
	}
	defer a.Done()
	merged, refused := 0, false
	for round := 0; round < 1000 && !refused; round++ {
		for _, addr := range addrs {
			copyOf := victim.WithUserIDs(func(e string) bool { return e == addr })
			_, err := svc.Upload(ctx, copyOf, keys.UploadOptions{Admission: a})
			var rej *keys.Rejection
			switch {
			case errors.As(err, &rej) && errors.Is(err, pgp.ErrVerifyBudget):
				refused = true
			case err != nil:
				t.Fatalf("copy for %s: %v", addr, err)
			default:
				merged++
			}
			if refused {
				break
			}
		}
	}
	if !refused {
		t.Fatal("the request's budget never ran out")
	}
	// Each merged copy checked the stored key's signatures again: no
	// more of them fit than the request's budget pays for.
	if most := pgp.DefaultMaxUploadVerifyWork/mergeWork + 1; int64(merged) > most {
		t.Errorf("%d copies of %X merged in one request, each checking %d units of the stored key's signatures: at most %d fit in its budget of %d",
			merged, victim.Fingerprint(), mergeWork, most, pgp.DefaultMaxUploadVerifyWork)
	}
	if got := digests(); len(got) != 1 || got[0] != stored[0] {
		t.Error("the stored key changed under a request whose budget was spent")
	}
}
