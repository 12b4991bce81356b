package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/session"
)

func newSession(t *testing.T, h identity.Handle, now time.Time) (*session.Session, string) {
	t.Helper()
	token, hash, err := session.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return &session.Session{
		TokenHash: hash, Handle: h,
		Account:  identity.OIDCFactor("https://idp.example", "u-1"),
		Provider: "idp", Login: []byte(`{"x":1}`),
		Created: now, LastSeen: now, Expires: now.Add(time.Hour),
	}, token
}

func createIdentity(t *testing.T, st *postgres.Store, h identity.Handle) {
	t.Helper()
	err := st.Update(t.Context(), func(ctx context.Context, tx identity.Tx) error {
		_, err := tx.CreateIdentity(ctx, h, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSessionsLifecycle(t *testing.T) {
	st := pgtest.NewStore(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	createIdentity(t, st, "alice")

	pending, token := newSession(t, "", now)
	if err := st.CreateSession(ctx, pending); err != nil {
		t.Fatal(err)
	}
	got, err := st.Session(ctx, session.Hash(token), now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Handle != "" || !got.Account.Same(pending.Account) || got.Provider != "idp" || !bytes.Equal(got.Login, pending.Login) || !got.Expires.Equal(pending.Expires) {
		t.Fatalf("pending session read back as %+v", got)
	}
	if err := st.BindSession(ctx, pending.TokenHash, "alice"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Session(ctx, pending.TokenHash, now); got == nil || got.Handle != "alice" {
		t.Fatalf("bound session: %+v", got)
	}
	if err := st.BindSession(ctx, pending.TokenHash, "nobody"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("bind to a missing identity: %v", err)
	}

	second, _ := newSession(t, "alice", now.Add(time.Second))
	if err := st.CreateSession(ctx, second); err != nil {
		t.Fatal(err)
	}
	list, err := st.IdentitySessions(ctx, "alice", now)
	if err != nil || len(list) != 2 || !bytes.Equal(list[0].TokenHash, second.TokenHash) {
		t.Fatalf("IdentitySessions = %d sessions, %v", len(list), err)
	}
	seen := now.Add(time.Minute)
	if err := st.TouchSession(ctx, second.TokenHash, seen); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Session(ctx, second.TokenHash, now); got == nil || !got.LastSeen.Equal(seen) {
		t.Errorf("touched session: %+v", got)
	}

	// Expired sessions are not found, and are swept.
	if _, err := st.Session(ctx, second.TokenHash, second.Expires); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("expired session: %v", err)
	}
	if n, err := st.DeleteIdentitySessions(ctx, "alice"); err != nil || n != 2 {
		t.Errorf("DeleteIdentitySessions = %d, %v", n, err)
	}
	if _, err := st.Session(ctx, second.TokenHash, now); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("session after logout everywhere: %v", err)
	}
	old, _ := newSession(t, "", now.Add(-2*time.Hour))
	if err := st.CreateSession(ctx, old); err != nil {
		t.Fatal(err)
	}
	if n, err := st.DeleteExpiredSessions(ctx, now); err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v", n, err)
	}
	if err := st.DeleteSession(ctx, old.TokenHash); err != nil {
		t.Errorf("deleting a missing session: %v", err)
	}
}

func TestCreateSessionRefusesBadInput(t *testing.T) {
	st := pgtest.NewStore(t)
	now := time.Now()
	for _, tc := range []struct {
		name string
		edit func(*session.Session)
	}{
		{"UnknownIdentity", func(s *session.Session) { s.Handle = "ghost" }},
		{"ShortHash", func(s *session.Session) { s.TokenHash = s.TokenHash[:8] }},
		{"NotAnOIDCAccount", func(s *session.Session) { s.Account = identity.EmailFactor("a@example.org") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSession(t, "", now)
			tc.edit(s)
			if err := st.CreateSession(t.Context(), s); err == nil {
				t.Fatal("stored")
			}
		})
	}
}
