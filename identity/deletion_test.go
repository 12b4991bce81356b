package identity_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
)

// recordingBlocklist keeps the blocks it is given.
type recordingBlocklist struct {
	mu     sync.Mutex
	blocks []identity.Block
}

func (r *recordingBlocklist) AddBlock(ctx context.Context, b identity.Block) (identity.BlockOutcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.blocks {
		if string(have.Fingerprint) == string(b.Fingerprint) {
			return "", identity.ErrAlreadyBlocked
		}
	}
	r.blocks = append(r.blocks, b)
	return identity.BlockKeyTombstoned, nil
}

func TestDeleteKeyNeedsTheKeysOwnSignatureOnce(t *testing.T) {
	ctx := context.Background()
	v := inprocess.NewVerifier()
	fp := strings.Repeat("AB", 20)
	other := strings.Repeat("CD", 20)
	v.SetPGPKey(fp, []byte("key"), nil)
	v.SetPGPKey(other, []byte("other"), nil)
	bl := &recordingBlocklist{}
	svc, err := identity.NewService(inprocess.New(), v, identity.ServiceOptions{Server: "Kith test", Blocklist: bl})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := identity.ParsePGPFingerprint(fp)
	c, err := svc.IssueKeyDeletion(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	// Another key's signature: refused, the nonce stays usable.
	if _, _, err := svc.DeleteKey(ctx, c.Statement, inprocess.SignPGP(other, c.Statement)); identity.CodeOf(err) != identity.CodeWrongKey {
		t.Fatalf("deletion signed by another key: %v", err)
	}
	if len(bl.blocks) != 0 {
		t.Fatal("a refused deletion blocked the key")
	}
	got, out, err := svc.DeleteKey(ctx, c.Statement, inprocess.SignPGP(fp, c.Statement))
	if err != nil || !got.Same(f) || out != identity.BlockKeyTombstoned {
		t.Fatalf("deletion: %v %q %v", got, out, err)
	}
	if len(bl.blocks) != 1 || !bl.blocks[0].KeepRevocations || bl.blocks[0].Origin != identity.BlockByOwner {
		t.Fatalf("blocks: %+v", bl.blocks)
	}
	if _, _, err := svc.DeleteKey(ctx, c.Statement, inprocess.SignPGP(fp, c.Statement)); identity.CodeOf(err) != identity.CodeNonceUsed {
		t.Fatalf("replayed deletion: %v", err)
	}
	// A link statement is not a deletion.
	link, err := svc.IssueChallenge(ctx, identity.PurposeClaim, "alice", f)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.DeleteKey(ctx, link.Statement, inprocess.SignPGP(fp, link.Statement)); identity.CodeOf(err) != identity.CodeWrongPurpose {
		t.Fatalf("a claim statement as a deletion: %v", err)
	}
	// Without a blocklist the server deletes nothing.
	plain, _ := identity.NewService(inprocess.New(), v, identity.ServiceOptions{Server: "Kith test"})
	if _, err := plain.IssueKeyDeletion(ctx, f); identity.CodeOf(err) != identity.CodeUnsupported {
		t.Fatalf("deletion without a blocklist: %v", err)
	}
}
