package hkp

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/node"
)

// pqcKeys are the keys of the v6 and post-quantum tests: Dana has a v4
// key with an ML-KEM-768+X25519 subkey beside its cv25519 one and a v6
// ML-DSA-65+Ed25519 key, under one address; Erin has only a v6
// ML-DSA-87+Ed448 key.
type pqcKeys struct {
	v4, v6, erin          *openpgp.Entity
	v4Bin, v6Bin, erinBin []byte
}

func newPQCKeys(t *testing.T) pqcKeys {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(kind keygen.Kind, name, email string, seed int64) (*openpgp.Entity, []byte) {
		e, err := keygen.NewKey(kind, name, email, at, seed)
		if err != nil {
			t.Fatal(err)
		}
		return e, binaryKey(t, e)
	}
	var k pqcKeys
	k.v4, k.v4Bin = mk(keygen.V4MLKEMSubkey, "Dana Quantum", "dana@example.org", 1)
	k.v6, k.v6Bin = mk(keygen.V6MLDSA65, "Dana Quantum", "dana@example.org", 2)
	k.erin, k.erinBin = mk(keygen.V6MLDSA87, "Erin Sechs", "erin@example.org", 3)
	return k
}

func fprOf(e *openpgp.Entity) string {
	return strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}

// readArmoredKeys reads an answer with go-crypto, which reads v6 keys.
func readArmoredKeys(t *testing.T, body string) openpgp.EntityList {
	t.Helper()
	el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(body))
	if err != nil {
		t.Fatalf("go-crypto cannot read the answer: %v\n%s", err, body)
	}
	return el
}

// TestGPGImportsWhatItReadsOfV6AndPQCKeys: gpg 2.2 refuses a whole
// import at a v6 packet; the legacy lookup leaves v6 keys out of answers
// that hold a key gpg reads, so gpg imports the v4 key (with its
// post-quantum subkey, which gpg keeps as an unknown algorithm), and sends
// an answer of v6 keys whole, for clients that read them.
func TestGPGImportsWhatItReadsOfV6AndPQCKeys(t *testing.T) {
	ks := newPQCKeys(t)
	ts := newTestServerOn(t, pgtest.NewStore(t), Options{})
	ts.mustAdd(armored(t, ks.v4Bin, ks.v6Bin, ks.erinBin))
	if n := ts.keyCount(); n != 3 {
		t.Fatalf("%d keys stored, want 3", n)
	}
	u, _ := url.Parse(ts.url)
	v4, v6, erin := fprOf(ks.v4), fprOf(ks.v6), fprOf(ks.erin)

	// Why the rule exists: the v4 key and the v6 key in one answer make gpg
	// import neither.
	g := newGPGHome(t, u.Host)
	if _, errOut, err := tryGPG(g, armored(t, ks.v4Bin, ks.v6Bin), "--import"); err == nil || !strings.Contains(errOut, "unknown version 6") {
		t.Fatalf("gpg imported an answer holding a v6 key (err %v):\n%s", err, errOut)
	}
	if got := g.colons(); strings.Contains(got, v4) {
		t.Fatalf("gpg took the v4 key from a refused import:\n%s", got)
	}

	// By fingerprint: the v4 key, its ML-KEM subkey included.
	g.run("", "--recv-keys", v4)
	got := g.colons(v4)
	var subAlgos []string
	for _, l := range strings.Split(got, "\n") {
		if f := strings.Split(l, ":"); f[0] == "sub" && len(f) > 4 {
			subAlgos = append(subAlgos, f[3])
		}
	}
	if !strings.Contains(got, "Dana Quantum") || strings.Join(subAlgos, ",") != "18,35" {
		t.Fatalf("gpg's listing of the v4 key, subkey algorithms %v, want the cv25519 (18) and the ML-KEM-768+X25519 (35):\n%s", subAlgos, got)
	}

	// gpg encrypts to the cv25519 subkey, not the one it cannot use.
	enc := g.run("hello\n", "--trust-model", "always", "--armor", "--encrypt", "--recipient", v4)
	cv25519 := strings.ToUpper(hex.EncodeToString(ks.v4.Subkeys[0].PublicKey.Fingerprint[12:]))
	if pk, _, _ := tryGPG(g, enc, "--list-packets"); !strings.Contains(string(pk), "algo 18, keyid "+cv25519) {
		t.Errorf("gpg did not encrypt to the cv25519 subkey %s:\n%s", cv25519, pk)
	}

	// By address, where the store holds both of Dana's keys: gpg locates
	// the v4 one; the answer carries no v6 key.
	g2 := newGPGHome(t, u.Host)
	g2.run("", "--auto-key-locate", "clear,keyserver", "--locate-external-keys", "dana@example.org")
	if got := g2.colons(); !strings.Contains(got, v4) || strings.Contains(got, v6) {
		t.Fatalf("gpg --locate-external-keys:\n%s", got)
	}
	r := ts.lookup("op=get&options=mr&search=dana@example.org")
	if r.code != 200 || r.header.Get("X-HKP-Results-Count") != "1" {
		t.Fatalf("get by address: %d, %s keys", r.code, r.header.Get("X-HKP-Results-Count"))
	}
	if el := readArmoredKeys(t, r.body); len(el) != 1 || el[0].PrimaryKey.Version != 4 {
		t.Fatalf("get by address answers %d keys, the first v%d", len(el), el[0].PrimaryKey.Version)
	}

	// A v6 key asked for by its fingerprint, or an address with only v6
	// keys, is sent whole: a v6 reader gets every packet as stored.
	for _, q := range []string{"0x" + v6, "0x" + erin, "erin@example.org"} {
		r := ts.lookup("op=get&options=mr&search=" + url.QueryEscape(q))
		if r.code != 200 {
			t.Fatalf("get %s: %d %s", q, r.code, r.body)
		}
		el := readArmoredKeys(t, r.body)
		want := ks.v6Bin
		if q != "0x"+v6 {
			want = ks.erinBin
		}
		if len(el) != 1 || el[0].PrimaryKey.Version != 6 || len(el[0].Subkeys) != 1 {
			t.Fatalf("get %s: %d keys", q, len(el))
		}
		if sub := el[0].Subkeys[0].PublicKey.PubKeyAlgo; sub != packet.PubKeyAlgoMlkem768X25519 && sub != packet.PubKeyAlgoMlkem1024X448 {
			t.Errorf("get %s: subkey of algorithm %d", q, sub)
		}
		k, err := pgp.ParseKey(want)
		if err != nil {
			t.Fatal(err)
		}
		sent := dearmor(t, r.body)
		applied, _, err := pgp.Policy{}.Apply(k)
		if err != nil || !bytes.Equal(sent, applied.Bytes()) {
			t.Errorf("get %s: the key sent is not the key uploaded (err %v)", q, err)
		}
	}
	// gpg asked for such a key imports nothing, as it would from any
	// answer holding it, and keeps what it has.
	if _, err := g.Try("--recv-keys", erin); err == nil {
		t.Error("gpg 2.2 imported a v6 key")
	}
	if got := g.colons(); !strings.Contains(got, v4) {
		t.Errorf("gpg lost the v4 key:\n%s", got)
	}
}

// TestSQGetsKeysWhole: sq reads the answers whole. The sq here (0.27,
// sequoia-openpgp 1.x) reads v4 keys, their ML-KEM subkeys ignored as an
// unknown algorithm, but no v6 key ("Unsupported primary key"); where an sq
// that reads v6 keys is installed, it gets the v6 key whole too.
func TestSQGetsKeysWhole(t *testing.T) {
	sq := testkit.Tool(t, "sq")
	ks := newPQCKeys(t)
	ts := newTestServerOn(t, pgtest.NewStore(t), Options{})
	ts.mustAdd(armored(t, ks.v4Bin, ks.v6Bin, ks.erinBin))
	u, _ := url.Parse(ts.url)
	get := func(fpr string) ([]byte, error) {
		c := exec.Command(sq, "keyserver", "--policy", "insecure", "--server", "hkp://"+u.Host, "get", fpr)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			return nil, &exec.ExitError{Stderr: errb.Bytes()}
		}
		return out.Bytes(), nil
	}
	out, err := get(fprOf(ks.v4))
	if err != nil {
		t.Fatalf("sq keyserver get of the v4 key: %s", err.(*exec.ExitError).Stderr)
	}
	if el := readArmoredKeys(t, string(out)); len(el) != 1 || len(el[0].Subkeys) != 2 {
		t.Fatalf("sq got %d keys; want the v4 key with both subkeys", len(el))
	}

	// Does this sq read v6 keys at all?
	probe := exec.Command(sq, "inspect")
	probe.Stdin = bytes.NewReader(ks.erinBin)
	if b, err := probe.CombinedOutput(); err != nil {
		t.Skipf("this sq reads no v6 key, so it cannot be asked for one: %s", bytes.TrimSpace(b))
	}
	out, err = get(fprOf(ks.v6))
	if err != nil {
		t.Fatalf("sq keyserver get of the v6 key: %s", err.(*exec.ExitError).Stderr)
	}
	if el := readArmoredKeys(t, string(out)); len(el) != 1 || el[0].PrimaryKey.Version != 6 || len(el[0].Subkeys) != 1 {
		t.Fatalf("sq got %d keys; want the v6 key whole", len(el))
	}
}

// tryGPG runs gpg in g with stdin and returns its outputs, failing or not
// (--list-packets of a message to someone else's key fails, having listed
// it).
func tryGPG(g gpgHome, stdin string, args ...string) ([]byte, string, error) {
	c := exec.Command("gpg", append([]string{"--batch", "--yes", "--no-tty"}, args...)...)
	c.Env = g.Env()
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	return out.Bytes(), errb.String(), err
}

// dearmor returns the keys of an armored answer, binary.
func dearmor(t *testing.T, s string) []byte {
	t.Helper()
	ks, err := pgp.ReadKeys(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, k := range ks {
		all = append(all, k.Bytes()...)
	}
	return all
}

// TestReconFetchCarriesPQCKeys: /pks/hashquery answers v6 and post-quantum
// keys whole (an SLH-DSA-SHAKE-256s key of 150 KB among them), and a peer
// that fetches them through recon's fetcher and the one upload path
// stores each with the digest the recon tree asked for.
func TestReconFetchCarriesPQCKeys(t *testing.T) {
	ctx := context.Background()
	fixtures, err := filepath.Glob(filepath.Join("..", "pgp", "testdata", "pqc", "*.pgp"))
	if err != nil || len(fixtures) != 7 {
		t.Fatalf("pgp/testdata/pqc: %d keys (%v)", len(fixtures), err)
	}
	ts := newTestServerOn(t, pgtest.NewStore(t), Options{})
	var digests [][16]byte
	for _, f := range fixtures {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ts.mustAdd(armored(t, b))
		k, _ := pgp.ParseKey(b)
		applied, _, err := pgp.Policy{}.Apply(k)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, applied.Digest())
	}

	peer := pgtest.NewStore(t)
	log := quietLogger()
	f := recon.NewHashQueryFetcher(node.StoreFetched(peer, keys.NewService(peer, keys.Options{Policy: pgp.DefaultPolicy(), Logger: log}), log), log)
	res, err := f.Fetch(ctx, recon.Peer{HTTP: ts.url}, digests)
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != 7 || res.Stored != 7 || res.Changed != 0 {
		t.Fatalf("fetch: %+v", res)
	}
	for _, d := range digests {
		ks, _, err := peer.FindKeys(ctx, keys.Query{Digests: [][16]byte{d}})
		if err != nil || len(ks) != 1 {
			t.Errorf("digest %s: %d keys on the peer (%v)", pgp.FormatDigest(d), len(ks), err)
		}
	}
}
