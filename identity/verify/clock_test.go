package verify_test

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
)

// steppingClock returns a later time at every reading: each reading
// advances it by step (or by a random step in [0, 2*step) when random
// is set), as a busy server's clock moves between any two readings.
type steppingClock struct {
	mu     sync.Mutex
	t      time.Time
	step   time.Duration
	random *mrand.Rand
}

// Now returns the clock's time and advances it.
func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	d := c.step
	if c.random != nil {
		d = time.Duration(c.random.Int64N(int64(2 * c.step)))
	}
	c.t = c.t.Add(d)
	return t
}

// Peek returns what the next reading will return, without advancing.
func (c *steppingClock) Peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// keyStore holds OpenPGP keys as the key store would serve them to the
// verifier: by primary fingerprint, canonical after the policy.
type keyStore struct {
	mu   sync.Mutex
	keys map[string][]byte
}

func (s *keyStore) put(t testing.TB, b []byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string][]byte{}
	}
	s.keys[string(applied.Fingerprint())] = applied.Bytes()
	return applied.Fingerprint()
}

// FindKeys answers a query by primary fingerprint (Fingerprint, or the
// first of Fingerprints).
func (s *keyStore) FindKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fp := q.Fingerprint
	if len(fp) == 0 && len(q.Fingerprints) > 0 {
		fp = q.Fingerprints[0]
	}
	b, ok := s.keys[string(fp)]
	if !ok {
		return nil, false, nil
	}
	return []keys.Stored{{Fingerprint: bytes.Clone(fp), Packets: bytes.Clone(b)}}, false, nil
}

// testKey is an OpenPGP key with its private parts, to sign statements
// and to add subkeys to.
type testKey struct {
	e   *openpgp.Entity
	cfg *packet.Config
}

// newTestKey makes an Ed25519 key created at created, with the user IDs
// "Name i <name-i@example.org>".
func newTestKey(t testing.TB, name string, uids int, created time.Time) *testKey {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return created }}
	e, err := openpgp.NewEntity(name, "", strings.ToLower(name)+"@example.org", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < uids; i++ {
		id := packet.NewUserId(fmt.Sprintf("%s %d", name, i), "", fmt.Sprintf("%s-%d@example.org", strings.ToLower(name), i))
		if err := e.AddUserId(id.Name, "", id.Email, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return &testKey{e: e, cfg: cfg}
}

// addAuthSubkey adds an authentication-only subkey, bound at created,
// that expires at expires (zero: never).
func (k *testKey) addAuthSubkey(t testing.TB, created, expires time.Time) {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return created }}
	if err := k.e.AddSigningSubkey(cfg); err != nil {
		t.Fatal(err)
	}
	sub := &k.e.Subkeys[len(k.e.Subkeys)-1]
	sub.Sig.FlagSign, sub.Sig.FlagAuthenticate, sub.Sig.EmbeddedSignature = false, true, nil
	var life uint32
	if !expires.IsZero() {
		life = uint32(expires.Sub(sub.PublicKey.CreationTime) / time.Second)
	}
	sub.Sig.KeyLifetimeSecs = &life
	if err := sub.Sig.SignKey(sub.PublicKey, k.e.PrivateKey, cfg); err != nil {
		t.Fatal(err)
	}
}

// public returns the transferable public key.
func (k *testKey) public(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := k.e.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sign returns a detached signature of msg by the primary key.
func (k *testKey) sign(t testing.TB, msg []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := openpgp.DetachSign(&b, k.e, bytes.NewReader(msg), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// harness is an identity Service over the in-memory store and the real
// verifier, with a clock that moves at every reading.
type harness struct {
	svc   *identity.Service
	store *inprocess.Store
	keys  *keyStore
	clock *steppingClock
}

func newHarness(t testing.TB, clock *steppingClock) *harness {
	t.Helper()
	h := &harness{store: inprocess.New(), keys: &keyStore{}, clock: clock}
	svc, err := identity.NewService(h.store, &verify.Verifier{Keys: h.keys}, identity.ServiceOptions{Server: "Kith test", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	return h
}

// claim has k's holder take handle with k.
func (h *harness) claim(t testing.TB, handle string, k *testKey) {
	t.Helper()
	fp := h.keys.put(t, k.public(t))
	c, err := h.svc.IssueChallenge(context.Background(), identity.PurposeClaim, handle, identity.PGPFactor(fp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Claim(context.Background(), identity.ClaimRequest{Statement: c.Statement, Proof: identity.Proof{Signature: k.sign(t, c.Statement)}}); err != nil {
		t.Fatal(err)
	}
}

// verifyLog re-verifies the public log, as kith verify-log does, and
// fails the test on any failed record; it returns the verifier.
func (h *harness) verifyLog(t testing.TB) *verify.LogVerifier {
	t.Helper()
	recs, err := h.store.Log(context.Background(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var v verify.LogVerifier
	for i := range recs {
		for _, f := range v.Add(&recs[i]) {
			if !f.Unchecked {
				t.Errorf("record %d (%s, created %s): %s", f.Seq, recs[i].Method, recs[i].Created.Format(time.RFC3339Nano), f.Reason)
			}
		}
	}
	return &v
}

// methods counts the log's records by method.
func (h *harness) methods(t testing.TB) map[identity.Method]int {
	t.Helper()
	recs, err := h.store.Log(context.Background(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := map[identity.Method]int{}
	for _, e := range recs {
		out[e.Method]++
	}
	return out
}

// TestAuthSubkeyExpiringDuringAnUploadLeavesTheLogVerifiable is the
// attack of issue 30: a stranger claims a handle with his own key, then
// uploads it again with an authentication subkey timed to expire while
// the upload's links are recorded. A write that read the clock once to
// derive the links and again to stamp the record would state a link
// created after its own expiry, which verify-log can never re-derive:
// every later run would fail. The clock here moves a second at every
// reading, and the subkey expires half a second after the first reading
// the sync takes.
func TestAuthSubkeyExpiringDuringAnUploadLeavesTheLogVerifiable(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &steppingClock{t: start, step: time.Second}
	h := newHarness(t, clock)
	k := newTestKey(t, "Mallory", 1, start.Add(-time.Hour))
	h.claim(t, "mallory", k)

	expires := clock.Peek().Add(500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	if !expires.After(clock.Peek()) || expires.Sub(clock.Peek()) > time.Second {
		t.Fatalf("the subkey must expire within the second after the sync's first reading")
	}
	k.addAuthSubkey(t, start.Add(-time.Minute), expires)
	fp := h.keys.put(t, k.public(t))
	if err := h.svc.SyncKey(context.Background(), fp); err != nil {
		t.Fatal(err)
	}
	if n := h.methods(t)[identity.MethodPGPAuthSubkey]; n != 1 {
		t.Fatalf("%d auth subkey records, want 1 (the link held at the sync's one reading)", n)
	}
	// Later syncs, after the expiry, revoke the link; the log verifies.
	if err := h.svc.SyncKey(context.Background(), fp); err != nil {
		t.Fatal(err)
	}
	if v := h.verifyLog(t); v.Count() == 0 {
		t.Fatal("no records")
	}
}

// TestStrangersUploadsWithExpiringSubkeysNeverBreakTheLog uploads, again
// and again, keys whose authentication subkeys expire at random instants
// around each write, with a clock that moves a random amount at every
// reading, and checks after each round that the whole log verifies.
func TestStrangersUploadsWithExpiringSubkeysNeverBreakTheLog(t *testing.T) {
	seed := mrand.Uint64()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, 1))
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &steppingClock{t: start, step: 400 * time.Millisecond, random: mrand.New(mrand.NewPCG(seed, 2))}
	h := newHarness(t, clock)
	const strangers, rounds = 4, 6
	keys := make([]*testKey, strangers)
	for i := range keys {
		keys[i] = newTestKey(t, fmt.Sprintf("Stranger%d", i), 1+rng.IntN(3), start.Add(-time.Hour))
		h.claim(t, fmt.Sprintf("stranger%d", i), keys[i])
	}
	for round := range rounds {
		for i, k := range keys {
			// Expire somewhere within a second or two either side of
			// the next reading, at whole seconds as OpenPGP states them.
			next := clock.Peek()
			expires := next.Add(time.Duration(rng.Int64N(int64(4*time.Second))) - 2*time.Second).Truncate(time.Second)
			if !expires.After(start.Add(-time.Minute)) {
				expires = start
			}
			k.addAuthSubkey(t, start.Add(-time.Minute), expires)
			fp := h.keys.put(t, k.public(t))
			if err := h.svc.SyncKey(context.Background(), fp); err != nil {
				t.Fatalf("round %d, stranger %d: %v", round, i, err)
			}
		}
		h.verifyLog(t)
		if t.Failed() {
			t.Fatalf("round %d: the log no longer verifies (seed %d)", round, seed)
		}
	}
	m := h.methods(t)
	if m[identity.MethodPGPAuthSubkey] == 0 || m[identity.MethodRevocation] == 0 {
		t.Errorf("records %v: want auth subkey links and their revocations", m)
	}
}

// TestKeyLinksHoldNothingPersonalInPublic claims a handle with a key
// that carries user IDs and an auth subkey: the public log names none of
// its user IDs or addresses, the auth subkey's link still verifies from
// its public packets, and the user IDs' links verify once their owner's
// artifacts are revealed.
func TestKeyLinksHoldNothingPersonalInPublic(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &steppingClock{t: start, step: time.Millisecond}
	h := newHarness(t, clock)
	k := newTestKey(t, "Erin", 3, start.Add(-time.Hour))
	k.addAuthSubkey(t, start.Add(-time.Minute), time.Time{})
	h.claim(t, "erin", k)

	ctx := context.Background()
	recs, err := h.store.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range recs {
		for _, personal := range []string{"Erin", "erin@", "erin-1@", "example.org"} {
			if bytes.Contains(e.CanonicalBytes(), []byte(personal)) {
				t.Errorf("public record %d (%s) holds %q", e.Seq, e.Method, personal)
			}
		}
	}
	v := h.verifyLog(t)
	if v.Unchecked() != 3 {
		t.Errorf("%d public records unchecked, want the 3 user ID links", v.Unchecked())
	}
	arts, err := h.svc.IdentityArtifacts(ctx, "erin")
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[int64][]identity.Artifact{}
	for _, a := range arts {
		bySeq[a.Seq] = a.Artifacts
	}
	var full verify.LogVerifier
	for i := range recs {
		if a := bySeq[recs[i].Seq]; len(a) > 0 {
			if err := recs[i].Reveal(a); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range full.Add(&recs[i]) {
			t.Errorf("with the artifacts, record %d: %s", f.Seq, f.Reason)
		}
	}
	// A forged public part (the whole key passed off as it) fails.
	forged := recs[len(recs)-1]
	if forged.Method != identity.MethodPGPUIDSelfSig {
		t.Fatalf("last record %s", forged.Method)
	}
	whole, _ := forged.Artifact(identity.ArtifactPGPKey)
	forged.SignerKey = whole
	if err := verify.Record(&forged); err == nil {
		t.Error("a record whose public key part is the whole key verifies")
	}
}
