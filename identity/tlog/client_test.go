// client_test.go: an independent client of the log, written against the
// C2SP tlog-tiles, tlog-checkpoint and signed-note specifications. It
// uses x/mod's tlog only for RFC 6962 hashing and proof checks; paths,
// key and note parsing, signature checks and entry bundles are its own.

package tlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// specClient fetches and checks a log as C2SP describes it.
type specClient struct {
	t    *testing.T
	base string
	name string
	pub  ed25519.PublicKey
	id   [4]byte
}

func (c *specClient) get(path string) ([]byte, int) {
	c.t.Helper()
	resp, err := http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return b, resp.StatusCode
}

// readKey parses the verifier key from /log/key: name, key ID in hex,
// and base64 of the algorithm byte 0x01 (Ed25519) and the public key.
func (c *specClient) readKey() {
	b, code := c.get("/log/key")
	if code != 200 {
		c.t.Fatalf("/log/key: %d", code)
	}
	parts := strings.Split(strings.TrimSpace(string(b)), "+")
	if len(parts) != 3 {
		c.t.Fatalf("verifier key %q", b)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x01 {
		c.t.Fatalf("verifier key %q is not an Ed25519 key", b)
	}
	c.name, c.pub = parts[0], ed25519.PublicKey(raw[1:])
	h := sha256.Sum256(append([]byte(c.name+"\n"), raw...))
	copy(c.id[:], h[:4])
	if fmt.Sprintf("%08x", c.id) != parts[1] {
		c.t.Fatalf("key ID %s, computed %x", parts[1], c.id)
	}
}

// checkpoint fetches the checkpoint, checks its signature line by this
// key (an em dash, the name, base64 of key ID and signature) over the
// text before the blank line, and parses origin, size and root.
func (c *specClient) checkpoint() (int64, xtlog.Hash) {
	c.t.Helper()
	b, code := c.get("/log/checkpoint")
	if code != 200 {
		c.t.Fatalf("/log/checkpoint: %d %s", code, b)
	}
	text, sigs, ok := strings.Cut(string(b), "\n\n")
	if !ok {
		c.t.Fatalf("checkpoint without signatures: %q", b)
	}
	text += "\n"
	verified := false
	for _, line := range strings.Split(strings.TrimSuffix(sigs, "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "\u2014" || f[1] != c.name {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(f[2])
		if err != nil || len(raw) != 4+ed25519.SignatureSize || !bytes.Equal(raw[:4], c.id[:]) {
			continue
		}
		verified = verified || ed25519.Verify(c.pub, []byte(text), raw[4:])
	}
	if !verified {
		c.t.Fatalf("no valid signature by %s on %q", c.name, b)
	}
	lines := strings.Split(text, "\n")
	if lines[0] != c.name {
		c.t.Fatalf("origin %q, key %q", lines[0], c.name)
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		c.t.Fatalf("size %q", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		c.t.Fatalf("root %q", lines[2])
	}
	return n, xtlog.Hash(root)
}

// tilePath is the C2SP path of tile n at level (or "entries") of width w.
func tilePath(level string, n int64, w int) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/", n%1000) + s
	}
	p := "/log/tile/" + level + "/" + s
	if w < 256 {
		p += ".p/" + strconv.Itoa(w)
	}
	return p
}

// entries fetches every entry of a tree of size n.
func (c *specClient) entries(n int64) [][]byte {
	c.t.Helper()
	var out [][]byte
	for i := int64(0); i*256 < n; i++ {
		w := int(min(256, n-i*256))
		b, code := c.get(tilePath("entries", i, w))
		if code != 200 {
			c.t.Fatalf("entry bundle %d: %d", i, code)
		}
		for len(b) > 0 {
			l := int(binary.BigEndian.Uint16(b))
			out = append(out, b[2:2+l])
			b = b[2+l:]
		}
	}
	if int64(len(out)) != n {
		c.t.Fatalf("%d entries for a tree of %d", len(out), n)
	}
	return out
}

// mth is RFC 6962's Merkle tree hash of leaf hashes.
func mth(leaves []xtlog.Hash) xtlog.Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return xtlog.NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

// tileReader reads hash tiles from the server for x/mod's proof code.
type tileReader struct{ c *specClient }

func (r tileReader) Height() int { return 8 }

func (r tileReader) ReadTiles(tiles []xtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, code := r.c.get(tilePath(strconv.Itoa(t.L), t.N, t.W))
		if code != 200 {
			return nil, fmt.Errorf("tile %v: %d", t, code)
		}
		out[i] = b
	}
	return out, nil
}

func (r tileReader) SaveTiles([]xtlog.Tile, [][]byte) {}

// appendRecords appends n key-carried records (no identity needed).
func appendRecords(t *testing.T, st *postgres.Store, n int) {
	t.Helper()
	err := st.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
		for i := range n {
			fp := sha256.Sum256([]byte(fmt.Sprint(time.Now().UnixNano(), i)))
			e := identity.Evidence{Method: identity.MethodPGPUIDSelfSig, From: identity.PGPFactor(fp[:20]),
				To: identity.EmailFactor(fmt.Sprintf("u%d@example.org", i)), Statement: []byte("uid"), Signature: []byte("sig"),
				Created: time.Now()}
			if err := tx.Append(ctx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func newLog(t *testing.T, st *postgres.Store, seed byte) *tlog.Log {
	t.Helper()
	key, err := tlog.NewKey("kith.test/log", bytes.Repeat([]byte{seed}, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return tlog.New(st, key, tlog.Options{})
}

// TestIndependentClientVerifiesTheLog: records made before the log
// existed (the migrated chain) and after are all in the tree; the client
// verifies the checkpoint's signature, rebuilds the root from the entry
// bundles, checks every served leaf-hash tile, inclusion proofs of random
// records, and the consistency of two checkpoints.
func TestIndependentClientVerifiesTheLog(t *testing.T) {
	ctx := context.Background()
	st := pgtest.NewStore(t)
	appendRecords(t, st, 300) // the chain before the tree
	l := newLog(t, st, 1)
	if n, err := l.Integrate(ctx); err != nil || n != 300 {
		t.Fatalf("Integrate = %d, %v", n, err)
	}
	mux := http.NewServeMux()
	tlog.NewHandler(st, l.Key().VerifierKey(), nil).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &specClient{t: t, base: srv.URL}
	c.readKey()

	check := func() (int64, xtlog.Hash) {
		n, root := c.checkpoint()
		ents := c.entries(n)
		recs, err := st.Log(ctx, 0, int(n)+10)
		if err != nil {
			t.Fatal(err)
		}
		leaves := make([]xtlog.Hash, n)
		for i, e := range ents {
			// The entry is the hash of the record's canonical bytes.
			if h := sha256.Sum256(recs[i].CanonicalBytes()); !bytes.Equal(e, h[:]) {
				t.Fatalf("entry %d is not record %d's hash", i, recs[i].Seq)
			}
			leaves[i] = xtlog.RecordHash(e)
		}
		if got := mth(leaves); got != root {
			t.Fatalf("root rebuilt from the entries %v, checkpoint %v", got, root)
		}
		for i := int64(0); i*256 < n; i++ {
			w := int(min(256, n-i*256))
			b, code := c.get(tilePath("0", i, w))
			if code != 200 || len(b) != 32*w {
				t.Fatalf("leaf tile %d: %d, %d bytes", i, code, len(b))
			}
			for j := range w {
				if xtlog.Hash(b[32*j:32*j+32]) != leaves[int(i)*256+j] {
					t.Fatalf("leaf tile %d hash %d is not the entry's", i, j)
				}
			}
		}
		if n >= 256 {
			b, code := c.get(tilePath("1", 0, int(n/256)))
			if code != 200 || xtlog.Hash(b[:32]) != mth(leaves[:256]) {
				t.Fatalf("level-1 tile: %d, first hash is not the first 256 leaves' tree", code)
			}
		}
		tree := xtlog.Tree{N: n, Hash: root}
		hr := xtlog.TileHashReader(tree, tileReader{c})
		for range 20 {
			i := rand.Int64N(n)
			p, err := xtlog.ProveRecord(n, i, hr)
			if err != nil {
				t.Fatalf("prove record %d: %v", i, err)
			}
			if err := xtlog.CheckRecord(p, n, root, i, leaves[i]); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			wrong := leaves[(i+1)%n]
			if xtlog.CheckRecord(p, n, root, i, wrong) == nil {
				t.Fatalf("record %d's proof holds for another entry", i)
			}
		}
		return n, root
	}
	n1, root1 := check()

	appendRecords(t, st, 77)
	if _, err := l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	n2, root2 := check()
	if n2 != 377 {
		t.Fatalf("second checkpoint size %d", n2)
	}
	p, err := xtlog.ProveTree(n2, n1, xtlog.TileHashReader(xtlog.Tree{N: n2, Hash: root2}, tileReader{c}))
	if err != nil {
		t.Fatal(err)
	}
	if err := xtlog.CheckTree(p, n2, root2, n1, root1); err != nil {
		t.Fatalf("checkpoints %d and %d are not consistent: %v", n1, n2, err)
	}
	if xtlog.CheckTree(p, n2, root2, n1, root2) == nil {
		t.Fatal("a consistency proof holds for a wrong old root")
	}

	// Beyond the tree, and malformed paths: not found.
	for _, path := range []string{tilePath("0", 1, 200), tilePath("entries", 2, 256), "/log/tile/0/001",
		"/log/tile/0/x000/001", "/log/tile/0/000.p/0", "/log/tile/0/000.p/256", "/log/tile/64/000", "/log/tile/00/000"} {
		if _, code := c.get(path); code != 404 {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
}

// TestCheckpointFollowsTheKey: a checkpoint left by another key is
// signed anew by the log's key, and an idle log signs nothing new.
func TestCheckpointFollowsTheKey(t *testing.T) {
	ctx := context.Background()
	st := pgtest.NewStore(t)
	appendRecords(t, st, 3)
	a, b := newLog(t, st, 1), newLog(t, st, 2)
	if _, err := a.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	_, first, _ := st.Checkpoint(ctx)
	if _, err := a.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, again, _ := st.Checkpoint(ctx); !bytes.Equal(first, again) {
		t.Fatal("an idle log signed a new checkpoint")
	}
	if _, err := b.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	_, second, _ := st.Checkpoint(ctx)
	if _, err := tlog.OpenCheckpoint(second, b.Key().VerifierKey()); err != nil {
		t.Fatalf("checkpoint after the key changed: %v", err)
	}
	if _, err := tlog.OpenCheckpoint(second, a.Key().VerifierKey()); err == nil {
		t.Fatal("the new checkpoint verifies with the old key")
	}
}

// TestNodesIntegrateConcurrently: several nodes' signers over one
// database, integrating while records arrive, build one tree: every
// record in order, and the final root is the tree of all of them.
func TestNodesIntegrateConcurrently(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := pgtest.NewStore(t)
	nodes := []*tlog.Log{newLog(t, st, 1), newLog(t, st, 1), newLog(t, st, 1)}
	done := make(chan struct{})
	for _, n := range nodes {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				if _, err := n.Integrate(ctx); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 20 {
		appendRecords(t, st, 13)
	}
	cancel()
	for range nodes {
		<-done
	}
	n, err := nodes[0].Integrate(context.Background())
	if err != nil || n != 260 {
		t.Fatalf("tree of %d, %v", n, err)
	}
	_, signed, _ := st.Checkpoint(context.Background())
	c, err := tlog.OpenCheckpoint(signed, nodes[0].Key().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Log(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var tree tlog.MemTree
	for _, e := range recs {
		if err := tree.Append(e.ComputeHash()); err != nil {
			t.Fatal(err)
		}
	}
	if root, _ := tree.Root(260); root != c.Root {
		t.Fatal("the tree the nodes built is not the tree of the records")
	}
}

// TestRunSignsSoonAfterNotify: the background signer signs a checkpoint
// covering an append it is told of.
func TestRunSignsSoonAfterNotify(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := pgtest.NewStore(t)
	key, _ := tlog.NewKey("kith.test/log", make([]byte, tlog.SeedSize))
	l := tlog.New(st, key, tlog.Options{Interval: 50 * time.Millisecond})
	go l.Run(ctx)
	appendRecords(t, st, 5)
	l.Notify()
	testkit.Eventually(t, 30*time.Second, "a checkpoint of the appended records", func() bool {
		n, _, err := st.Checkpoint(ctx)
		return err == nil && n == 5
	})
}
