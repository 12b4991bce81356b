package tlog_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// served is a log over its own database, served over HTTP.
type served struct {
	st  *postgres.Store
	log *tlog.Log
	srv *httptest.Server
}

func newServed(t *testing.T) *served {
	st := pgtest.NewStore(t)
	l := newLog(t, st, 1)
	mux := http.NewServeMux()
	tlog.NewHandler(st, l.Key().VerifierKey(), nil).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &served{st, l, srv}
}

func (s *served) fetch(ctx context.Context, path string) ([]byte, error) {
	resp, err := http.Get(s.srv.URL + "/log/" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func (s *served) checkpoint(t *testing.T) tlog.Checkpoint {
	t.Helper()
	if _, err := s.log.Integrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, signed, err := s.st.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := tlog.OpenCheckpoint(signed, s.log.Key().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProofsFromTiles: inclusion and consistency proofs read from the
// served tiles hold for the log's own entries and checkpoints, and fail
// for another entry, and for a fork: a log with other first records
// signed by the same key.
func TestProofsFromTiles(t *testing.T) {
	ctx := context.Background()
	a, fork := newServed(t), newServed(t)
	appendRecords(t, a.st, 260)
	appendRecords(t, fork.st, 260)
	old := a.checkpoint(t)
	appendRecords(t, a.st, 300)
	appendRecords(t, fork.st, 300)
	now, forked := a.checkpoint(t), fork.checkpoint(t)

	recs, err := a.st.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{0, 1, 255, 256, 259, 400, 559} {
		if err := tlog.ProveInclusion(ctx, a.fetch, now, i, recs[i].ComputeHash()); err != nil {
			t.Errorf("entry %d: %v", i, err)
		}
		if tlog.ProveInclusion(ctx, a.fetch, now, i, recs[(i+1)%560].ComputeHash()) == nil {
			t.Errorf("entry %d's proof holds for another record", i)
		}
	}
	if tlog.ProveInclusion(ctx, a.fetch, old, 300, recs[300].ComputeHash()) == nil {
		t.Error("an entry after the checkpoint is proven in it")
	}
	if err := tlog.ProveConsistency(ctx, a.fetch, old, now); err != nil {
		t.Fatalf("consistency of the log's own checkpoints: %v", err)
	}
	if tlog.ProveConsistency(ctx, fork.fetch, old, forked) == nil {
		t.Fatal("a fork is consistent with the log")
	}
	if tlog.ProveConsistency(ctx, a.fetch, now, old) == nil {
		t.Fatal("a shrinking log is consistent")
	}
}
