package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/skstest"
)

// kithExec runs the kith binary with args and returns its stdout, failing
// the test when it fails.
func kithExec(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := kithExecErr(t, args...)
	if err != nil {
		t.Fatalf("kith %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func kithExecErr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(kithBinary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=tester"}
	var out, errb testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// httpStatus returns the status of GET url.
func httpStatus(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// reconNodeOn is an in-process recon node over the database at url, as
// kith serve wires it; start it with its peer.
func reconNodeOn(t *testing.T, ctx context.Context, dbURL string) *reconNode {
	t.Helper()
	n := &reconNode{store: openTestStore(t, dbURL)}
	n.keys = keys.NewService(n.store, keys.Options{Policy: pgp.DefaultPolicy(), Logger: slog.New(slog.DiscardHandler)})
	h := hkp.NewHandler(n.store, n.keys, hkp.Options{Logger: slog.New(slog.DiscardHandler)})
	n.keys.Subscribe(h)
	go h.Run(ctx)
	n.http = httptest.NewServer(h)
	t.Cleanup(n.http.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.reconLn = ln
	return n
}

// reconPort is the port of n's recon listener, for SKS's membership.
func (n *reconNode) reconPort() string {
	_, port, _ := net.SplitHostPort(n.reconLn.Addr().String())
	return port
}

// TestBlockTwoNodesSKS: two kith
// serve processes share one database; `kith block add` removes a key both
// served (their caches included); a recon round with a real SKS peer that
// still holds it fetches it once, refuses it and stores nothing; a later
// round, even from a node that never saw the refusal, does not fetch it
// again; an upload is refused with the reason; `kith block list` shows
// who blocked it, when and why; `kith block remove` lets it back.
func TestBlockTwoNodesSKS(t *testing.T) {
	t.Parallel()
	skstest.FindBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	raw, err := keygen.New(919).Range(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	keys := policyKeys(t, raw)
	bad := keys[0]
	fp := bad.Describe().FingerprintHex()
	email := bad.Describe().UserIDs[0].Email
	dbURL := pgtest.NewDatabase(t)
	if _, err := openTestStore(t, dbURL).AddKeys(ctx, keys); err != nil {
		t.Fatal(err)
	}

	nodes := []*server{
		startServe(t, tempDir(t), nil, "--database-url", dbURL),
		startServe(t, tempDir(t), nil, "--database-url", dbURL),
	}
	lookups := func(n *server) map[string]string {
		base := "http://" + n.addr
		return map[string]string{
			"get by fingerprint": base + "/pks/lookup?op=get&options=mr&search=0x" + fp,
			"get by key ID":      base + "/pks/lookup?op=get&options=mr&search=0x" + fp[24:],
			"index by email":     base + "/pks/lookup?op=index&options=mr&search=" + url.QueryEscape(email),
			"key page":           base + "/keys/" + fp,
		}
	}
	for _, n := range nodes {
		n.waitHealth(t, http.StatusOK, time.Minute)
		for name, u := range lookups(n) {
			// Twice: the second answer comes from the node's cache.
			for range 2 {
				if c := httpStatus(t, u); c != http.StatusOK {
					t.Fatalf("before the block, %s answers %d", name, c)
				}
			}
		}
	}

	out := kithExec(t, "block", "add", fp, "--reason", "abuse report 7", "--by", "alice", "--database-url", dbURL)
	if !strings.Contains(out, "removed from the store") {
		t.Fatalf("kith block add said %q", out)
	}
	for i, n := range nodes {
		for name, u := range lookups(n) {
			if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool { return httpStatus(t, u) == http.StatusNotFound }) {
				t.Fatalf("node %d: after the block, %s still answers %d", i+1, name, httpStatus(t, u))
			}
		}
	}

	// A real SKS peer that still holds the key.
	sksKeys := [][]byte{bad.Bytes(), keys[1].Bytes()}
	node, other := reconNodeOn(t, ctx, dbURL), reconNodeOn(t, ctx, dbURL)
	sks := skstest.Start(t, skstest.Options{Keys: sksKeys, GossipInterval: 60,
		Membership: []string{"127.0.0.1 " + node.reconPort(), "127.0.0.1 " + other.reconPort()}})
	node.start(t, ctx, sks.ReconAddr, sks.HKPURL)
	other.start(t, ctx, sks.ReconAddr, sks.HKPURL)
	peer := recon.Peer{Address: sks.ReconAddr, HTTP: sks.HKPURL}
	res, fetched, err := node.manager.ReconcileWith(ctx, peer)
	if err != nil {
		t.Fatalf("recon with SKS: %v\n%s", err, sks.Log("recon"))
	}
	if len(res.Missing) != 1 || fetched.Received != 1 || fetched.Rejected != 1 || fetched.Stored != 0 {
		t.Fatalf("first round: missing %d, fetch %+v; want the blocked key fetched once and refused", len(res.Missing), fetched)
	}
	for i, n := range nodes {
		if c := httpStatus(t, lookups(n)["get by fingerprint"]); c != http.StatusNotFound {
			t.Fatalf("node %d serves the blocked key after recon: %d", i+1, c)
		}
	}
	// SKS fetches what it lacked from the node, gossip off meanwhile.
	if !testkit.PollEvery(2*time.Minute, 200*time.Millisecond, func() bool { return len(missingFrom(sks.HKPURL, keys[1:])) == 0 }) {
		t.Fatalf("SKS did not fetch the node's keys:\n%s", sks.Log("recon"))
	}
	// Another node (a fresh fetcher, no memory of its own) asks SKS for
	// nothing: the refusal is in the database.
	res, fetched, err = reconcileWhenSKSListens(ctx, other, peer)
	if err != nil {
		t.Fatalf("second recon with SKS: %v\n%s", err, sks.Log("recon"))
	}
	if len(res.Missing) != 1 || fetched.Skipped != 1 || fetched.Requested != 0 || fetched.Received != 0 {
		t.Fatalf("second round: missing %d, fetch %+v; want the refused digest skipped", len(res.Missing), fetched)
	}

	// An upload is refused and says why.
	resp, err := http.PostForm("http://"+nodes[1].addr+"/pks/add", url.Values{"keytext": {string(armored(t, bad))}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "blocked on this server") {
		t.Fatalf("upload of the blocked key: %d %s", resp.StatusCode, body)
	}

	list := kithExec(t, "block", "list", "--log", "--database-url", dbURL)
	today := time.Now().UTC().Format("2006-01-02")
	for _, want := range []string{fp, "alice", "abuse report 7", today} {
		if !strings.Contains(list, want) {
			t.Fatalf("kith block list lacks %q:\n%s", want, list)
		}
	}
	if _, errOut, err := kithExecErr(t, "block", "add", fp, "--reason", "x", "--database-url", dbURL); err == nil || !strings.Contains(errOut, "already blocked") {
		t.Fatalf("blocking twice: %v %s", err, errOut)
	}

	kithExec(t, "block", "remove", fp, "--reason", "appeal granted", "--by", "bob", "--database-url", dbURL)
	res, fetched, err = reconcileWhenSKSListens(ctx, other, peer)
	if err != nil {
		t.Fatalf("recon after unblock: %v", err)
	}
	if fetched.Stored != 1 {
		t.Fatalf("after the unblock recon stored %d keys (%+v), want the key back", fetched.Stored, fetched)
	}
	for i, n := range nodes {
		u := lookups(n)["get by fingerprint"]
		if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool { return httpStatus(t, u) == http.StatusOK }) {
			t.Fatalf("node %d does not serve the unblocked key", i+1)
		}
	}
	if log := kithExec(t, "block", "list", "--log", "--database-url", dbURL); !strings.Contains(log, "unblock") || !strings.Contains(log, "appeal granted") {
		t.Fatalf("the log lacks the unblock:\n%s", log)
	}
}

// reconcileWhenSKSListens runs a recon round with SKS, again while SKS
// ignores sessions (it does while it fetches what it recovered).
func reconcileWhenSKSListens(ctx context.Context, n *reconNode, peer recon.Peer) (recon.Result, recon.FetchResult, error) {
	var res recon.Result
	var fetched recon.FetchResult
	var err error
	testkit.PollEvery(time.Minute, 500*time.Millisecond, func() bool {
		res, fetched, err = n.manager.ReconcileWith(ctx, peer)
		return err == nil
	})
	return res, fetched, err
}

// armored returns k ASCII-armored.
func armored(t *testing.T, k *pgp.Key) []byte {
	t.Helper()
	var b strings.Builder
	if err := pgp.WriteArmored(&b, k); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}
