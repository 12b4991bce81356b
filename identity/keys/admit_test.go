package keys_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

func TestAdmitCapsUploadRequestsInProgress(t *testing.T) {
	svc := keys.NewService(inprocess.New(inprocess.Options{}), keys.Options{MaxConcurrentUploads: 2})
	ctx := t.Context()
	a, ok1 := svc.Admit(ctx)
	b, ok2 := svc.Admit(ctx)
	if !ok1 || !ok2 {
		t.Fatal("two requests not admitted under a cap of two")
	}
	// A third waits for a slot (at most keys.UploadAdmitWait) and is
	// refused when none comes.
	if _, ok := svc.Admit(ctx); ok {
		t.Fatal("a third request admitted under a cap of two")
	}
	a.Done()
	a.Done() // a second Done gives nothing back twice
	if n := svc.UploadsInProgress(); n != 1 {
		t.Fatalf("%d in progress, want 1", n)
	}
	c, ok := svc.Admit(ctx)
	if !ok {
		t.Fatal("no request admitted after one was done")
	}
	// A request whose client has gone does not wait.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := svc.Admit(gone); ok {
		t.Fatal("Done twice freed two slots")
	}
	b.Done()
	c.Done()
	// The default admits four per core.
	d := keys.NewService(inprocess.New(inprocess.Options{}), keys.Options{})
	for i := 0; i < keys.DefaultMaxConcurrentUploads(); i++ {
		if _, ok := d.Admit(ctx); !ok {
			t.Fatalf("default cap: request %d refused, want %d admitted", i, keys.DefaultMaxConcurrentUploads())
		}
	}
	if _, ok := d.Admit(gone); ok {
		t.Errorf("default cap: more than %d admitted", keys.DefaultMaxConcurrentUploads())
	}
}

func TestAdmitLinesRequestsUpToTheCap(t *testing.T) {
	svc := keys.NewService(inprocess.New(inprocess.Options{}), keys.Options{MaxConcurrentUploads: 1})
	ctx := t.Context()
	held, ok := svc.Admit(ctx)
	if !ok {
		t.Fatal("not admitted")
	}
	// A second request waits for the slot...
	second := make(chan *keys.Admission, 1)
	go func() {
		a, ok := svc.Admit(ctx)
		if !ok {
			a = nil
		}
		second <- a
	}()
	testkit.Eventually(t, 10*time.Second, "the second request waiting", func() bool { return svc.UploadsWaiting() == 1 })
	// ...and, with as many waiting as there are slots, a third is refused
	// at once, while the second still waits.
	if _, ok := svc.Admit(ctx); ok {
		t.Fatal("a third request admitted")
	}
	if n := svc.UploadsWaiting(); n != 1 {
		t.Fatalf("%d waiting, want the second still waiting", n)
	}
	// The slot given back, the waiting request takes it.
	held.Done()
	a := <-second
	if a == nil {
		t.Fatal("the waiting request was refused when the slot came free")
	}
	a.Done()
	if n, w := svc.UploadsInProgress(), svc.UploadsWaiting(); n != 0 || w != 0 {
		t.Errorf("%d in progress, %d waiting after all were done", n, w)
	}
}

func TestKeysOfOneRequestShareItsVerificationBudget(t *testing.T) {
	svc := keys.NewService(inprocess.New(inprocess.Options{}), keys.Options{})
	ctx := context.Background()
	// Bombs of 8 checks each (RSA-16384, exponent 65537) until the
	// request's budget is spent: each costs a key's 8 bad checks, and the
	// request refuses the rest unchecked.
	adm, ok := svc.Admit(ctx)
	if !ok {
		t.Fatal("not admitted")
	}
	defer adm.Done()
	spent := false
	for i := 0; i < 64 && !spent; i++ {
		raw, err := keygen.Bomb{Exponent: 65537, SigsPerUserID: 8, Seed: int64(i)}.Build()
		if err != nil {
			t.Fatal(err)
		}
		k, err := pgp.ParseKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Upload(ctx, k, keys.UploadOptions{Admission: adm})
		var rej *keys.Rejection
		if !errors.As(err, &rej) {
			t.Fatalf("bomb %d: %v", i, err)
		}
		spent = errors.Is(err, pgp.ErrVerifyBudget)
		if spent && i*8*4352 > pgp.DefaultMaxUploadVerifyWork {
			t.Errorf("budget spent only after %d bombs", i)
		}
	}
	if !spent {
		t.Fatal("64 bombs in one request never spent its budget")
	}
	// A request of its own has its own budget.
	other, _ := svc.Admit(ctx)
	defer other.Done()
	if _, err := svc.Upload(ctx, testKey(t, 1), keys.UploadOptions{Admission: other}); err != nil {
		t.Errorf("a genuine key in a fresh request: %v", err)
	}
}
