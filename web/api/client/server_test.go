package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
	"github.com/kith-keyserver/kith/web/api/client"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// server is what kith serve puts behind one port, in-process: the
// identity API, HKP and the transparency log over a fresh store, with an
// SSH user CA.
type server struct {
	t     *testing.T
	url   string
	store *postgres.Store
	dbURL string
	log   *tlog.Log
	// svc, keys and mux let a test mount another frontend.
	svc  *identity.Service
	keys *keys.Service
	mux  *http.ServeMux
}

// testCASeed is the seed of the test server's SSH user CA.
var testCASeed = bytes.Repeat([]byte{0x15}, ssh.CASeedSize)

func newServer(t *testing.T) *server { t.Helper(); return newServerCA(t, true) }

// newServerCA is newServer, with an SSH user CA only when withCA.
func newServerCA(t *testing.T, withCA bool) *server {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	policy := pgp.DefaultPolicy()
	st, err := postgres.Open(ctx, dbURL, postgres.Options{Policy: &policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	hosts, err := identity.ParseHostPolicy([]string{"*.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ssh.NewCA(testCASeed)
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	opts := identity.ServiceOptions{Server: "Kith test", Hosts: hosts}
	if withCA {
		opts.CA = verify.CertificateAuthority{CA: ca}
	}
	svc, err := identity.NewService(st, &verify.Verifier{Keys: st}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := api.NewHandler(ctx, api.Options{Service: svc, Keys: st, Tree: st})
	if err != nil {
		t.Fatal(err)
	}
	ks := keys.NewService(st, keys.Options{Policy: policy, Identities: svc, Logger: discard})
	keyHandler := hkp.NewHandler(st, ks, hkp.Options{Logger: discard})
	ks.Subscribe(keyHandler)
	go keyHandler.Run(ctx)
	key, err := tlog.NewKey("kith.test/log", bytes.Repeat([]byte{7}, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	keyHandler.Register(mux)
	ids.Register(mux)
	tlog.NewHandler(st, key.VerifierKey(), discard).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &server{t: t, url: srv.URL, store: st, dbURL: dbURL, log: tlog.New(st, key, tlog.Options{Logger: discard}),
		svc: svc, keys: ks, mux: mux}
}

// client is a client of s whose tools run in env.
func (s *server) client() *client.Client {
	s.t.Helper()
	c, err := client.New(s.url, client.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// integrate has the log's tree cover every record and returns its size.
func (s *server) integrate() int64 {
	s.t.Helper()
	n, err := s.log.Integrate(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// exec runs SQL on the store's database, as an operator (or an attacker
// with the database) would.
func (s *server) exec(sql string, args ...any) {
	s.t.Helper()
	conn, err := pgx.Connect(context.Background(), s.dbURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		s.t.Fatal(err)
	}
}

// rewriteRecord edits the label of record seq in the database and
// recomputes the hash chain after it, so that the chain holds.
func (s *server) rewriteRecord(seq int64, label string) {
	s.t.Helper()
	recs, err := s.store.Log(context.Background(), 0, 10000)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := seq - 1; i < int64(len(recs)); i++ {
		if i == seq-1 {
			recs[i].Label = label
		}
		recs[i].Seal(recs[i-1].Seq, recs[i-1].Hash)
		s.exec("UPDATE evidence SET label = $1, prev_hash = $2, hash = $3 WHERE seq = $4", recs[i].Label, recs[i].PrevHash, recs[i].Hash, recs[i].Seq)
	}
	last := recs[len(recs)-1]
	s.exec("UPDATE evidence_head SET seq = $1, hash = $2", last.Seq, last.Hash)
}

// rebuildTree has the operator throw the tree away and sign it anew over
// the records as they now are, with the same key.
func (s *server) rebuildTree() {
	s.t.Helper()
	s.exec("DELETE FROM tlog_hashes")
	s.exec("UPDATE tlog_head SET size = 0, checkpoint = NULL")
	s.integrate()
}

// records is the number of records in the log.
func (s *server) records() int {
	s.t.Helper()
	recs, err := s.store.Log(context.Background(), 0, 10000)
	if err != nil {
		s.t.Fatal(err)
	}
	return len(recs)
}

// get fetches path and returns the answer's body.
func (s *server) get(path string) string {
	s.t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

// user is a person at a shell: a home with ~/.ssh and a gpg home, the
// environment the signing tools run in.
type user struct {
	t     *testing.T
	home  string
	gpg   *gpgtest.Home
	tools *client.Tools
}

func newUser(t *testing.T) *user {
	t.Helper()
	testkit.Tool(t, "ssh-keygen")
	u := &user{t: t, home: t.TempDir(), gpg: gpgtest.New(t)}
	if err := os.MkdirAll(filepath.Join(u.home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	u.tools = &client.Tools{Env: []string{"HOME=" + u.home, "GNUPGHOME=" + u.gpg.Dir, "PATH=" + os.Getenv("PATH")}}
	return u
}

// sshKey makes an ed25519 key pair in dir (the user's ~/.ssh when dir is
// empty) and returns it as a signer.
func (u *user) sshKey(dir, name string) client.Signer {
	u.t.Helper()
	if dir == "" {
		dir = filepath.Join(u.home, ".ssh")
	}
	path := filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
		u.t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	s, err := u.tools.SSHKey(context.Background(), path)
	if err != nil {
		u.t.Fatal(err)
	}
	return s
}

// pgpKey makes a signing OpenPGP key in the user's gpg and returns it as
// a signer.
func (u *user) pgpKey(uid string) client.Signer {
	u.t.Helper()
	s, err := u.tools.PGPKey(u.gpg.NewKey(uid, "sign"))
	if err != nil {
		u.t.Fatal(err)
	}
	return s
}

// post sends a JSON request and fails the test unless it succeeds.
func (s *server) post(path string, in any) {
	s.t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.Post(s.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		s.t.Fatalf("POST %s: %s: %s", path, resp.Status, body.String())
	}
}
