package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// clock is a settable clock for the service.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// kith is a running API over a fresh store.
type kith struct {
	t     *testing.T
	url   string
	h     *api.Handler
	store *postgres.Store
	// keys is the node's upload path of OpenPGP keys.
	keys  *keys.Service
	dbURL string
	clock *clock
}

const serverName = "Kith test <http://kith.test>"

// newKith serves the API over a fresh store, caching (its watcher is
// listening when newKith returns).
func newKith(t *testing.T) *kith {
	t.Helper()
	return newKithWith(t, api.Options{})
}

// newKithWith is newKith with opts (Service, Keys, Watcher and Now are
// filled in).
func newKithWith(t *testing.T, opts api.Options) *kith {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := &clock{}
	opts.Watcher, opts.Now = st, c.Now
	h, ks := newNode(ctx, t, st, opts)
	waitListening(t, h)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &kith{t: t, url: srv.URL, h: h, store: st, keys: ks, dbURL: dbURL, clock: c}
}

// testCASeed is the seed of every test node's SSH user CA: like the
// database's shared secret, one CA for all nodes.
var testCASeed = bytes.Repeat([]byte{0x15}, ssh.CASeedSize)

// testCA returns the test nodes' CA.
func testCA(t testing.TB) *ssh.CA {
	t.Helper()
	ca, err := ssh.NewCA(testCASeed)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// newHandler builds a node as kith serve does: one identity service over
// st and the API over it with opts (Service and Keys are filled in; it
// caches while opts.Watcher reports other nodes' appends; no Watcher: no
// cache). A nil opts.Now is time.Now.
func newHandler(ctx context.Context, t testing.TB, st *postgres.Store, opts api.Options) *api.Handler {
	t.Helper()
	h, _ := newNode(ctx, t, st, opts)
	return h
}

// newNode is newHandler that also returns the node's keys Service, the
// upload path whose writes refresh the links of the keys they change.
func newNode(ctx context.Context, t testing.TB, st *postgres.Store, opts api.Options) (*api.Handler, *keys.Service) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	svc, err := identity.NewService(st, &verify.Verifier{Keys: st}, identity.ServiceOptions{Server: serverName, Now: opts.Now, Hosts: testHosts(t),
		CA: verify.CertificateAuthority{CA: testCA(t)}})
	if err != nil {
		t.Fatal(err)
	}
	ks := keys.NewService(st, keys.Options{Policy: pgp.DefaultPolicy(), Identities: svc, Logger: slog.New(slog.DiscardHandler)})
	opts.Service, opts.Keys = svc, st
	h, err := api.NewHandler(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, ks
}

// testHosts is the host policy of the tests' servers: the names below
// example.test may be claimed as host identities.
func testHosts(t testing.TB) identity.HostPolicy {
	t.Helper()
	p, err := identity.ParseHostPolicy([]string{"*.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitListening waits until h's evidence watcher is listening, so that
// its lookups are cached (and dropped by other nodes' appends).
func waitListening(t testing.TB, h *api.Handler) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "the handler listening to evidence appends", h.Listening)
}

// call sends a JSON request and decodes the JSON answer into out (if not
// nil), returning the status and the error code, if any.
func (k *kith) call(method, path string, in, out any) (int, string) {
	k.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			k.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, k.url+path, body)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var e api.ErrorBody
		json.Unmarshal(raw, &e)
		return resp.StatusCode, e.Error.Code
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			k.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, ""
}

// get fetches a path and returns status and body.
func (k *kith) get(path string) (int, string) {
	k.t.Helper()
	resp, err := http.Get(k.url + path)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// challenge asks for a statement and fails the test on refusal.
func (k *kith) challenge(handle, factor, purpose string) string {
	k.t.Helper()
	var c api.ChallengeResponse
	if st, code := k.call("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: handle, Factor: factor, Purpose: purpose}, &c); st != 201 {
		k.t.Fatalf("challenge %s %s: %d %s", purpose, handle, st, code)
	}
	return c.Statement
}

// logLen returns the number of records in the log.
func (k *kith) logLen() int {
	k.t.Helper()
	var p api.LogPage
	k.call("GET", "/api/v1/log?limit=1000", nil, &p)
	return len(p.Records)
}

// sshKey is a key made by ssh-keygen.
type sshKey struct {
	path string // private key file
	pub  string // public key line
}

func newSSHKey(t testing.TB, dir, typ string) sshKey {
	t.Helper()
	testkit.Tool(t, "ssh-keygen")
	path := filepath.Join(dir, "id_"+strings.ReplaceAll(typ, "-", "")+"_"+randName())
	args := []string{"-q", "-t", typ, "-N", "", "-C", "test@" + typ, "-f", path}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return sshKey{path: path, pub: strings.TrimSpace(string(pub))}
}

var nameCounter struct {
	sync.Mutex
	n int
}

func randName() string {
	nameCounter.Lock()
	defer nameCounter.Unlock()
	nameCounter.n++
	return strings.Repeat("x", 0) + string(rune('a'+nameCounter.n%26)) + time.Now().Format("150405.000000000")
}

// sign signs msg with ssh-keygen -Y sign in namespace ns.
func (s sshKey) sign(t testing.TB, msg, ns string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(f, []byte(msg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", ns, "-f", s.path, f).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(f + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return string(sig)
}

// fields returns the type and base64 of a key line, without comment.
func keyOnly(line string) string {
	f := strings.Fields(line)
	return f[0] + " " + f[1]
}
