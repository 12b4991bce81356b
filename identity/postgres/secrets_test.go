package postgres_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

func TestSecretIsCreatedOnceAndSharedByEveryNode(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	var mu sync.Mutex
	var got [][]byte
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(ctx, url, postgres.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			b, err := s.Secret(ctx, "cookie", 32)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, b)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(got) != 4 {
		t.Fatalf("%d nodes got the secret", len(got))
	}
	for _, b := range got[1:] {
		if !bytes.Equal(b, got[0]) || len(b) != 32 || bytes.Equal(b, make([]byte, 32)) {
			t.Fatal("nodes got different or empty secrets")
		}
	}
	s := pgtest.NewStore(t)
	if _, err := s.Secret(ctx, "cookie", 32); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Secret(ctx, "cookie", 16); err == nil {
		t.Fatal("a secret of another size was accepted")
	}
}

func TestStoredSecretIsWhatTheLastPutKept(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v, ok, err := a.StoredSecret(ctx, "acme/x"); err != nil || ok || v != nil {
		t.Fatalf("before any put: %q %v %v", v, ok, err)
	}
	for _, want := range []string{"first", "second", ""} {
		if err := a.PutSecret(ctx, "acme/x", []byte(want)); err != nil {
			t.Fatal(err)
		}
		// Another node sees it.
		if v, ok, err := b.StoredSecret(ctx, "acme/x"); err != nil || !ok || string(v) != want {
			t.Fatalf("after putting %q: %q %v %v", want, v, ok, err)
		}
	}
	if err := b.DeleteSecret(ctx, "acme/x"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.StoredSecret(ctx, "acme/x"); err != nil || ok {
		t.Fatalf("after delete: %v %v", ok, err)
	}
	if err := b.DeleteSecret(ctx, "acme/x"); err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
}
