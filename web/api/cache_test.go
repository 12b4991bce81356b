package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/web/api"
)

// TestCacheDropsOnAnotherNodesAppend serves lookups from two handlers on
// one store, as two nodes would: a claim through one must reach the other's
// cached answer through NOTIFY.
func TestCacheDropsOnAnotherNodesAppend(t *testing.T) {
	k := newKith(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHandler(ctx, t, k.store, api.Options{Watcher: k.store})
	waitListening(t, h)
	other := httptest.NewServer(h)
	defer other.Close()

	get := func() (int, string) {
		resp, err := http.Get(other.URL + "/users/alice.keys")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("ETag")
	}
	if st, _ := get(); st != 404 {
		t.Fatalf("before the claim: %d", st)
	}
	key := newSSHKey(t, t.TempDir(), "ed25519")
	s := k.challenge("alice", key.pub, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(s, key.sign(t, s, "kith")), nil); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	var st int
	var etag string
	testkit.Eventually(t, 10*time.Second, "the other node answering 200 after the claim", func() bool {
		st, etag = get()
		return st == 200
	})
	req, _ := http.NewRequest("GET", other.URL+"/users/alice.keys", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("Cache-Control") != "public, max-age=60" {
		t.Fatalf("conditional GET: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
}
