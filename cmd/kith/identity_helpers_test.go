package main

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
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/web/api"
)

// apiServer is the identity API over a fresh store, in-process.
type apiServer struct {
	t     testing.TB
	srv   *httptest.Server
	store *postgres.Store
	dbURL string
	// tlog is the server's transparency log; integrate signs what was
	// appended without waiting for the background signer.
	tlog *tlog.Log
	svc  *identity.Service
	api  *api.Handler
	ctx  context.Context
}

// reopenLog builds the transparency log anew from the store (its key
// read again) and serves it, with the API, at a new a.srv.
func (a *apiServer) reopenLog() {
	a.t.Helper()
	l, lh, err := newTransparencyLog(a.ctx, defaultConfig(), a.store, a.svc, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		a.t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.api.Register(mux)
	lh.Register(mux)
	a.srv = httptest.NewServer(mux)
	a.t.Cleanup(a.srv.Close)
	a.tlog = l
}

// integrate has the log's tree cover every record and returns its size.
func (a *apiServer) integrate() int64 {
	a.t.Helper()
	n, err := a.tlog.Integrate(context.Background())
	if err != nil {
		a.t.Fatal(err)
	}
	return n
}

// testHostPolicy lets the tests' servers publish host keys for the names
// below example.test.
func testHostPolicy(t testing.TB) identity.HostPolicy {
	t.Helper()
	p, err := identity.ParseHostPolicy([]string{"*.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newAPIServer(t testing.TB) *apiServer {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	svc, err := newIdentityService(st, "Kith test", testHostPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(ctx, api.Options{Service: svc, Keys: st, Watcher: st})
	if err != nil {
		t.Fatal(err)
	}
	a := &apiServer{t: t, store: st, dbURL: dbURL, svc: svc, api: h, ctx: ctx}
	a.reopenLog()
	return a
}

func (a *apiServer) post(path string, in any) {
	a.t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(a.srv.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		a.t.Fatalf("POST %s: %s: %s", path, resp.Status, raw)
	}
}

func (a *apiServer) challenge(handle, factor, purpose string) string {
	a.t.Helper()
	b, _ := json.Marshal(api.ChallengeRequest{Handle: handle, Factor: factor, Purpose: purpose})
	resp, err := http.Post(a.srv.URL+"/api/v1/challenges", "application/json", bytes.NewReader(b))
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var c api.ChallengeResponse
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 201 {
		a.t.Fatalf("challenge: %s %v", resp.Status, err)
	}
	return c.Statement
}

// claim claims handle with key.
func (a *apiServer) claim(handle string, key sshKeyPair) {
	a.t.Helper()
	s := a.challenge(handle, key.pub, "claim")
	a.post("/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: s, Signature: key.sign(a.t, s)}})
}

// add links key to handle with by's consent; without its own signature
// when claimOnly.
func (a *apiServer) add(handle string, key, by sshKeyPair, claimOnly bool) {
	a.t.Helper()
	s := a.challenge(handle, key.pub, "add")
	req := api.AddRequest{Statement: s, By: by.pub, BySignature: by.sign(a.t, s)}
	if !claimOnly {
		req.Signature = key.sign(a.t, s)
	}
	a.post("/api/v1/identities/"+handle+"/factors", req)
}

// revoke unlinks key from handle, signed by by.
func (a *apiServer) revoke(handle string, key, by sshKeyPair) {
	a.t.Helper()
	s := a.challenge(handle, key.pub, "revoke")
	a.post("/api/v1/identities/"+handle+"/revocations", api.RevokeRequest{Statement: s, By: by.pub, Signature: by.sign(a.t, s)})
}

type sshKeyPair struct{ path, pub string }

func newSSHKeyPair(t testing.TB, dir, name string) sshKeyPair {
	t.Helper()
	path := filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return sshKeyPair{path: path, pub: strings.TrimSpace(string(pub))}
}

func (k sshKeyPair) sign(t testing.TB, msg string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "msg")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(msg)
	f.Close()
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", "kith", "-f", k.path, f.Name()).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(f.Name() + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return string(sig)
}

// kithCmd runs a kith command in-process and returns stdout, stderr and
// the error.
func kithCmd(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	env := &environment{stdout: &out, stderr: &errb, environ: os.Environ()}
	err := run(context.Background(), env, args)
	return out.String(), errb.String(), err
}
