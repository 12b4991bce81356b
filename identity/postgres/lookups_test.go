package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// lookupCase is a query by fingerprint and what it answered alone.
type lookupCase struct {
	q    keys.Query
	want []keys.Stored
	more bool
	err  error
}

// lookupStore stores generated keys in a store whose pool keeps one
// connection for lookups, and returns the queries by fingerprint of
// every form (a primary fingerprint with and without user IDs, with and
// without packets, over a size bound; a subkey's; an unknown one), each
// with the answer it gets alone.
func lookupStore(t *testing.T) (*postgres.Store, []lookupCase) {
	t.Helper()
	typical, err := keygen.TypicalKeys(40, 3)
	if err != nil {
		t.Fatal(err)
	}
	s, stored := oneLookupConnStore(t, typical)
	var cases []lookupCase
	for i, k := range stored {
		d := k.Describe()
		fp := d.Fingerprint
		cases = append(cases,
			lookupCase{q: keys.Query{Fingerprint: fp}},
			lookupCase{q: keys.Query{Fingerprint: fp, NoUserIDs: true}},
			lookupCase{q: keys.Query{Fingerprint: fp, InlineBytes: -1}},
			lookupCase{q: keys.Query{Fingerprint: fp, MaxBytes: 100 + 40*i}},
			lookupCase{q: keys.Query{Fingerprint: d.Subkeys[0].Fingerprint}},
			lookupCase{q: keys.Query{Fingerprint: []byte(fmt.Sprintf("unknown fingerprint %d", i))}},
		)
	}
	answerAlone(t, s, cases)
	return s, cases
}

// oneLookupConnStore is a store whose pool keeps one connection for
// lookups, holding the keys bins through the default policy, which it
// returns.
func oneLookupConnStore(t *testing.T, bins [][]byte) (*postgres.Store, []*pgp.Key) {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.NewDatabase(t), postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	stored := make([]*pgp.Key, len(bins))
	for i, b := range bins {
		stored[i] = applied(t, b)
		if _, err := s.AddKey(ctx, stored[i]); err != nil {
			t.Fatal(err)
		}
	}
	return s, stored
}

// answerAlone sets each case's answer to the one its query gets alone.
func answerAlone(t *testing.T, s *postgres.Store, cases []lookupCase) {
	t.Helper()
	for i := range cases {
		c := &cases[i]
		c.want, c.more, c.err = s.FindKeys(context.Background(), c.q)
	}
}

// answerBehindHeldConns runs the cases' queries at once while every
// connection for lookups is held, waits until all but the one leading
// wait for a batch of what ("fingerprint" or "word"), lets them go and
// checks each answer against the one it got alone. It returns how many
// reads and statements the batches added.
func answerBehindHeldConns(t *testing.T, s *postgres.Store, what string, cases []lookupCase) (reads, statements int64) {
	t.Helper()
	reads0, statements0, _, _ := postgres.Batches(s, what)
	release := holdReadConns(t, s)
	errs := make(chan error, len(cases))
	for _, c := range cases {
		go func() {
			got, more, err := s.FindKeys(context.Background(), c.q)
			if err := c.check(got, more, err); err != nil {
				errs <- fmt.Errorf("%+v: %w", c.q, err)
				return
			}
			errs <- nil
		}()
	}
	testkit.Eventually(t, 10*time.Second, "the reads queued", func() bool {
		_, _, _, queued := postgres.Batches(s, what)
		return queued == len(cases)-1
	})
	release()
	for range cases {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	reads, statements, running, _ := postgres.Batches(s, what)
	if running != 0 {
		t.Errorf("%d batches still running", running)
	}
	return reads - reads0, statements - statements0
}

// holdReadConns takes every connection of s's pool for lookups until
// release is called, or the test ends.
func holdReadConns(t *testing.T, s *postgres.Store) (release func()) {
	t.Helper()
	r, err := postgres.HoldReadConns(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(r) }
	t.Cleanup(release)
	return release
}

// check compares an answer with the one the query got alone.
func (c lookupCase) check(got []keys.Stored, more bool, err error) error {
	switch {
	case c.err != nil && errors.Is(err, keys.ErrAnswerTooLarge) && errors.Is(c.err, keys.ErrAnswerTooLarge):
		return nil
	case (err == nil) != (c.err == nil):
		return fmt.Errorf("error %v, alone %v", err, c.err)
	case !reflect.DeepEqual(got, c.want) || more != c.more:
		return fmt.Errorf("%d keys, alone %d", len(got), len(c.want))
	}
	return nil
}

// Lookups that find the pool's connection busy wait, and the next batch
// answers them all at once, each as it would have been answered alone.
func TestLookupsWaitingForAConnectionAreAnsweredTogether(t *testing.T) {
	s, cases := lookupStore(t)
	// Primary fingerprints with user IDs and packets: one form, fewer
	// than fill a batch.
	var same []lookupCase
	for _, c := range cases {
		if reflect.DeepEqual(c.q, keys.Query{Fingerprint: c.q.Fingerprint}) && len(c.want) == 1 && bytes.Equal(c.want[0].Fingerprint, c.q.Fingerprint) {
			same = append(same, c)
		}
	}
	// One lookup leads, waiting for the connection with its own; the
	// others queue behind it and go in the next batch.
	if lookups, batches := answerBehindHeldConns(t, s, "fingerprint", same); lookups != int64(len(same)) || batches != 2 {
		t.Errorf("%d lookups in %d batches, want %d in 2", lookups, batches, len(same))
	}
}

// Lookups of every form from many goroutines at once, some of them
// cancelled before or while they wait: every lookup not cancelled gets
// the answer it gets alone, a cancelled one that or its context's error,
// and no batch is left running.
func TestLookupsOfEveryFormConcurrentlyAndCancelled(t *testing.T) {
	s, cases := lookupStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32*len(cases))
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cases {
				c := cases[(i*7+g*13)%len(cases)]
				ctx, cancel := context.WithCancel(context.Background())
				switch (i + g) % 5 {
				case 0:
					cancel() // before it starts
				case 1:
					go cancel() // while it runs or waits
				}
				got, more, err := s.FindKeys(ctx, c.q)
				cancel()
				if (i+g)%5 < 2 && errors.Is(err, context.Canceled) {
					continue
				}
				if err := c.check(got, more, err); err != nil {
					errs <- fmt.Errorf("%x: %w", c.q.Fingerprint, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lookups, batches, running, queued := postgres.Batches(s, "fingerprint")
	if running != 0 || queued != 0 {
		t.Errorf("%d batches running and %d lookups queued after every lookup returned", running, queued)
	}
	t.Logf("%d lookups in %d batches", lookups, batches)
}

// Searches by words that wait for a connection read the keys of their
// rarest words together, and each finds what it finds alone: searches
// of one key's rare word, of a word two searches share, of a common
// word (more keys than a rare word has), of a word no key has, of bytes
// that are no UTF-8, with packets and without.
func TestSearchesWaitingForAConnectionReadTheirWordsTogether(t *testing.T) {
	s, _ := oneLookupConnStore(t, generatedKeys(t, 150))
	postgres.ForgetWordCounts(s) // every word is guessed rare
	var cases []lookupCase
	for _, words := range [][]string{
		{"user7"}, {"user7", "generated"}, {"user12", "alt"}, {"user12", "net"}, {"user140", "example"},
		{"generated", "user"}, {"zzqqxxnothing"}, {"user99", "zzqqxxnothing"},
		// A stranger's bytes that are no text share the batch with the
		// others' searches and fail none of them.
		{"user7\xff\x00'); --"},
	} {
		for _, inline := range []int{0, -1} {
			cases = append(cases, lookupCase{q: keys.Query{Words: words, InlineBytes: inline, Limit: 100}})
		}
	}
	answerAlone(t, s, cases)
	for _, c := range cases {
		if c.err != nil {
			t.Fatal(c.err)
		}
	}
	postgres.ForgetWordCounts(s) // and the words the searches found common
	// One search leads, waiting for the connection with its own word;
	// the others queue behind it, those of each form together: the
	// leader's statement, then one for each of the two forms (the common
	// word's searches read it again, counted, one by one).
	if reads, statements := answerBehindHeldConns(t, s, "word", cases); reads != int64(len(cases)) || statements != 3 {
		t.Errorf("%d word reads in %d statements, want %d in 3", reads, statements, len(cases))
	}
}
