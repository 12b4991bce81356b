package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/hkp/wkd"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/proof"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/web/api"
	"github.com/kith-keyserver/kith/web/api/client"
)

// counting is a transport that counts the bytes of every answer: the
// status line and headers as they would go on the wire, and the body.
type counting struct {
	bytes, requests atomic.Int64
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s\r\n", resp.Proto, resp.Status)
	resp.Header.Write(&head)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	c.bytes.Add(int64(head.Len() + 2 + len(body)))
	c.requests.Add(1)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// appendFiller appends n records a key carries itself (an address in a
// user ID), in transactions of a few thousand: a log of strangers'
// records, cheaply, through the store.
func appendFiller(t *testing.T, srv *server, n int) {
	t.Helper()
	for done := 0; done < n; {
		batch := min(5000, n-done)
		err := srv.store.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
			for i := range batch {
				fp := sha256.Sum256(fmt.Appendf(nil, "filler %d", done+i))
				e := identity.Evidence{Method: identity.MethodPGPUIDSelfSig, From: identity.PGPFactor(fp[:20]),
					To:        identity.EmailFactor(fmt.Sprintf("f%d@example.org", done+i)),
					Statement: []byte("uid"), Signature: []byte("sig"), Created: time.Now()}
				if err := tx.Append(ctx, &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		done += batch
	}
}

// TestAuthorizedKeysWithLogKeyFetchesLogarithmicBytes: against a log of
// 100,000 records, authorized-keys --log-key checks alice's key with
// under 10 KB fetched per lookup (the first, and the next one, which
// proves the new checkpoint consistent with the last), where proving
// the same record from the log's tiles alone fetches far more.
func TestAuthorizedKeysWithLogKeyFetchesLogarithmicBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a log of 100,000 records")
	}
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	const filler = 100_000
	appendFiller(t, srv, filler/2)
	u := newUser(t)
	k := u.sshKey("", "alice")
	if _, err := srv.client().Claim(ctx, "alice", k); err != nil {
		t.Fatal(err)
	}
	appendFiller(t, srv, filler/2)
	size := srv.integrate()
	if size < filler {
		t.Fatalf("log of %d records", size)
	}

	var n counting
	c, err := client.New(srv.url, client.Options{Transport: &n})
	if err != nil {
		t.Fatal(err)
	}
	opts := client.KeysOptions{CacheDir: t.TempDir(), MaxAge: time.Hour, LogKey: srv.log.Key().VerifierKey(),
		Logger: slog.New(slog.DiscardHandler)}
	lookup := func(what string) int64 {
		t.Helper()
		before := n.bytes.Load()
		out, err := c.AuthorizedKeys(ctx, "alice", opts)
		if err != nil || !strings.Contains(string(out), k.Pub) {
			t.Fatalf("%s: %v %q", what, err, out)
		}
		got := n.bytes.Load() - before
		t.Logf("%s: %d bytes fetched, log of %d records", what, got, size)
		if got >= 10_000 {
			t.Errorf("%s: %d bytes fetched, want under 10 KB", what, got)
		}
		return got
	}
	first := lookup("first lookup")
	appendFiller(t, srv, 1000)
	size = srv.integrate()
	next := lookup("next lookup, with a consistency proof")

	// The baseline: the same record's inclusion proved from tiles.
	var tiles int64
	fetch := func(ctx context.Context, path string) ([]byte, error) {
		resp, err := http.Get(srv.url + "/log/" + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		tiles += int64(len(b))
		return b, err
	}
	_, signed, err := srv.store.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := tlog.OpenCheckpoint(signed, srv.log.Key().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := srv.store.Log(ctx, filler/2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.ProveInclusion(ctx, fetch, cp, recs[0].Seq-1, recs[0].ComputeHash()); err != nil {
		t.Fatal(err)
	}
	t.Logf("baseline: proving the record from tiles alone fetches %d bytes of tiles (%.1fx the first lookup, %.1fx the next)",
		tiles, float64(tiles)/float64(first), float64(tiles)/float64(next))
}

// TestCheckBundleRefusesForgeries: a bundle holds as served, and does not
// when its checkpoint is signed by another key, a proof hash is changed,
// a record is swapped for another identity's (verified and in the log,
// but not linking the key to alice), a record is edited, or the
// checkpoint is not consistent with the one seen before.
func TestCheckBundleRefusesForgeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	dir := t.TempDir()
	ka, kb := u.sshKey(dir, "alice"), u.sshKey(dir, "bob")
	if _, err := c.Claim(ctx, "alice", ka); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "bob", kb); err != nil {
		t.Fatal(err)
	}
	srv.integrate()
	vkey := srv.log.Key().VerifierKey()
	open := func(signed []byte) (tlog.Checkpoint, error) { return tlog.OpenCheckpoint(signed, vkey) }
	bundle := func(handle string) *api.ProofBundle {
		t.Helper()
		status, b, err := c.ProofBundle(ctx, "/users/"+handle+".keys", nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("bundle of %s: %d %v", handle, status, err)
		}
		return b
	}
	now := time.Now()
	good := bundle("alice")
	checked, err := client.CheckBundle(good, "alice", open, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if !checked.Proven["ssh "+ka.ID] || len(checked.Proven) != 1 {
		t.Fatalf("proven: %v", checked.Proven)
	}
	if len(good.Records) != 1 || !strings.HasPrefix(good.Records[0].Proof, "c2sp.org/tlog-proof@v1\nindex 0\n") {
		t.Fatalf("bundle records: %+v", good.Records)
	}

	// The identity document's bundle proves its proven factors the same way.
	status, doc, err := c.ProofBundle(ctx, "/users/alice.json", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("bundle of alice.json: %d %v", status, err)
	}
	if checked, err := client.CheckBundle(doc, "alice", open, nil, now); err != nil || !checked.Proven["ssh "+ka.ID] {
		t.Fatalf("alice.json's bundle: %v", err)
	}
	if doc.ContentType != "application/json" || !strings.Contains(doc.Answer, `"handle": "alice"`) {
		t.Fatalf("alice.json's bundle answers %s %q", doc.ContentType, doc.Answer)
	}

	other, err := tlog.NewKey(srv.log.Key().Name(), make([]byte, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	for name, forge := range map[string]func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint){
		"another log key": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			return "alice", func(s []byte) (tlog.Checkpoint, error) { return tlog.OpenCheckpoint(s, other.VerifierKey()) }, nil
		},
		"a changed proof hash": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			lines := strings.Split(b.Records[0].Proof, "\n")
			h, _ := base64.StdEncoding.DecodeString(lines[2])
			h[0] ^= 1
			lines[2] = base64.StdEncoding.EncodeToString(h)
			b.Records[0].Proof = strings.Join(lines, "\n")
			return "alice", open, nil
		},
		"bob's record for alice's key": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			bob := bundle("bob")
			b.Records = bob.Records
			b.Keys[0].Records = bob.Keys[0].Records
			return "alice", open, nil
		},
		"bob's key and record served for alice": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			bob := bundle("bob")
			b.Records, b.Keys = bob.Records, bob.Keys
			return "alice", open, nil
		},
		"an edited record": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			b.Records[0].Record.Label = "edited"
			return "alice", open, nil
		},
		"a record without its proof": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			b.Records[0].Proof = ""
			return "alice", open, nil
		},
		"a fork of the checkpoint seen": func(b *api.ProofBundle) (identity.Handle, client.OpenCheckpoint, *tlog.Checkpoint) {
			cp, err := open([]byte(b.Checkpoint))
			if err != nil {
				t.Fatal(err)
			}
			cp.Root[0] ^= 1
			return "alice", open, &cp
		},
	} {
		b := bundle("alice")
		h, op, last := forge(b)
		if _, err := client.CheckBundle(b, h, op, last, now); !errors.Is(err, client.ErrBadProof) {
			t.Errorf("%s: CheckBundle = %v, want ErrBadProof", name, err)
		}
	}

	// Through authorized-keys: a server that hands out bob's proof for
	// alice's key gets no key printed.
	proxy := http.NewServeMux()
	proxy.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body := srv.get(r.URL.RequestURI())
		if r.URL.Path == "/users/alice.keys" {
			body = strings.Replace(body, ka.ID, kb.ID, -1)
			body = strings.Replace(body, strings.Fields(ka.Pub)[1], strings.Fields(kb.Pub)[1], -1)
		}
		io.WriteString(w, body)
	})
	ps := httptest.NewServer(proxy)
	defer ps.Close()
	out, log, err := keysAt(t, ps.URL, client.KeysOptions{CacheDir: filepath.Join(dir, "cache"), MaxAge: time.Hour, LogKey: vkey})
	if !errors.Is(err, client.ErrNoKeys) || out != "" {
		t.Fatalf("a swapped key: %v %q\n%s", err, out, log)
	}
}

// TestAuthorizedKeysWithLogPolicyNeedsTheQuorum: with a witness policy
// (whose log line stands for the log key), a bundle whose checkpoint the
// quorum did not cosign prints nothing; once the witness's cosignature
// is in the served checkpoint, the key is printed.
func TestAuthorizedKeysWithLogPolicyNeedsTheQuorum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	u := newUser(t)
	k := u.sshKey("", "alice")
	if _, err := srv.client().Claim(ctx, "alice", k); err != nil {
		t.Fatal(err)
	}
	srv.integrate()
	w, err := tlog.NewCosigner("witness.example/w1", bytes.Repeat([]byte{9}, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse(fmt.Appendf(nil, "log %s\nwitness w1 %s\nquorum w1\n", srv.log.Key().VerifierKey(), w.VerifierKey()))
	if err != nil {
		t.Fatal(err)
	}
	opts := client.KeysOptions{CacheDir: filepath.Join(t.TempDir(), "cache"), MaxAge: time.Hour, LogPolicy: pol}
	out, log, err := keysAt(t, srv.url, opts)
	if !errors.Is(err, client.ErrNoKeys) || out != "" || !strings.Contains(log, "quorum") {
		t.Fatalf("a checkpoint without the quorum: %v %q\n%s", err, out, log)
	}
	_, signed, err := srv.store.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := w.Cosign(signed)
	if err != nil {
		t.Fatal(err)
	}
	srv.exec("UPDATE tlog_head SET checkpoint = $1", cosigned)
	out, log, err = keysAt(t, srv.url, opts)
	if err != nil || !strings.Contains(out, k.Pub) {
		t.Fatalf("a cosigned checkpoint: %v %q\n%s", err, out, log)
	}
	// A policy of two logs names no one log to believe: the server could
	// answer from the other one, where alice may be someone else.
	other, err := tlog.NewKey("other.example/log", bytes.Repeat([]byte{3}, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	two, err := policy.Parse(fmt.Appendf(nil, "log %s\nlog %s\nwitness w1 %s\nquorum w1\n",
		srv.log.Key().VerifierKey(), other.VerifierKey(), w.VerifierKey()))
	if err != nil {
		t.Fatal(err)
	}
	opts.LogPolicy = two
	out, log, err = keysAt(t, srv.url, opts)
	if !errors.Is(err, client.ErrNoKeys) || out != "" || !strings.Contains(log, "lists 2 logs") {
		t.Fatalf("a policy of two logs without a log key: %v %q\n%s", err, out, log)
	}
	opts.LogKey = srv.log.Key().VerifierKey()
	out, log, err = keysAt(t, srv.url, opts)
	if err != nil || !strings.Contains(out, k.Pub) {
		t.Fatalf("a policy of two logs with the log key: %v %q\n%s", err, out, log)
	}
}

// TestAddressBundlesProveVerifiedKeys: VKS by-email and WKD answer
// ?proof=1 for a verified address with the email.verified record, its
// commitment opened to the address; the bundle holds, and does not for
// another address, a forged opening or a key the record does not verify.
func TestAddressBundlesProveVerifiedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	src := &proof.Source{Tree: srv.store, Log: srv.svc.Log, EmailVerification: srv.svc.EmailVerification}
	smtp := mailtest.Start(t, mailtest.Options{})
	vh, err := vks.NewHandler(srv.store, srv.keys, srv.store, srv.svc, vks.Options{PublicURL: srv.url, Server: "Kith test",
		TokenKey: bytes.Repeat([]byte{3}, 32), Mailer: &mail.SMTP{Address: smtp.Addr, From: "kith@example.org"}, Proofs: src})
	if err != nil {
		t.Fatal(err)
	}
	vh.Register(srv.mux)
	wkd.NewHandler(srv.store, srv.store, []string{"example.org"}, nil, slog.New(slog.DiscardHandler)).WithProofs(src).Register(srv.mux)

	u := newUser(t)
	c := srv.client()
	alice := u.pgpKey("Alice <alice@example.org>")
	if err := c.UploadKey(ctx, alice); err != nil {
		t.Fatal(err)
	}
	key := identity.Factor{Kind: identity.KindPGP, Value: alice.ID}
	var token string
	err = srv.svc.RequestEmail(ctx, identity.EmailRequest{Action: identity.EmailVerify, Key: key,
		Email: identity.EmailFactor("alice@example.org"),
		Send:  func(_ context.Context, tok string) error { token = tok; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.svc.ConfirmEmail(ctx, key, token); err != nil {
		t.Fatal(err)
	}
	srv.integrate()
	vkey := srv.log.Key().VerifierKey()
	open := func(signed []byte) (tlog.Checkpoint, error) { return tlog.OpenCheckpoint(signed, vkey) }
	now := time.Now()
	for _, path := range []string{"/vks/v1/by-email/alice@example.org",
		"/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("alice") + "?l=alice"} {
		fetch := func() *api.ProofBundle {
			t.Helper()
			status, b, err := c.ProofBundle(ctx, path, nil)
			if err != nil || status != http.StatusOK {
				t.Fatalf("%s: %d %v", path, status, err)
			}
			return b
		}
		b := fetch()
		checked, err := client.CheckBundle(b, "", open, nil, now)
		if err != nil || !checked.Proven["pgp "+alice.ID] {
			t.Fatalf("%s: %v %v", path, err, checked)
		}
		if b.Answer == "" && len(b.AnswerBase64) == 0 {
			t.Fatalf("%s: a bundle without its answer", path)
		}
		b = fetch()
		if _, err := client.CheckBundle(b, "alice", open, nil, now); !errors.Is(err, client.ErrBadProof) {
			t.Errorf("%s: an address's verification as a handle's link: %v", path, err)
		}
		b.Keys[0].Address = ""
		if _, err := client.CheckBundle(b, "", open, nil, now); !errors.Is(err, client.ErrBadProof) {
			t.Errorf("%s: a key without its address: %v", path, err)
		}
		b = fetch()
		b.Keys[0].Address = "mallory@example.org"
		if _, err := client.CheckBundle(b, "", open, nil, now); !errors.Is(err, client.ErrBadProof) {
			t.Errorf("%s: another address: %v", path, err)
		}
		b = fetch()
		b.Records[0].Artifacts[0].Value = []byte("mallory@example.org")
		if _, err := client.CheckBundle(b, "", open, nil, now); !errors.Is(err, client.ErrBadProof) {
			t.Errorf("%s: a forged opening: %v", path, err)
		}
		b = fetch()
		b.Keys[0].Value = strings.Repeat("A", 40)
		if _, err := client.CheckBundle(b, "", open, nil, now); !errors.Is(err, client.ErrBadProof) {
			t.Errorf("%s: another key: %v", path, err)
		}
	}
}

// TestProofBeforeTheFirstCheckpoint: a new log's lookups answer
// ?proof=1 with 503 until the first checkpoint, which authorized-keys
// treats as a server not yet available: no key printed.
func TestProofBeforeTheFirstCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	u := newUser(t)
	k := u.sshKey("", "alice")
	if _, err := srv.client().Claim(ctx, "alice", k); err != nil {
		t.Fatal(err)
	}
	status, _, err := srv.client().ProofBundle(ctx, "/users/alice.keys", nil)
	if err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("before the first checkpoint: %d %v", status, err)
	}
	out, log, err := keysAt(t, srv.url, client.KeysOptions{CacheDir: filepath.Join(t.TempDir(), "cache"), MaxAge: time.Hour,
		LogKey: srv.log.Key().VerifierKey()})
	if !errors.Is(err, client.ErrNoKeys) || out != "" {
		t.Fatalf("authorized-keys before the first checkpoint: %v %q\n%s", err, out, log)
	}
}
