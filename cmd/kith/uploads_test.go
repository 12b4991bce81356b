package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/cmd/internal/settings"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/subprocess"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/web/api"
)

// addKeyText posts armored keys to the server's /pks/add and returns the
// status and answer.
func addKeyText(t *testing.T, addr string, armored []byte) (int, string) {
	t.Helper()
	resp, err := http.PostForm("http://"+addr+"/pks/add", url.Values{"keytext": {string(armored)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUploadPolicyThroughTheBinary: with hkp.uploads = "identities" an
// unproven key is refused with the reason and a key proven for an
// identity is accepted (its update merges); with "off" every upload is
// refused, proven or not.
func TestUploadPolicyThroughTheBinary(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	ids := startServe(t, tempDir(t), nil, "--database-url", dbURL, "--hkp-uploads", "identities")
	// The same setting from the environment: KITH_HKP_UPLOADS.
	mirror := startServeEnv(t, []string{"KITH_HKP_UPLOADS=off"}, "--database-url", dbURL)
	ids.waitHealth(t, http.StatusOK, time.Minute)
	mirror.waitHealth(t, http.StatusOK, time.Minute)

	g := gpgtest.New(t)
	stranger := g.NewKey("Stranger <stranger@example.org>", "sign")
	member := g.NewKey("Member <member@example.org>", "sign")
	code, body := addKeyText(t, ids.addr, g.Run("", "--export", "--armor", stranger))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "accepts only keys proven for one of its identities") {
		t.Fatalf("unproven upload under identities: %d %s", code, body)
	}
	if servedPackets(t, ids.addr, stranger) != nil {
		t.Fatal("the refused key is served")
	}

	// The operator loads the member's key; the member proves it.
	file := filepath.Join(t.TempDir(), "member.asc")
	os.WriteFile(file, g.Run("", "--export", "--armor", member), 0o644)
	kithExec(t, "load", "--database-url", dbURL, file)
	var ch api.ChallengeResponse
	if c := postJSON(t, "http://"+ids.addr+"/api/v1/challenges", api.ChallengeRequest{Handle: "member", Factor: member, Purpose: "claim"}, &ch); c != http.StatusCreated {
		t.Fatalf("claim challenge: %d", c)
	}
	sig := string(g.Run(ch.Statement, "--local-user", member, "--clearsign", "--output", "-"))
	if c := postJSON(t, "http://"+ids.addr+"/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: ch.Statement, Signature: sig}}, nil); c != http.StatusCreated {
		t.Fatalf("claim: %d", c)
	}
	// Its update (a new subkey) is accepted.
	g.Run("", "--quick-add-key", member, "cv25519", "encr", "0")
	code, body = addKeyText(t, ids.addr, g.Run("", "--export", "--armor", member))
	if code != http.StatusOK || !strings.Contains(body, "1 updated") {
		t.Fatalf("proven upload under identities: %d %s", code, body)
	}
	if n := len(servedPackets(t, ids.addr, member)); n != 5 {
		t.Fatalf("the proven key's update: %d packets served, want 5", n)
	}

	// The mirror refuses both, saying why.
	for _, fpr := range []string{stranger, member} {
		code, body := addKeyText(t, mirror.addr, g.Run("", "--export", "--armor", fpr))
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "read-only mirror") {
			t.Fatalf("upload to the mirror: %d %s", code, body)
		}
	}
	if _, errOut, err := kithExecErr(t, "serve", "--hkp-uploads", "sometimes"); err == nil || !strings.Contains(errOut, "setting hkp.uploads") {
		t.Fatalf("a bad hkp.uploads: %v %s", err, errOut)
	}
}

// startServeEnv is startServe (in a fresh directory) with extra
// environment variables.
func startServeEnv(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	dir := tempDir(t)
	addr := testkit.FreeAddr(t)
	cmd := exec.Command(kithBinary(t), append([]string{"serve", "--listen", addr, "--recon-listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	s := &server{cmd: cmd, addr: addr, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := subprocess.Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
	})
	return s
}

// TestReconFollowsTheUploadPolicy: recon fetches pass the same check as
// uploads: under "identities" a node takes a peer's update of a proven
// key and refuses an unproven key; under "off" it takes nothing.
func TestReconFollowsTheUploadPolicy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := gpgtest.New(t)
	member := g.NewKey("Member <member@example.org>", "sign")
	stranger := g.NewKey("Stranger <stranger@example.org>", "sign")
	parse := func(b []byte) *pgp.Key {
		k, err := pgp.ParseKey(b)
		if err != nil {
			t.Fatal(err)
		}
		k, _, err = pgp.DefaultPolicy().Apply(k)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	old := parse(g.Run("", "--export", member))
	g.Run("", "--quick-add-key", member, "cv25519", "encr", "0")
	updated := parse(g.Run("", "--export", member))
	strangerKey := parse(g.Run("", "--export", stranger))

	for _, policy := range []keys.UploadPolicy{keys.UploadsIdentities, keys.UploadsOff} {
		t.Run(string(policy), func(t *testing.T) {
			peer := newReconNode(t, ctx, []*pgp.Key{updated, strangerKey})
			local := newReconNode(t, ctx, []*pgp.Key{old})
			svc, err := newIdentityService(local.store, "Kith test", identity.HostPolicy{})
			if err != nil {
				t.Fatal(err)
			}
			fp, _ := identity.ParsePGPFingerprint(member)
			c, err := svc.IssueChallenge(ctx, identity.PurposeClaim, "member", fp)
			if err != nil {
				t.Fatal(err)
			}
			sig := g.Run(string(c.Statement), "--local-user", member, "--clearsign", "--output", "-")
			if _, err := svc.Claim(ctx, identity.ClaimRequest{Statement: c.Statement, Proof: identity.Proof{Signature: sig}}); err != nil {
				t.Fatal(err)
			}
			cfg := defaultConfig()
			cfg.Recon.Interval = settings.Duration(time.Hour)
			cfg.Recon.Peers = []ReconPeer{{Address: peer.reconLn.Addr().String(), HTTP: peer.http.URL}}
			ks := keys.NewService(local.store, keys.Options{Policy: pgp.DefaultPolicy(), Uploads: policy, Identities: svc,
				Logger: slog.New(slog.DiscardHandler)})
			m, err := startRecon(ctx, cfg, local.store, ks, local.reconLn,
				local.http.Listener.Addr().String(), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			peer.start(t, ctx, local.reconLn.Addr().String(), local.http.URL)
			_, fetched, err := m.ReconcileWith(ctx, recon.Peer{Address: peer.reconLn.Addr().String(), HTTP: peer.http.URL})
			if err != nil {
				t.Fatal(err)
			}
			served := func(k *pgp.Key) [16]byte {
				keys, _, err := local.store.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint(), Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(keys) == 0 {
					return [16]byte{}
				}
				return keys[0].Digest
			}
			switch policy {
			case keys.UploadsIdentities:
				if fetched.Stored != 1 || fetched.Rejected != 1 || served(updated) != updated.Digest() || served(strangerKey) != ([16]byte{}) {
					t.Fatalf("identities: fetched %+v; want the proven update stored and the stranger refused", fetched)
				}
			case keys.UploadsOff:
				if fetched.Stored != 0 || fetched.Rejected != 2 || served(updated) != old.Digest() || served(strangerKey) != ([16]byte{}) {
					t.Fatalf("off: fetched %+v; want nothing stored", fetched)
				}
			}
		})
	}
}
