package verify_test

import (
	"context"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// TestDeletedKeyEndsItsLinksAndKeepsNoUserIDs: a proven key replaced by
// its tombstone (what the store keeps once its owner deletes it: the
// primary key, no self-signature) carries no links, so erasing it ends
// every link it carried instead of failing on the missing self-signature;
// afterwards no record the key signed, its identity's claim included,
// keeps the whole key (user IDs and all) as an artifact, and the log
// still verifies.
func TestDeletedKeyEndsItsLinksAndKeepsNoUserIDs(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, &steppingClock{t: start, step: time.Second})
	k := newTestKey(t, "Dora", 2, start.Add(-time.Hour))
	k.addAuthSubkey(t, start.Add(-time.Hour), time.Time{})
	h.claim(t, "dora", k)
	carried := h.methods(t)[identity.MethodPGPUIDSelfSig] + h.methods(t)[identity.MethodPGPAuthSubkey]
	if carried != 3 {
		t.Fatalf("the key carries %d links on record, want 2 user IDs and 1 auth subkey", carried)
	}

	full, err := pgp.ParseKey(k.public(t))
	if err != nil {
		t.Fatal(err)
	}
	tomb, err := pgp.Policy{}.Tombstone(full)
	if err != nil {
		t.Fatal(err)
	}
	h.keys.mu.Lock()
	h.keys.keys[string(full.Fingerprint())] = tomb.Bytes()
	h.keys.mu.Unlock()
	if n, err := h.svc.EraseKey(ctx, full.Fingerprint()); err != nil || n == 0 {
		t.Fatalf("erasing the deleted key: %d records, %v", n, err)
	}
	if n := h.methods(t)[identity.MethodRevocation]; n != carried {
		t.Errorf("%d revocations after the deletion, want one for each of the %d links", n, carried)
	}
	arts, err := h.svc.IdentityArtifacts(ctx, "dora")
	if err != nil {
		t.Fatal(err)
	}
	for _, ra := range arts {
		for _, a := range ra.Artifacts {
			if a.Kind == identity.ArtifactPGPKey {
				t.Errorf("record %d still keeps the deleted key as an artifact", ra.Seq)
			}
		}
	}
	h.verifyLog(t)
}
