package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/skstest"
	"github.com/kith-keyserver/kith/web/api"
)

// servedPackets returns the packets the HKP server at addr serves for fpr
// (nil when it answers 404).
func servedPackets(t *testing.T, addr, fpr string) []pgp.Packet {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/pks/lookup?op=get&options=mr&search=0x" + fpr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("op=get %s: %d %s", fpr, resp.StatusCode, body)
	}
	k, err := pgp.ParseKey(body)
	if err != nil {
		t.Fatal(err)
	}
	return k.Packets()
}

func postJSON(t *testing.T, url string, in, out any) int {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("POST %s: %d %s", url, resp.StatusCode, body)
		}
	}
	return resp.StatusCode
}

// TestOwnerDeletionThroughTheBinary is the owner-deletion item of the
// blocklist issue, through kith serve, gpg and a real SKS peer: the key's
// holder signs a delete-key statement with gpg; gpg --recv-keys then gets
// a key with no user IDs; uploading the full key again, and recon with an
// SKS peer that still holds it, change nothing; a revocation uploaded
// later merges and is served.
func TestOwnerDeletionThroughTheBinary(t *testing.T) {
	t.Parallel()
	skstest.FindBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	srv := startServe(t, tempDir(t), nil, "--database-url", dbURL)
	srv.waitHealth(t, http.StatusOK, time.Minute)

	owner := gpgtest.New(t)
	owner.UseKeyserver(srv.addr)
	fpr := owner.NewKey("Owner <owner@example.org>", "sign")
	if out, err := owner.Try("--send-keys", fpr); err != nil {
		t.Fatalf("gpg --send-keys: %v\n%s", err, out)
	}
	full := owner.Run("", "--export", fpr)
	if n := len(servedPackets(t, srv.addr, fpr)); n != 3 {
		t.Fatalf("the uploaded key has %d packets, want primary, user ID, self-signature", n)
	}
	// A client that knew the key before the deletion.
	client := gpgtest.New(t)
	client.UseKeyserver(srv.addr)
	if out, err := client.Try("--recv-keys", fpr); err != nil {
		t.Fatalf("gpg --recv-keys before the deletion: %v\n%s", err, out)
	}

	// The deletion: a statement signed by the primary key.
	var ch api.ChallengeResponse
	if code := postJSON(t, "http://"+srv.addr+"/api/v1/challenges",
		api.ChallengeRequest{Factor: fpr, Purpose: "delete-key"}, &ch); code != http.StatusCreated {
		t.Fatalf("delete-key challenge: %d %+v", code, ch)
	}
	if !strings.Contains(ch.Sign[0], fpr+"!") {
		t.Errorf("the signing hint %q does not force the primary key", ch.Sign[0])
	}
	// A signature by another key is refused and deletes nothing.
	stranger := gpgtest.New(t)
	sfpr := stranger.NewKey("Stranger <stranger@example.org>", "sign")
	var refusal api.ErrorBody
	forged := string(stranger.Run(ch.Statement, "--local-user", sfpr+"!", "--clearsign", "--output", "-"))
	if code := postJSON(t, "http://"+srv.addr+"/api/v1/keys/deletions",
		api.SignedStatement{Statement: ch.Statement, Signature: forged}, &refusal); code < 400 || refusal.Error.Code != "wrong_key" {
		t.Fatalf("a stranger's deletion: %d %+v, want wrong_key", code, refusal)
	}
	if n := len(servedPackets(t, srv.addr, fpr)); n != 3 {
		t.Fatalf("a refused deletion changed the key: %d packets", n)
	}
	sig := string(owner.Run(ch.Statement, "--local-user", fpr+"!", "--clearsign", "--output", "-"))
	var del api.KeyDeletionResponse
	if code := postJSON(t, "http://"+srv.addr+"/api/v1/keys/deletions",
		api.SignedStatement{Statement: ch.Statement, Signature: sig}, &del); code != http.StatusOK {
		t.Fatalf("deletion: %d %+v", code, del)
	}
	// The statement cannot be replayed.
	if code := postJSON(t, "http://"+srv.addr+"/api/v1/keys/deletions",
		api.SignedStatement{Statement: ch.Statement, Signature: sig}, &refusal); refusal.Error.Code != "nonce_used" {
		t.Fatalf("replayed deletion: %d %+v, want nonce_used", code, refusal)
	}

	tombstone := func(wantPackets int) {
		t.Helper()
		ps := servedPackets(t, srv.addr, fpr)
		if len(ps) != wantPackets || ps[0].Tag != pgp.TagPublicKey {
			t.Fatalf("served %d packets, want a tombstone of %d", len(ps), wantPackets)
		}
		for _, p := range ps[1:] {
			if p.Tag != pgp.TagSignature {
				t.Fatalf("the tombstone carries a packet with tag %d", p.Tag)
			}
		}
	}
	tombstone(1)
	fresh := gpgtest.New(t)
	fresh.UseKeyserver(srv.addr)
	out, _ := fresh.Try("--recv-keys", fpr)
	if !strings.Contains(out, "no user ID") {
		t.Fatalf("gpg --recv-keys of the tombstone: want gpg to find no user ID, got:\n%s", out)
	}

	// The full key again, by gpg: nothing changes.
	if out, err := owner.Try("--send-keys", fpr); err != nil {
		t.Fatalf("gpg --send-keys of the full key: %v\n%s", err, out)
	}
	tombstone(1)

	// Recon with a real SKS peer that holds the full key.
	node, other := reconNodeOn(t, ctx, dbURL), reconNodeOn(t, ctx, dbURL)
	sks := skstest.Start(t, skstest.Options{Keys: [][]byte{full}, GossipInterval: 60,
		Membership: []string{"127.0.0.1 " + node.reconPort(), "127.0.0.1 " + other.reconPort()}})
	node.start(t, ctx, sks.ReconAddr, sks.HKPURL)
	other.start(t, ctx, sks.ReconAddr, sks.HKPURL)
	peer := recon.Peer{Address: sks.ReconAddr, HTTP: sks.HKPURL}
	_, fetched, err := node.manager.ReconcileWith(ctx, peer)
	if err != nil {
		t.Fatalf("recon with SKS: %v\n%s", err, sks.Log("recon"))
	}
	if fetched.Received != 1 || fetched.Stored != 0 || fetched.Rejected != 1 {
		t.Fatalf("recon fetched %+v; want the full key received once and refused", fetched)
	}
	tombstone(1)
	// SKS takes the tombstone from Kith (it merges into its full key);
	// afterwards a round, from any node, fetches nothing again.
	testkit.PollEvery(time.Minute, 500*time.Millisecond, func() bool {
		_, fetched, err = other.manager.ReconcileWith(ctx, peer)
		return err == nil
	})
	if err != nil || fetched.Requested != 0 || fetched.Received != 0 {
		t.Fatalf("second recon round: %+v, %v; want nothing fetched", fetched, err)
	}

	// A revocation uploaded later merges and is served.
	rev, err := os.ReadFile(filepath.Join(owner.Dir, "openpgp-revocs.d", fpr+".rev"))
	if err != nil {
		t.Fatal(err)
	}
	revFile := filepath.Join(t.TempDir(), "rev.asc")
	os.WriteFile(revFile, bytes.ReplaceAll(rev, []byte("\n:-----BEGIN"), []byte("\n-----BEGIN")), 0o600)
	owner.Run("", "--import", revFile)
	if out, err := owner.Try("--send-keys", fpr); err != nil {
		t.Fatalf("gpg --send-keys of the revoked key: %v\n%s", err, out)
	}
	tombstone(2)
	if out, err := client.Try("--recv-keys", fpr); err != nil {
		t.Fatalf("gpg --recv-keys of the revocation: %v\n%s", err, out)
	}
	listing := string(client.Run("", "--with-colons", "--list-keys", fpr))
	if !strings.HasPrefix(listing, "tru:") && !strings.Contains(listing, "pub:r:") {
		t.Fatalf("the client does not see the key revoked:\n%s", listing)
	}
	if !strings.Contains(listing, "pub:r:") {
		t.Fatalf("the client does not see the key revoked:\n%s", listing)
	}
}
