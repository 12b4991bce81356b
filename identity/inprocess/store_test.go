package inprocess_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
)

var (
	ctx  = context.Background()
	now  = time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	key  = identity.Factor{Kind: identity.KindPGP, Value: "AB"}
	ssh1 = identity.Factor{Kind: identity.KindSSH, Value: "s1", Data: []byte("blob1")}
)

func TestUpdateWritesNothingOnError(t *testing.T) {
	st := inprocess.New()
	c := &identity.Challenge{Purpose: identity.PurposeClaim, Handle: "alice", Nonce: []byte("nonce-0123456789"),
		Statement: []byte("s"), Issued: now, Expires: now.Add(time.Minute)}
	if err := st.SaveChallenge(ctx, c); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	err := st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.ConsumeChallenge(ctx, c.Nonce, now); err != nil {
			return err
		}
		if _, err := tx.CreateIdentity(ctx, "alice", now); err != nil {
			return err
		}
		if err := tx.Append(ctx, &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim,
			Handle: "alice", From: ssh1, Created: now}); err != nil {
			return err
		}
		// The transaction reads its own writes.
		if _, recs, err := tx.IdentityRecords(ctx, "alice"); err != nil || len(recs) != 1 {
			t.Errorf("in the transaction: %d records, %v", len(recs), err)
		}
		if hs, _ := tx.FactorHandles(ctx, ssh1); len(hs) != 1 {
			t.Errorf("in the transaction: handles %v", hs)
		}
		return refused
	})
	if err != refused {
		t.Fatalf("update: %v", err)
	}
	if _, _, err := st.IdentityRecords(ctx, "alice"); !errors.Is(err, identity.ErrNotFound) {
		t.Errorf("identity after a failed update: %v", err)
	}
	if recs, _ := st.Log(ctx, 0, 10); len(recs) != 0 {
		t.Errorf("log after a failed update: %d records", len(recs))
	}
	err = st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		_, err := tx.ConsumeChallenge(ctx, c.Nonce, now)
		return err
	})
	if err != nil {
		t.Errorf("the challenge was used up by a failed update: %v", err)
	}
	err = st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		_, err := tx.ConsumeChallenge(ctx, c.Nonce, now)
		return err
	})
	if !errors.Is(err, identity.ErrNonceUsed) {
		t.Errorf("answering twice: %v", err)
	}
}

func TestReadsFollowPostgres(t *testing.T) {
	st := inprocess.New()
	ssh2 := identity.Factor{Kind: identity.KindSSH, Value: "s2", Data: []byte("blob2")}
	err := st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		id, err := tx.CreateIdentity(ctx, "alice", now)
		if err != nil {
			return err
		}
		if !id.Created.Equal(identity.TruncateTime(now)) || id.ID == 0 {
			t.Errorf("created %+v", id)
		}
		if _, err := tx.CreateIdentity(ctx, "alice", now); !errors.Is(err, identity.ErrHandleTaken) {
			t.Errorf("second create: %v", err)
		}
		if _, err := tx.CreateIdentity(ctx, "bob", now); err != nil {
			return err
		}
		for _, e := range []*identity.Evidence{
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeClaim, Handle: "alice", From: key, Statement: []byte("st"), Signature: []byte("sig"), SignerKey: []byte("k")},
			{Method: identity.MethodPGPAuthSubkey, From: key, To: ssh1, Statement: []byte("sub")},
			// Another blob for a known factor: the first one stays.
			{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim, Handle: "bob", From: identity.Factor{Kind: identity.KindSSH, Value: "s1", Data: []byte("other")}},
			{Method: identity.MethodPGPAuthSubkey, From: identity.Factor{Kind: identity.KindPGP, Value: "CD"}, To: ssh2},
			{Method: identity.MethodRevocation, From: key, To: ssh1, Revokes: 2},
		} {
			e.Created = now
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return tx.Append(ctx, &identity.Evidence{Method: identity.MethodSSHChallenge, Handle: "nobody", From: ssh1})
	})
	if err == nil {
		t.Fatal("appended a record for no identity")
	}
	// Same writes, without the bad record.
	err = st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		tx.CreateIdentity(ctx, "alice", now)
		tx.CreateIdentity(ctx, "bob", now)
		for _, e := range []*identity.Evidence{
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeClaim, Handle: "alice", From: key, Statement: []byte("st"), Signature: []byte("sig"), SignerKey: []byte("k")},
			{Method: identity.MethodPGPAuthSubkey, From: key, To: ssh1, Statement: []byte("sub")},
			{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim, Handle: "bob", From: identity.Factor{Kind: identity.KindSSH, Value: "s1", Data: []byte("other")}},
			{Method: identity.MethodPGPAuthSubkey, From: identity.Factor{Kind: identity.KindPGP, Value: "CD"}, To: ssh2},
			{Method: identity.MethodRevocation, From: key, To: ssh1, Revokes: 2},
		} {
			e.Created = now
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := st.Log(ctx, 0, 100)
	if len(log) != 5 {
		t.Fatalf("log: %d records", len(log))
	}
	var prev []byte
	for i := range log {
		if err := identity.CheckLink(&log[i], int64(i), prev); err != nil {
			t.Fatal(err)
		}
		prev = log[i].Hash
	}
	if string(log[2].From.Data) != "blob1" {
		t.Errorf("bob's record has data %q, want the factor's first, blob1", log[2].From.Data)
	}
	if string(log[0].Signature) != "sig" {
		t.Errorf("Log left out the signature")
	}
	if page, _ := st.Log(ctx, 3, 1); len(page) != 1 || page[0].Seq != 4 {
		t.Errorf("Log(3, 1): %v", page)
	}
	_, recs, err := st.IdentityRecords(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range recs {
		seqs = append(seqs, r.Seq)
		if r.Statement != nil || r.Signature != nil || r.SignerKey != nil {
			t.Errorf("record %d with artifacts", r.Seq)
		}
	}
	if want := []int64{1, 2, 5}; !slices.Equal(seqs, want) {
		t.Errorf("alice's records %v, want %v (hers and her key's)", seqs, want)
	}
	hs, _ := st.FactorHandles(ctx, ssh1)
	if len(hs) != 2 || hs[0] != "alice" || hs[1] != "bob" {
		t.Errorf("handles of s1: %v, want alice (through her key) and bob", hs)
	}
	if hs, _ := st.FactorHandles(ctx, ssh2); len(hs) != 0 {
		t.Errorf("handles of s2: %v, want none (no identity names CD)", hs)
	}
	kr, _ := st.KeyRecords(ctx, key)
	if len(kr) != 2 || kr[0].Seq != 2 || kr[1].Seq != 5 {
		t.Errorf("key records %v", kr)
	}
	lk, _ := st.LinkedKeys(ctx, nil)
	if len(lk) != 1 || lk[0].Value != "AB" {
		t.Errorf("linked keys %v", lk)
	}
}

func TestConcurrentUpdatesChain(t *testing.T) {
	st := inprocess.New()
	if err := st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		_, err := tx.CreateIdentity(ctx, "alice", now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
				for range 5 {
					if err := tx.Append(ctx, &identity.Evidence{Method: identity.MethodSSHChallenge, Handle: "alice", From: ssh1, Created: now}); err != nil {
						return err
					}
				}
				if i%2 == 1 {
					return errors.New("refused")
				}
				return nil
			})
			if err != nil && err.Error() != "refused" {
				t.Error(err)
			}
			st.IdentityRecords(ctx, "alice")
		}()
	}
	wg.Wait()
	log, _ := st.Log(ctx, 0, 1000)
	if len(log) != 50 {
		t.Errorf("%d records, want 50", len(log))
	}
	var prev []byte
	for i := range log {
		if err := identity.CheckLink(&log[i], int64(i), prev); err != nil {
			t.Fatal(err)
		}
		prev = log[i].Hash
	}
}
