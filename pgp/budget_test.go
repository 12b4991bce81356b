package pgp

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// workOf applies p to k with a shared budget too large to run out, and
// returns the outcome and the verification work it cost.
func workOf(p Policy, k *Key) (out *Key, rep Report, work int64, err error) {
	const plenty = 1 << 40
	p.Budget = NewVerifyBudget(plenty)
	out, rep, err = p.Apply(k)
	return out, rep, plenty - p.Budget.Left(), err
}

func TestSignatureBombsAreRefusedWithinTheBudget(t *testing.T) {
	rsa16384 := rsaWork(16384, 65537)
	for _, tc := range []struct {
		name     string
		bomb     keygen.Bomb
		wantErr  error
		bad      int // DropBadSelfSignature
		budget   int // DropVerificationBudget
		maxWork  int64
		unbound  DropReason
		dropComp int
	}{
		{name: "exponent 2^24-1", bomb: keygen.Bomb{}, wantErr: ErrUnsupportedKey},
		{name: "exponent 2^17+1", bomb: keygen.Bomb{Exponent: 1<<17 + 1, SigsPerUserID: 10}, wantErr: ErrUnsupportedKey},
		{name: "one user ID", bomb: keygen.Bomb{Exponent: 65537},
			wantErr: ErrVerifyBudget, bad: 8, budget: 990 - 8, maxWork: 8 * rsa16384, unbound: DropUnboundUserID, dropComp: 1},
		{name: "many user IDs", bomb: keygen.Bomb{Exponent: 65537, UserIDs: 50, SigsPerUserID: 19},
			wantErr: ErrVerifyBudget, bad: DefaultMaxVerifyWork / int(rsa16384), budget: 50*19 - DefaultMaxVerifyWork/int(rsa16384),
			maxWork: DefaultMaxVerifyWork, unbound: DropUnboundUserID, dropComp: 50},
		{name: "many subkeys", bomb: keygen.Bomb{Exponent: 65537, Subkeys: 45, SigsPerSubkey: 20},
			wantErr: ErrVerifyBudget, bad: DefaultMaxVerifyWork / int(rsa16384), budget: 45*20 - DefaultMaxVerifyWork/int(rsa16384),
			maxWork: DefaultMaxVerifyWork, unbound: DropUnboundSubkey, dropComp: 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := buildBomb(t, tc.bomb)
			_, rep, work, err := workOf(Policy{}, k)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if work > tc.maxWork {
				t.Errorf("spent %d units of work, at most %d expected", work, tc.maxWork)
			}
			if tc.wantErr == ErrUnsupportedKey {
				if work != 0 {
					t.Errorf("spent %d units on a key refused for its exponent", work)
				}
				return
			}
			if !errors.Is(err, ErrNoSelfSignature) || RejectionReason(err) != ErrVerifyBudget.Error() {
				t.Errorf("err = %v (reason %q): want no self-signature, for want of budget", err, RejectionReason(err))
			}
			if got := rep.Count(DropBadSelfSignature); got != tc.bad {
				t.Errorf("%d bad self-signatures, want %d (%v)", got, tc.bad, rep)
			}
			if got := rep.Count(DropVerificationBudget); got != tc.budget {
				t.Errorf("%d left unchecked, want %d (%v)", got, tc.budget, rep)
			}
			if got := rep.Count(tc.unbound); got != tc.dropComp {
				t.Errorf("%v: %d, want %d (%v)", tc.unbound, got, tc.dropComp, rep)
			}
		})
	}
}

// forgedSelfSigs returns n self-certifications of uid on e's key, made by
// e after at, with their signature values damaged: they claim e as
// issuer and fail only when checked.
func forgedSelfSigs(t *testing.T, e *openpgp.Entity, uid string, at time.Time, n int) []Packet {
	t.Helper()
	var out []Packet
	for i := 0; i < n; i++ {
		b := certify(t, e, e.PrimaryKey, uid, at.Add(time.Duration(i+1)*time.Hour))
		b[len(b)-3] ^= 0x40
		out = append(out, Packet{Tag: TagSignature, Body: b})
	}
	return out
}

func TestForgedSelfSignaturesCannotDisplaceStoredOnesInMerge(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	uid := "Alice <alice@example.org>"
	stored, _ := mustApply(t, mustParse(t, entityBytes(t, alice)))
	flood := forgedSelfSigs(t, alice, uid, testTime.Add(24*time.Hour), 3*DefaultMaxBadSelfSignatures)
	upload := NewKey(insertAfter(stored.Packets(), isTag(TagUserID), flood...))

	// Alone, the flooded upload's genuine (older) self-signature is left
	// unchecked: the upload is refused, for want of budget.
	if _, _, err := (Policy{}).Apply(upload); !errors.Is(err, ErrVerifyBudget) {
		t.Errorf("flooded upload alone: err = %v, want %v", err, ErrVerifyBudget)
	}
	// Merged into the stored key, the stored self-signature is checked
	// first and the key is unchanged, in either order.
	for _, order := range [][2]*Key{{stored, upload}} {
		merged, rep, err := Policy{}.Merge(order[0], order[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(merged.Bytes(), stored.Bytes()) {
			t.Errorf("merge changed the stored key: user IDs %q (%v)", userIDs(merged), rep)
		}
		if got := rep.Count(DropBadSelfSignature); got != DefaultMaxBadSelfSignatures {
			t.Errorf("%d forged self-signatures checked, want %d (%v)", got, DefaultMaxBadSelfSignatures, rep)
		}
		if got := rep.Count(DropVerificationBudget); got != len(flood)-DefaultMaxBadSelfSignatures {
			t.Errorf("%d left unchecked, want %d (%v)", got, len(flood)-DefaultMaxBadSelfSignatures, rep)
		}
	}
}

func TestSharedBudgetBoundsTheKeysOfOneRequest(t *testing.T) {
	k := mustParse(t, entityBytes(t, genEntity(t, "Alice", "alice@example.org", 1)))
	_, _, work, err := workOf(Policy{}, k)
	if err != nil || work == 0 {
		t.Fatalf("err %v, work %d", err, work)
	}
	// A budget for two such keys lets two through and refuses the third.
	shared := NewVerifyBudget(2 * work)
	p := Policy{Budget: shared}
	for i := 0; i < 2; i++ {
		if _, _, err := p.Apply(k); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if shared.Left() != 0 {
		t.Errorf("%d units left, want 0", shared.Left())
	}
	if _, _, err := p.Apply(k); !errors.Is(err, ErrVerifyBudget) {
		t.Errorf("third key: err = %v, want %v", err, ErrVerifyBudget)
	}
}

func TestBudgetsChangeNothingForGeneratedKeys(t *testing.T) {
	raw, err := keygen.TypicalKeys(400, 31)
	if err != nil {
		t.Fatal(err)
	}
	unbounded := Policy{MaxVerifyWork: 1 << 50, MaxBadSelfSignatures: 1 << 30}
	for i, b := range raw {
		k := mustParse(t, b)
		want, wantRep, wantErr := unbounded.Apply(k)
		got, rep, err := Policy{}.Apply(k)
		if (err == nil) != (wantErr == nil) || rep != wantRep || (err == nil && !bytes.Equal(got.Bytes(), want.Bytes())) {
			t.Errorf("key %d: with budgets %v (%v), without %v (%v)", i, err, rep, wantErr, wantRep)
		}
		if err != nil || rep.Total() != 0 {
			t.Errorf("key %d: %v, dropped %v", i, err, rep)
		}
	}
}

func TestDebianKeysNeedLittleVerifyWork(t *testing.T) {
	var most int64
	var mostFpr []byte
	for _, path := range debianKeyrings {
		b := testkit.File(t, path)
		keys, errs := readAllKeys(t, NewReader(bytes.NewReader(b)))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", path, errs)
		}
		for _, k := range keys {
			_, _, work, err := workOf(Policy{}, k)
			if err != nil {
				t.Errorf("%X: %v", k.Fingerprint(), err)
			}
			if work > most {
				most, mostFpr = work, k.Fingerprint()
			}
		}
	}
	t.Logf("most work for one key: %d units (%X), budget %d", most, mostFpr, DefaultMaxVerifyWork)
	// The budget leaves real keys a wide margin (44,472 units when
	// written, for an RSA-10240 key with 23 user IDs).
	if most == 0 || most > DefaultMaxVerifyWork/4 {
		t.Errorf("the most expensive Debian key needs %d units, more than a quarter of the budget %d", most, DefaultMaxVerifyWork)
	}
}

func TestVerifyWorkPricesRSAByModulusAndExponent(t *testing.T) {
	for _, tc := range []struct {
		bits, e int
		want    int64
	}{
		{2048, 65537, 68}, {4096, 65537, 272}, {16384, 65537, 4352},
		{2048, 3, 8}, {16384, 1<<24 - 1, 46 * 256}, {1024, 17, 5},
	} {
		if got := rsaWork(tc.bits, tc.e); got != tc.want {
			t.Errorf("rsaWork(%d, %d) = %d, want %d", tc.bits, tc.e, got, tc.want)
		}
	}
	// Prices grow with the cost they stand for.
	prices := []int64{rsaWork(2048, 65537), rsaWork(4096, 65537), rsaWork(16384, 65537), rsaWork(16384, 1<<24-1)}
	if !slices.IsSorted(prices) {
		t.Errorf("prices not increasing: %v", prices)
	}
}
