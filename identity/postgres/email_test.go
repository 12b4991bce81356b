package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
)

// TestEmailTokensAreRateLimitedAcrossConnections saves tokens for one
// address from many connections at once, as many nodes would: exactly
// one is stored, and the window ends it.
func TestEmailTokensAreRateLimitedAcrossConnections(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	now := identity.TruncateTime(time.Now())
	key := identity.PGPFactor(make([]byte, 20))
	mail := identity.EmailFactor("alice@example.org")
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.SaveEmailToken(ctx, &identity.EmailToken{Hash: identity.HashEmailToken(string(rune('a' + i))),
				Action: identity.EmailVerify, Key: key, Email: mail, Created: now, Expires: now.Add(time.Hour), Recipient: identity.HashRecipient(mail)}, identity.EmailLimits{Since: now.Add(-identity.EmailWindow)})
		}()
	}
	wg.Wait()
	close(errs)
	saved := 0
	for err := range errs {
		switch {
		case err == nil:
			saved++
		case !errors.Is(err, identity.ErrRateLimited):
			t.Fatal(err)
		}
	}
	if saved != 1 {
		t.Fatalf("%d tokens saved, want 1", saved)
	}
	later := now.Add(identity.EmailWindow + time.Second)
	if err := s.SaveEmailToken(ctx, &identity.EmailToken{Hash: identity.HashEmailToken("later"), Action: identity.EmailVerify,
		Key: key, Email: mail, Created: later, Expires: later.Add(time.Hour), Recipient: identity.HashRecipient(mail)}, identity.EmailLimits{Since: later.Add(-identity.EmailWindow)}); err != nil {
		t.Errorf("after the window: %v", err)
	}
}

// TestRecipientCapHoldsAcrossNodes has two stores on one database (two
// nodes) save links for one address from many fresh keys at once: the
// cap lets exactly PerRecipient through, counts every spelling of the
// address alike, leaves another address alone, gives back a mail that
// could not be sent, forgets mails past its window, and keeps counting
// the mails of links that are gone.
func TestRecipientCapHoldsAcrossNodes(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	var nodes [2]*postgres.Store
	for i := range nodes {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		nodes[i] = s
	}
	now := identity.TruncateTime(time.Now())
	const perRecipient = 3
	save := func(node int, tok, addr string, at time.Time) error {
		key := make([]byte, 20)
		copy(key, tok)
		mail := identity.EmailFactor(addr)
		return nodes[node].SaveEmailToken(ctx, &identity.EmailToken{Hash: identity.HashEmailToken(tok), Action: identity.EmailVerify,
			Key: identity.PGPFactor(key), Email: mail, Created: at, Expires: at.Add(identity.EmailTokenTTL), Recipient: identity.HashRecipient(mail)},
			identity.EmailLimits{Since: at.Add(-identity.EmailWindow), PerRecipient: perRecipient, RecipientSince: at.Add(-identity.RecipientWindow)})
	}
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	spellings := []string{"victim@example.net", "Victim@Example.NET", " VICTIM@example.net "}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- save(i%2, fmt.Sprintf("key-%02d", i), spellings[i%len(spellings)], now)
		}()
	}
	wg.Wait()
	close(errs)
	saved := 0
	for err := range errs {
		switch {
		case err == nil:
			saved++
		case !errors.Is(err, identity.ErrRecipientCapped):
			t.Fatal(err)
		}
	}
	if saved != perRecipient {
		t.Fatalf("%d links saved for one address from %d keys on two nodes, want %d", saved, n, perRecipient)
	}
	if err := save(0, "other-key", "someone@example.net", now); err != nil {
		t.Errorf("another address: %v", err)
	}
	// A mail that could not be sent does not count.
	if err := nodes[1].DeleteEmailToken(ctx, identity.HashEmailToken("other-key")); err != nil {
		t.Fatal(err)
	}
	for i := range perRecipient {
		if err := save(i%2, fmt.Sprintf("other-%d", i), "someone@example.net", now); err != nil {
			t.Errorf("another address, mail %d of %d: %v", i+1, perRecipient, err)
		}
	}
	// Deleting the links (a deleted key's) leaves their mails counted.
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, "DELETE FROM email_tokens"); err != nil {
		t.Fatal(err)
	}
	if err := save(1, "after-delete", "victim@example.net", now.Add(time.Minute)); !errors.Is(err, identity.ErrRecipientCapped) {
		t.Errorf("after the links were deleted: %v, want the cap", err)
	}
	// The table keeps no address, and past the window the mails no
	// longer count and their rows go.
	var rows int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM email_sends WHERE position('example.net' in encode(recipient, 'escape')) > 0").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d rows name the address", rows)
	}
	later := now.Add(identity.RecipientWindow + time.Second)
	if err := save(0, "next-hour", "victim@example.net", later); err != nil {
		t.Errorf("after the window: %v", err)
	}
	if err := db.QueryRow(ctx, "SELECT count(*) FROM email_sends").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d rows after the window, want only the new mail's", rows)
	}
}

// TestVerifiedEmailLookups verifies an address of a real key through the
// Service and checks what the lookups then serve, and after a withdrawal.
func TestVerifiedEmailLookups(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	alice := entityKey(t, newEntity(t, "Alice <alice@example.org>", "Alice <alice@work.example>"))
	mallory := entityKey(t, newEntity(t, "Not Alice <alice@example.org>"))
	if _, err := s.AddKeys(ctx, []*pgp.Key{alice, mallory}); err != nil {
		t.Fatal(err)
	}
	svc, err := identity.NewService(s, &verify.Verifier{Keys: s}, identity.ServiceOptions{Server: "Kith <http://test>"})
	if err != nil {
		t.Fatal(err)
	}
	fp := identity.PGPFactor(alice.Fingerprint())
	var tokens []string
	send := func(ctx context.Context, token string) error { tokens = append(tokens, token); return nil }
	ask := func(action identity.EmailAction, addr string) {
		t.Helper()
		if err := svc.RequestEmail(ctx, identity.EmailRequest{Action: action, Key: fp, Email: identity.EmailFactor(addr), Send: send}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ConfirmEmail(ctx, fp, tokens[len(tokens)-1]); err != nil {
			t.Fatal(err)
		}
	}
	ask(identity.EmailVerify, "alice@example.org")
	keys, err := s.VerifiedKeys(ctx, "Alice@Example.org")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !keys[0].Same(fp) {
		t.Errorf("verified keys: %v, want only %s (not the stranger's key naming the same address)", keys, fp.Value)
	}
	emails, err := s.VerifiedEmails(ctx, fp.Value)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(emails, []string{"alice@example.org"}) {
		t.Errorf("verified emails: %v", emails)
	}
	ask(identity.EmailWithdraw, "alice@example.org")
	if keys, _ := s.VerifiedKeys(ctx, "alice@example.org"); len(keys) != 0 {
		t.Errorf("after the withdrawal: %v", keys)
	}
	// The public records name no address: it, the statement naming it and
	// the whole key are artifacts, unchecked without them.
	recs, err := s.Log(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var public verify.LogVerifier
	for i := range recs {
		if bytes.Contains(recs[i].CanonicalBytes(), []byte("alice@example.org")) || bytes.Contains(recs[i].SignerKey, []byte("Alice")) {
			t.Errorf("public record %d names alice", recs[i].Seq)
		}
		for _, f := range public.Add(&recs[i]) {
			if !f.Unchecked {
				t.Errorf("public record %d: %s", f.Seq, f.Reason)
			}
		}
	}
	if public.Unchecked() != 2 {
		t.Errorf("%d public records unchecked, want 2", public.Unchecked())
	}
	// With the artifacts the key's holder reads, the records verify
	// offline, as kith verify-log --artifacts checks them.
	arts, err := s.KeyArtifacts(ctx, fp)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 2 {
		t.Fatalf("artifacts of %d records, want 2", len(arts))
	}
	var v verify.LogVerifier
	for i := range recs {
		if err := recs[i].Reveal(arts[i].Artifacts); err != nil {
			t.Fatal(err)
		}
		for _, f := range v.Add(&recs[i]) {
			t.Errorf("record %d: %s", f.Seq, f.Reason)
		}
	}
	if v.Count() != 2 || v.Unchecked() != 0 {
		t.Errorf("%d records, %d unchecked, want 2 checked", v.Count(), v.Unchecked())
	}
	// A record that says another address than its statement, or names a
	// key that never carried the address, does not verify.
	forged := recs[0]
	forged.To = identity.EmailFactor("ceo@example.org")
	if err := verify.Record(&forged); err == nil {
		t.Error("a record naming another address than its statement verifies")
	}
	forged = recs[0]
	forged.Statement = identity.EmailStatement("Kith <http://test>", identity.EmailVerify, forged.From, identity.EmailFactor("ceo@example.org"), forged.Created, forged.Created)
	forged.To = identity.EmailFactor("ceo@example.org")
	if err := verify.Record(&forged); err == nil {
		t.Error("a record for an address the key never carried verifies")
	}
}
