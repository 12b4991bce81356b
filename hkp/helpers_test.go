package hkp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testTime is the creation time of test keys.
var testTime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

// testServer is a Handler on a real store behind a loopback HTTP server,
// with Run listening.
type testServer struct {
	t     *testing.T
	store keys.Store
	keys  *keys.Service
	h     *Handler
	url   string
	// changes counts the key changes this server's uploads made, so that
	// tests can wait for their notifications.
	changes int64
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newTestServer starts a server on a fresh in-memory key store
// (identity/keys/inprocess); the tests of what PostgreSQL adds (other
// nodes' notifications, verified emails) start theirs on a database with
// newTestServerOn.
func newTestServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	return newTestServerOn(t, inprocess.New(inprocess.Options{}), opts)
}

// newTestServerOn starts a server on st, with uploads through a keys
// Service over st (the default key policy, open uploads) that tells the
// Handler of its writes, as kith serve wires them.
func newTestServerOn(t *testing.T, st keys.Store, opts Options) *testServer {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Logger: opts.Logger})
	h := NewHandler(st, ks, opts)
	ks.Subscribe(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	testkit.Eventually(t, 10*time.Second, "the handler listening to key changes", h.Listening)
	return &testServer{t: t, store: st, keys: ks, h: h, url: srv.URL}
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   string
}

func (ts *testServer) do(req *http.Request) response {
	ts.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return response{code: res.StatusCode, header: res.Header, body: string(b)}
}

// lookup GETs /pks/lookup with the given query string.
func (ts *testServer) lookup(query string) response {
	ts.t.Helper()
	req, err := http.NewRequest("GET", ts.url+"/pks/lookup?"+query, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	return ts.do(req)
}

// add POSTs keytext as a form, as gpg does.
func (ts *testServer) add(keytext string, header ...string) response {
	ts.t.Helper()
	req, err := http.NewRequest("POST", ts.url+"/pks/add", strings.NewReader(url.Values{"keytext": {keytext}}.Encode()))
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return ts.do(req)
}

// mustAdd uploads keytext, fails unless the answer is 200, and waits
// until the notifications of the changes it made have come back.
func (ts *testServer) mustAdd(keytext string) response {
	ts.t.Helper()
	r := ts.add(keytext)
	if r.code != http.StatusOK {
		ts.t.Fatalf("add: %d %s", r.code, r.body)
	}
	var ins, upd int64
	if _, err := fmt.Sscanf(r.body, "%d inserted, %d updated", &ins, &upd); err != nil {
		ts.t.Fatalf("add answer %q: %v", r.body, err)
	}
	ts.changes += ins + upd
	testkit.Eventually(ts.t, 10*time.Second, "notifications of the upload", func() bool { return ts.h.changes.Load() >= ts.changes })
	return r
}

// keyCount returns the number of stored keys.
func (ts *testServer) keyCount() int64 {
	ts.t.Helper()
	st, err := ts.store.KeyStats(context.Background())
	if err != nil {
		ts.t.Fatal(err)
	}
	return st.Keys
}

// newEntity makes a deterministic Ed25519 key (with a cv25519 subkey).
func newEntity(t testing.TB, name, email string, seed int64) *openpgp.Entity {
	t.Helper()
	e, err := keygen.NewEd25519(name, email, testTime, seed)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// laterConfig signs at testTime plus d.
func laterConfig(d time.Duration) *packet.Config {
	at := testTime.Add(d)
	return &packet.Config{Time: func() time.Time { return at }, Algorithm: packet.PubKeyAlgoEdDSA, Curve: packet.Curve25519}
}

// binaryKey serializes e's public key.
func binaryKey(t testing.TB, e *openpgp.Entity) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// armored armors binary keys.
func armored(t testing.TB, bins ...[]byte) string {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range bins {
		w.Write(bin)
	}
	w.Close()
	return b.String()
}

// fpHex is e's fingerprint in upper-case hex.
func fpHex(e *openpgp.Entity) string {
	return fmt.Sprintf("%X", e.PrimaryKey.Fingerprint)
}

// newPacket frames body with a new-format header.
func newPacket(tag pgp.Tag, body []byte) []byte {
	b := []byte{0xc0 | byte(tag)}
	switch n := len(body); {
	case n < 192:
		b = append(b, byte(n))
	case n < 8384:
		n -= 192
		b = append(b, byte(n>>8)+192, byte(n))
	default:
		b = append(b, 255, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, body...)
}

// benchStore is a fresh store for a benchmark.
func benchStore(b *testing.B) keys.Store { return pgtest.NewStore(b) }

// mustApply parses bin and applies the default policy.
func mustApply(t testing.TB, bin []byte) *pgp.Key {
	t.Helper()
	k, err := pgp.ParseKey(bin)
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	return applied
}
