package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/web/api"
)

// litewitness is a running litewitness (filippo.io/torchwood, a go.mod
// tool): an independent C2SP tlog-witness.
type litewitness struct {
	url  string // its submission prefix
	vkey string
	out  *testkit.SyncBuffer
}

// buildTorchwood builds litewitness and witnessctl, the versions go.mod
// pins, into a directory.
func buildTorchwood(t *testing.T) string {
	t.Helper()
	goBin := testkit.Tool(t, "go")
	dir := t.TempDir()
	cmd := exec.Command(goBin, "build", "-o", dir+"/", "filippo.io/torchwood/cmd/litewitness", "filippo.io/torchwood/cmd/witnessctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build litewitness: %v\n%s", err, out)
	}
	return dir
}

// startLitewitness runs litewitness, its key held by an ssh-agent served
// from the test, witnessing the logs of the given vkeys.
func startLitewitness(t *testing.T, bin string, logKeys ...string) *litewitness {
	t.Helper()
	dir := t.TempDir()
	seed := bytes.Repeat([]byte{42}, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	pub, err := xssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "litewitness.db")
	for _, vkey := range logKeys {
		origin, _, _ := strings.Cut(vkey, "+")
		for _, args := range [][]string{{"add-log", "-db", db, "-origin", origin}, {"add-key", "-db", db, "-origin", origin, "-key", vkey}} {
			if out, err := exec.Command(filepath.Join(bin, "witnessctl"), args...).CombinedOutput(); err != nil {
				t.Fatalf("witnessctl %s: %v\n%s", args[0], err, out)
			}
		}
	}
	const name = "litewitness.test/w"
	cosigner, err := tlog.NewCosigner(name, seed)
	if err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	w := &litewitness{url: "http://" + addr, vkey: cosigner.VerifierKey(), out: &testkit.SyncBuffer{}}
	cmd := exec.Command(filepath.Join(bin, "litewitness"), "-db", db, "-name", name, "-key", xssh.FingerprintSHA256(pub), "-ssh-agent", sock, "-listen", addr)
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testkit.Eventually(t, 30*time.Second, "litewitness to listen", func() bool {
		resp, err := http.Get(w.url + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return w
}

// witnessedNode is a kith serve on a database of its own, with its log
// and witness keys known before it starts.
type witnessedNode struct {
	*server
	url, db        string
	logKey, witKey string
	dir            string
}

func newWitnessedNode(t *testing.T) *witnessedNode {
	t.Helper()
	n := &witnessedNode{db: pgtest.NewDatabase(t), dir: tempDir(t)}
	n.url = "http://" + testkit.FreeAddr(t)
	for _, key := range []*string{&n.logKey, &n.witKey} {
		cmd := "log-key"
		if key == &n.witKey {
			cmd = "witness-key"
		}
		out, stderr, err := kithCmd(cmd, "--database-url", n.db, "--public-url", n.url)
		if err != nil {
			t.Fatalf("kith %s: %v\n%s", cmd, err, stderr)
		}
		*key = strings.TrimSpace(out)
	}
	return n
}

func (n *witnessedNode) writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(n.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs kith serve with the given policies.
func (n *witnessedNode) start(t *testing.T, logPolicy, witnessPolicy string) {
	t.Helper()
	addr := strings.TrimPrefix(n.url, "http://")
	n.server = startServe(t, n.dir, nil, "--listen", addr, "--database-url", n.db, "--public-url", n.url,
		"--log-witness-policy", n.writeFile(t, "log.policy", logPolicy),
		"--witness-enabled", "--witness-policy", n.writeFile(t, "witness.policy", witnessPolicy))
	n.server.addr = addr
	n.waitHealth(t, http.StatusOK, 60*time.Second)
}

// claim claims handle with key at the node.
func (n *witnessedNode) claim(t *testing.T, handle string, key sshKeyPair) {
	t.Helper()
	var c api.ChallengeResponse
	if status := postJSON(t, n.url+"/api/v1/challenges", api.ChallengeRequest{Handle: handle, Factor: key.pub, Purpose: "claim"}, &c); status != http.StatusCreated {
		t.Fatalf("challenge: %d", status)
	}
	req := api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: c.Statement, Signature: key.sign(t, c.Statement)}}
	if status := postJSON(t, n.url+"/api/v1/identities", req, nil); status >= 300 {
		t.Fatalf("claim %s: %d", handle, status)
	}
}

// checkpoint returns the node's served checkpoint.
func (n *witnessedNode) checkpoint(t *testing.T) []byte {
	t.Helper()
	resp, err := http.Get(n.url + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	return b
}

// waitWitnessed waits for a checkpoint of at least size entries that p's
// quorum cosigned, and returns it.
func (n *witnessedNode) waitWitnessed(t *testing.T, p *policy.Policy, size int64) []byte {
	t.Helper()
	var signed []byte
	var last error
	if !testkit.PollEvery(60*time.Second, 50*time.Millisecond, func() bool {
		signed = n.checkpoint(t)
		c, err := p.Verify(signed)
		last = err
		if err == nil && c.Size < size {
			last = fmt.Errorf("size %d", c.Size)
		}
		return last == nil
	}) {
		t.Fatalf("%s: no checkpoint of %d entries witnessed by the quorum: %v\n%s\n%s", n.url, size, last, signed, n.stderr.String())
	}
	return signed
}

// addCheckpoint posts an add-checkpoint request and returns the status.
func addCheckpoint(t *testing.T, url string, old int64, signed []byte) int {
	t.Helper()
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(fmt.Sprintf("old %d\n\n%s", old, signed)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWitnessedCheckpoints: a real, independent witness (litewitness)
// and a second Kith node cosign node A's checkpoints; A cosigns B's; both
// logs pass verify-log with their policies. Then A's log is forked behind
// its back (the same size, another root): no witness cosigns the fork,
// and verify-log with the policy refuses it.
func TestWitnessedCheckpoints(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	bin := buildTorchwood(t)
	a, b := newWitnessedNode(t), newWitnessedNode(t)
	lite := startLitewitness(t, bin, a.logKey)

	a.start(t, fmt.Sprintf("witness lite %s %s\nwitness kith-b %s %s/witness\ngroup both all lite kith-b\nquorum both\n", lite.vkey, lite.url, b.witKey, b.url),
		"log "+b.logKey+"\nquorum none\n")
	b.start(t, fmt.Sprintf("witness kith-a %s %s/witness\nquorum kith-a\n", a.witKey, a.url),
		"log "+a.logKey+"\nquorum none\n")
	aPolicyText := fmt.Sprintf("log %s\nwitness lite %s\nwitness kith-b %s\ngroup both all lite kith-b\nquorum both\n", a.logKey, lite.vkey, b.witKey)
	aPolicy, err := policy.Parse([]byte(aPolicyText))
	if err != nil {
		t.Fatal(err)
	}
	aPolicyFile := a.writeFile(t, "client.policy", aPolicyText)
	bPolicyText := fmt.Sprintf("log %s\nwitness kith-a %s\nquorum kith-a\n", b.logKey, a.witKey)
	bPolicy, err := policy.Parse([]byte(bPolicyText))
	if err != nil {
		t.Fatal(err)
	}
	bPolicyFile := b.writeFile(t, "client.policy", bPolicyText)

	keys := t.TempDir()
	alice := newSSHKeyPair(t, keys, "alice")
	a.claim(t, "alice", alice)
	b.claim(t, "bob", newSSHKeyPair(t, keys, "bob"))
	a.waitWitnessed(t, aPolicy, 1)
	b.waitWitnessed(t, bPolicy, 1)
	// Growing: the witnesses check consistency proofs from the size they
	// cosigned.
	a.claim(t, "carol", newSSHKeyPair(t, keys, "carol"))
	a.claim(t, "dave", newSSHKeyPair(t, keys, "dave"))
	good := a.waitWitnessed(t, aPolicy, 3)
	goodCp, err := aPolicy.Verify(good)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		n      *witnessedNode
		policy string
	}{{a, aPolicyFile}, {b, bPolicyFile}} {
		out, stderr, err := kithCmd("verify-log", "--server", c.n.url, "--policy", c.policy)
		if err != nil || !strings.Contains(out, "ok: ") {
			t.Fatalf("verify-log --policy on %s: %v\n%s%s", c.n.url, err, out, stderr)
		}
	}
	// authorized-keys: the policy's log line is the log key.
	cache := t.TempDir()
	authorizedKeys := func() (string, error) {
		out, _, err := kithCmd("authorized-keys", "--server", a.url, "--log-policy", aPolicyFile, "--cache-dir", cache, "alice")
		return out, err
	}
	if out, err := authorizedKeys(); err != nil || !strings.Contains(out, strings.Fields(alice.pub)[1]) {
		t.Fatalf("authorized-keys --log-policy: %v\n%s", err, out)
	}
	// B's policy is not A's: A's checkpoint lacks kith-a's cosignature.
	if out, _, err := kithCmd("verify-log", "--server", a.url, "--policy", bPolicyFile); err == nil {
		t.Fatalf("verify-log with another log's policy passed:\n%s", out)
	}

	// The fork: record 2 rewritten, the chain resealed after it, and the
	// tree thrown away; the server re-signs a tree of the same size with
	// another root.
	ctx := context.Background()
	st, err := postgres.Open(ctx, a.db, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Log(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	recs[1].Label = "forked"
	for i := 1; i < len(recs); i++ {
		recs[i].Seal(recs[i-1].Seq, recs[i-1].Hash)
		execSQL(t, a.db, "UPDATE evidence SET label = $1, prev_hash = $2, hash = $3 WHERE seq = $4", recs[i].Label, recs[i].PrevHash, recs[i].Hash, recs[i].Seq)
	}
	last := recs[len(recs)-1]
	execSQL(t, a.db, "UPDATE evidence_head SET seq = $1, hash = $2", last.Seq, last.Hash)
	execSQL(t, a.db, "DELETE FROM tlog_hashes")
	execSQL(t, a.db, "UPDATE tlog_head SET size = 0, checkpoint = NULL")

	var forked []byte
	testkit.Eventually(t, 60*time.Second, "A to sign the forked tree", func() bool {
		forked = a.checkpoint(t)
		c, err := tlog.OpenCheckpoint(forked, a.logKey)
		return err == nil && c.Size == goodCp.Size && c.Root != goodCp.Root
	})
	// A submitted it (to both, with old size = the size they hold):
	// refused. Asked directly, they refuse it too.
	testkit.Eventually(t, 60*time.Second, "both witnesses to refuse the fork", func() bool {
		m := metricsText(t, a.url)
		return strings.Contains(m, `kith_log_witness_requests_total{outcome="inconsistent",witness="lite"}`) &&
			strings.Contains(m, `kith_log_witness_requests_total{outcome="inconsistent",witness="kith-b"}`)
	})
	// B's witness counts the refusal for A's origin.
	if m := metricsText(t, b.url); !strings.Contains(m, fmt.Sprintf(`kith_witness_requests_total{origin=%q,outcome="inconsistent"}`, goodCp.Origin)) {
		t.Errorf("B's metrics do not count the fork:\n%s", m)
	}
	// litewitness v0.6.1 answers 422; Kith answers 409, as C2SP
	// tlog-witness says of the same size with another root.
	for w, want := range map[string]int{lite.url: http.StatusUnprocessableEntity, b.url + "/witness": http.StatusConflict} {
		if status := addCheckpoint(t, w, goodCp.Size, forked); status != want {
			t.Errorf("%s answered the fork %d, want %d", w, status, want)
		}
	}
	if _, err := aPolicy.Verify(a.checkpoint(t)); !errors.Is(err, policy.ErrNoQuorum) {
		t.Fatalf("the forked checkpoint: %v\n%s", err, a.checkpoint(t))
	}
	out, stderr, err := kithCmd("verify-log", "--server", a.url, "--policy", aPolicyFile)
	if err == nil || !strings.Contains(out+err.Error(), "not cosigned by the policy's quorum") {
		t.Fatalf("verify-log --policy on the fork: %v\n%s%s", err, out, stderr)
	}
	if out, err := authorizedKeys(); err == nil || out != "" {
		t.Fatalf("authorized-keys --log-policy on the fork: %v\n%s", err, out)
	}
	// The witnesses still hold the good tree: litewitness serves nothing
	// to compare, Kith B's monitoring endpoint does.
	resp, err := http.Get(fmt.Sprintf("%s/witness/%x/checkpoint", b.url, sha256.Sum256([]byte(goodCp.Origin))))
	if err != nil {
		t.Fatal(err)
	}
	held, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if c, err := tlog.OpenCheckpoint(held, a.logKey); err != nil || c.Root != goodCp.Root {
		t.Fatalf("Kith B's witness holds %v (%v), want the good root", c, err)
	}
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// execSQL runs sql on the database at url, behind the server's back.
func execSQL(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}
