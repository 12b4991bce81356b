package witness_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/identity/tlog/witness"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, tlog.SeedSize) }

// logFixture is a log in memory with its key.
type logFixture struct {
	t    *testing.T
	key  *tlog.Key
	tree *tlog.MemTree
}

func newLog(t *testing.T, keySeed byte, entries ...string) *logFixture {
	t.Helper()
	k, err := tlog.NewKey("log.example/log", seed(keySeed))
	if err != nil {
		t.Fatal(err)
	}
	l := &logFixture{t: t, key: k, tree: &tlog.MemTree{}}
	for _, e := range entries {
		l.add(e)
	}
	return l
}

func (l *logFixture) add(entry string) {
	if err := l.tree.Append([]byte(entry)); err != nil {
		l.t.Fatal(err)
	}
}

func (l *logFixture) checkpoint(size int64) (tlog.Checkpoint, []byte) {
	l.t.Helper()
	root, err := l.tree.Root(size)
	if err != nil {
		l.t.Fatal(err)
	}
	c := tlog.Checkpoint{Origin: l.key.Name(), Size: size, Root: root}
	signed, err := l.key.SignCheckpoint(c)
	if err != nil {
		l.t.Fatal(err)
	}
	return c, signed
}

func (l *logFixture) prove(size int64) func(int64) (xtlog.TreeProof, error) {
	return func(old int64) (xtlog.TreeProof, error) { return xtlog.ProveTree(size, old, l.tree) }
}

func entries(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// newWitness starts a witness of logKey's log on a fresh database and
// returns its URL (the submission prefix) and the policy a log submits
// with.
func newWitness(t *testing.T, logKey *tlog.Key) (string, *policy.Policy) {
	t.Helper()
	p, err := policy.Parse([]byte("log " + logKey.VerifierKey() + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := tlog.NewCosigner("witness.example/w", seed(9))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	witness.NewHandler(p, signer, pgtest.NewStore(t), witness.HandlerOptions{}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url := srv.URL + witness.Prefix
	lp, err := policy.Parse([]byte("log " + logKey.VerifierKey() + "\nwitness w " + signer.VerifierKey() + " " + url + "\nquorum w\n"))
	if err != nil {
		t.Fatal(err)
	}
	return url, lp
}

func TestWitnessCosignsAGrowingLogAndRefusesAFork(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, 1, entries("e", 10)...)
	_, lp := newWitness(t, l.key)
	sub, err := witness.NewSubmitter(lp, witness.SubmitterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	for _, size := range []int64{3, 7, 7} {
		c, signed := l.checkpoint(size)
		got := sub.Witness(ctx, signed, c, prev, l.prove(size))
		if _, err := lp.Verify(got); err != nil {
			t.Fatalf("size %d: %v\n%s", size, err, got)
		}
		prev = size
	}

	// Another log of the same size, 7, with another root.
	fork := newLog(t, 1, entries("e", 5)...)
	fork.add("forged")
	fork.add("e6")
	c, signed := fork.checkpoint(7)
	if got := sub.Witness(ctx, signed, c, 7, fork.prove(7)); !bytes.Equal(got, signed) {
		t.Fatalf("the fork was cosigned:\n%s", got)
	}
	// The fork grown to 10: no proof from the cosigned 7 verifies.
	for _, e := range entries("f", 3) {
		fork.add(e)
	}
	c, signed = fork.checkpoint(10)
	if got := sub.Witness(ctx, signed, c, 7, fork.prove(10)); !bytes.Equal(got, signed) {
		t.Fatalf("the grown fork was cosigned:\n%s", got)
	}

	// A log node that knows nothing of the witness (say, another node
	// sharing the database) learns its size from the 409 and proves from
	// there.
	fresh, err := witness.NewSubmitter(lp, witness.SubmitterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, signed = l.checkpoint(10)
	if _, err := lp.Verify(fresh.Witness(ctx, signed, c, 0, l.prove(10))); err != nil {
		t.Fatalf("after a 409: %v", err)
	}
}

// post sends an add-checkpoint request and returns the status and body.
func post(t *testing.T, url string, old int64, proof xtlog.TreeProof, signed []byte) (int, string) {
	t.Helper()
	body := fmt.Sprintf("old %d\n", old)
	for _, h := range proof {
		body += base64.StdEncoding.EncodeToString(h[:]) + "\n"
	}
	body += "\n" + string(signed)
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusConflict && resp.Header.Get("Content-Type") != "text/x.tlog.size" {
		t.Errorf("409 of Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(b)
}

func TestWitnessAnswersAsTheSpecSays(t *testing.T) {
	l := newLog(t, 1, entries("e", 8)...)
	url, _ := newWitness(t, l.key)
	_, cp4 := l.checkpoint(4)
	_, cp8 := l.checkpoint(8)
	proof, err := l.prove(8)(4)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := tlog.NewKey("other.example/log", seed(2))
	otherCp, _ := other.SignCheckpoint(tlog.Checkpoint{Origin: other.Name(), Size: 1})
	impostor, _ := tlog.NewKey("log.example/log", seed(3))
	c8, _ := l.checkpoint(8)
	forged, _ := impostor.SignCheckpoint(c8)
	empty, _ := l.key.SignCheckpoint(tlog.Checkpoint{Origin: l.key.Name(), Size: 0, Root: c8.Root})
	forked8, _ := l.key.SignCheckpoint(tlog.Checkpoint{Origin: l.key.Name(), Size: 8, Root: xtlog.RecordHash([]byte("another tree"))})

	for _, tc := range []struct {
		name   string
		old    int64
		proof  xtlog.TreeProof
		signed []byte
		status int
		body   string
	}{
		{"unknown log", 0, nil, otherCp, http.StatusNotFound, ""},
		{"not signed by the log's key", 0, nil, forged, http.StatusForbidden, ""},
		{"old beyond the checkpoint", 9, nil, cp8, http.StatusBadRequest, ""},
		{"size 0 with another root", 0, nil, empty, http.StatusUnprocessableEntity, ""},
		{"a proof from 0", 0, proof, cp4, http.StatusUnprocessableEntity, ""},
		{"first checkpoint", 0, nil, cp4, http.StatusOK, "— witness.example/w "},
		{"old size not the witness's", 0, nil, cp8, http.StatusConflict, "4\n"},
		{"a bad proof", 4, proof[1:], cp8, http.StatusUnprocessableEntity, ""},
		{"a good proof", 4, proof, cp8, http.StatusOK, "— witness.example/w "},
		// The spec: the same size with another root is a 409.
		{"the same size with another root", 8, nil, forked8, http.StatusConflict, "8\n"},
		{"the same size and root again", 8, nil, cp8, http.StatusOK, "— witness.example/w "},
	} {
		status, body := post(t, url, tc.old, tc.proof, tc.signed)
		if status != tc.status || !strings.HasPrefix(body, tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, status, body, tc.status, tc.body)
		}
	}
	// Monitors get the checkpoint last cosigned.
	resp, err := http.Get(url + "/" + originHash(l.key.Name()) + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(b, cp8[:bytes.Index(cp8, []byte("\n\n"))+2]) || !bytes.Contains(b, []byte("— witness.example/w ")) {
		t.Errorf("monitoring checkpoint: %d\n%s", resp.StatusCode, b)
	}
}

// TestWitnessCosignsOneOfTwoRacingCheckpoints races submissions from one
// old size: the stored size is compared and set atomically, so exactly
// one is cosigned and the others get 409, whatever their order.
func TestWitnessCosignsOneOfTwoRacingCheckpoints(t *testing.T) {
	l := newLog(t, 1, entries("e", 16)...)
	url, _ := newWitness(t, l.key)
	_, cp4 := l.checkpoint(4)
	if status, body := post(t, url, 0, nil, cp4); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for size := int64(5); size <= 16; size++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, signed := l.checkpoint(size)
			proof, err := l.prove(size)(4)
			if err != nil {
				t.Error(err)
				return
			}
			status, _ := post(t, url, 4, proof, signed)
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[http.StatusOK] != 1 || statuses[http.StatusConflict] != 11 {
		t.Fatalf("statuses %v, want one 200 and eleven 409", statuses)
	}
}

func originHash(origin string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(origin)))
}

// TestSubmitterFailsOpen: a witness that never answers and one that is
// down cost the round at most its bound; the checkpoint keeps the
// cosignature of the witness that answered, and the quorum of all three
// is not met.
func TestSubmitterFailsOpen(t *testing.T) {
	l := newLog(t, 1, entries("e", 4)...)
	url, lp := newWitness(t, l.key)
	hung := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hung }))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(hung) })
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	s1, _ := tlog.NewCosigner("w.example/stuck", seed(11))
	s2, _ := tlog.NewCosigner("w.example/down", seed(12))
	p, err := policy.Parse([]byte(fmt.Sprintf("log %s\nwitness w %s %s\nwitness stuck %s %s\nwitness down %s %s\ngroup all3 all w stuck down\nquorum all3\n",
		l.key.VerifierKey(), lp.Witnesses[0].VerifierKey, url, s1.VerifierKey(), stuck.URL, s2.VerifierKey(), downURL)))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := witness.NewSubmitter(p, witness.SubmitterOptions{Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, signed := l.checkpoint(4)
	got := sub.Witness(context.Background(), signed, c, 0, l.prove(4))
	cosigned := p.Cosigners(got)
	if !cosigned[0] || cosigned[1] || cosigned[2] {
		t.Fatalf("cosigners %v, want only w:\n%s", cosigned, got)
	}
	if _, err := p.Verify(got); !errors.Is(err, policy.ErrNoQuorum) {
		t.Fatalf("quorum of three with one: %v", err)
	}
	// The published checkpoint lacks two cosignatures: it is submitted
	// again, once, not at every integration.
	if !sub.Retry(got) || sub.Retry(got) {
		t.Fatal("Retry should say yes once, then wait")
	}
}

// TestSubmitterKeepsCosignaturesBesideABadAnswer: a witness that answers
// 200 with a body that is no cosignature (a proxy's page, a bug) loses
// only its own cosignature; the others' are merged as if it were down.
func TestSubmitterKeepsCosignaturesBesideABadAnswer(t *testing.T) {
	l := newLog(t, 1, entries("e", 4)...)
	url, lp := newWitness(t, l.key)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>OK</html>\n")
	}))
	t.Cleanup(bad.Close)
	s1, _ := tlog.NewCosigner("w.example/bad", seed(11))
	// The bad witness comes first in the policy and answers at once.
	p, err := policy.Parse([]byte(fmt.Sprintf("log %s\nwitness bad %s %s\nwitness w %s %s\nquorum w\n",
		l.key.VerifierKey(), s1.VerifierKey(), bad.URL, lp.Witnesses[0].VerifierKey, url)))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := witness.NewSubmitter(p, witness.SubmitterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, signed := l.checkpoint(4)
	got := sub.Witness(context.Background(), signed, c, 0, l.prove(4))
	if cosigned := p.Cosigners(got); cosigned[0] || !cosigned[1] {
		t.Fatalf("cosigners %v, want only w:\n%s", cosigned, got)
	}
	if _, err := p.Verify(got); err != nil {
		t.Fatalf("quorum of w: %v", err)
	}
}

// TestSubmitterCountsASameSizeForkAsInconsistent: a witness's 409 for the
// very size it was asked from (it cosigned another root for that size,
// as C2SP tlog-witness answers a fork) is counted and reported as the
// fork it is, not as a size to catch up from.
func TestSubmitterCountsASameSizeForkAsInconsistent(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, 1, entries("e", 4)...)
	url, lp := newWitness(t, l.key)
	reg := prometheus.NewRegistry()
	sub, err := witness.NewSubmitter(lp, witness.SubmitterOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	c, signed := l.checkpoint(4)
	if _, err := lp.Verify(sub.Witness(ctx, signed, c, 0, l.prove(4))); err != nil {
		t.Fatal(err)
	}
	fork := newLog(t, 1, "e0", "e1", "e2", "forged")
	c, signed = fork.checkpoint(4)
	if got := sub.Witness(ctx, signed, c, 4, fork.prove(4)); !bytes.Equal(got, signed) {
		t.Fatalf("the fork was cosigned:\n%s", got)
	}
	if status, body := post(t, url, 4, nil, signed); status != http.StatusConflict || body != "4\n" {
		t.Errorf("the fork asked directly: %d %q, want 409 \"4\\n\"", status, body)
	}
	requests := func(outcome string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "kith_log_witness_requests_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == outcome {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	if requests("inconsistent") != 1 || requests("conflict") != 0 {
		t.Errorf("requests: %v inconsistent, %v conflict; want 1 and 0", requests("inconsistent"), requests("conflict"))
	}
}

// TestWitnessRefusalsQuoteLittleOfTheRequest: a refusal, which the
// witness logs, quotes a stranger's long line only in part.
func TestWitnessRefusalsQuoteLittleOfTheRequest(t *testing.T) {
	l := newLog(t, 1, entries("e", 4)...)
	url, _ := newWitness(t, l.key)
	long := strings.Repeat("x", 32<<10)
	for name, body := range map[string]string{
		"old size line": "old " + long + "\n\nlog.example/log\n",
		"proof line":    "old 1\n" + long + "\n\nlog.example/log\n",
		"unknown log":   "old 0\n\n" + long + "\n",
	} {
		resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || len(b) > 512 {
			t.Errorf("%s: %d with %d bytes of answer", name, resp.StatusCode, len(b))
		}
	}
}
