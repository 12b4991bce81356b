package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

func sshFactor(i int) identity.Factor {
	return identity.SSHFactor(fmt.Sprintf("SHA256:%043d", i), []byte(fmt.Sprintf("blob %d", i)))
}

// TestConcurrentAppendsKeepOneChain appends from many goroutines (each its
// own connection, as many nodes would) and checks that the log is one
// gapless chain.
func TestConcurrentAppendsKeepOneChain(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	const writers, each = 16, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := identity.Handle(fmt.Sprintf("user%d", w))
			err := s.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
				if _, err := tx.CreateIdentity(ctx, h, time.Now()); err != nil {
					return err
				}
				for i := range each {
					e := &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeClaim,
						Handle: h, From: sshFactor(w*100 + i), Statement: []byte("s"), Signature: []byte("g"), Created: time.Now()}
					if err := tx.Append(ctx, e); err != nil {
						return err
					}
				}
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*each {
		t.Fatalf("%d records, want %d", len(recs), writers*each)
	}
	var prev []byte
	for i := range recs {
		if err := identity.CheckLink(&recs[i], int64(i), prev); err != nil {
			t.Fatal(err)
		}
		prev = recs[i].Hash
	}
}

func TestChallengeIsAnsweredOnceAndNotLate(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	now := time.Now()
	c, err := identity.NewChallenge("Kith", identity.PurposeClaim, "alice", sshFactor(1), make([]byte, 32), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChallenge(ctx, c); err != nil {
		t.Fatal(err)
	}
	consume := func(at time.Time, commit bool) error {
		return s.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
			if _, err := tx.ConsumeChallenge(ctx, c.Nonce, at); err != nil {
				return err
			}
			if !commit {
				return errors.New("roll back")
			}
			return nil
		})
	}
	if err := consume(now.Add(11*time.Minute), true); !errors.Is(err, identity.ErrChallengeExpired) {
		t.Fatalf("late answer: %v", err)
	}
	if err := consume(now, false); err == nil || errors.Is(err, identity.ErrNonceUsed) {
		t.Fatalf("rolled-back answer: %v", err)
	}
	if err := consume(now, true); err != nil {
		t.Fatalf("first answer after a rollback: %v", err)
	}
	if err := consume(now, true); !errors.Is(err, identity.ErrNonceUsed) {
		t.Fatalf("second answer: %v", err)
	}
	if err := s.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		_, err := tx.ConsumeChallenge(ctx, []byte("nope"), now)
		return err
	}); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("unknown nonce: %v", err)
	}
}

func TestIdentityRecordsIncludeLinksTheKeyCarries(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	key := identity.Factor{Kind: identity.KindPGP, Value: "AB"}
	sub := sshFactor(9)
	err := s.Update(ctx, func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.CreateIdentity(ctx, "alice", time.Now()); err != nil {
			return err
		}
		if _, err := tx.CreateIdentity(ctx, "alice", time.Now()); !errors.Is(err, identity.ErrHandleTaken) {
			return fmt.Errorf("second create: %v", err)
		}
		for _, e := range []*identity.Evidence{
			{Method: identity.MethodPGPAuthSubkeySigned, From: key, To: sub, Created: time.Now()},
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeClaim, Handle: "alice", From: key, Created: time.Now()},
		} {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := s.IdentityRecords(ctx, "alice")
	if err != nil || len(recs) != 2 {
		t.Fatalf("records %v, %v", recs, err)
	}
	if !identity.Assess("alice", recs, time.Now()).Proven(sub) {
		t.Fatal("the auth subkey of a proven key is not proven")
	}
	hs, err := s.FactorHandles(ctx, sub)
	if err != nil || len(hs) != 1 || hs[0] != "alice" {
		t.Fatalf("handles of the subkey: %v, %v", hs, err)
	}
	if _, _, err := s.IdentityRecords(ctx, "bob"); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("unknown identity: %v", err)
	}
}
