package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestCacheDropsOnAnotherNodesAppend serves lookups from two handlers on
// one store, as two nodes would: a claim through one must reach the other's
// cached answer through NOTIFY.
func TestCacheDropsOnAnotherNodesAppend(t *testing.T) {
	k := newKith(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := httptest.NewServer(newHandler(ctx, t, k.store, k.store, time.Now))
	defer other.Close()
	time.Sleep(200 * time.Millisecond) // let it listen

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
	deadline := time.Now().Add(3 * time.Second)
	var st int
	var etag string
	for st, etag = get(); st != 200 && time.Now().Before(deadline); st, etag = get() {
		time.Sleep(20 * time.Millisecond)
	}
	if st != 200 {
		t.Fatalf("the other node still answers %d after the claim", st)
	}
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
