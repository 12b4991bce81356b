package hkp

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/ratelimit"
)

// TestEmailLookupsAreLimitedPerClient: searches for an address count
// against the client's email-lookup budget, cached answers too; searches
// by fingerprint or words do not; past the budget the answer is 429 with
// Retry-After.
func TestEmailLookupsAreLimitedPerClient(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := newTestServer(t, Options{EmailLookupLimit: ratelimit.New(2, func() time.Time { return now })})
	alice := newEntity(t, "Alice", "alice@example.org", 1)
	ts.mustAdd(armored(t, binaryKey(t, alice)))
	for i, q := range []string{"op=get&options=mr&search=alice@example.org", "op=index&options=mr&search=alice%40example.org"} {
		if r := ts.lookup(q); r.code != http.StatusOK {
			t.Fatalf("lookup %d within the budget: %d %s", i+1, r.code, r.body)
		}
	}
	for _, q := range []string{"op=get&options=mr&search=0x" + fpHex(alice), "op=index&options=mr&search=alice"} {
		if r := ts.lookup(q); r.code != http.StatusOK {
			t.Errorf("%s counted as a lookup by email: %d", q, r.code)
		}
	}
	r := ts.lookup("op=vindex&options=mr&search=bob@example.org")
	if r.code != http.StatusTooManyRequests || r.header.Get("Retry-After") != "30" || !strings.Contains(r.body, "by email") {
		t.Errorf("past the budget: %d Retry-After %q %q", r.code, r.header.Get("Retry-After"), r.body)
	}
}

// TestUploadsAreLimitedPerClient: past the client's upload budget POST
// /pks/add answers 429 before reading the body.
func TestUploadsAreLimitedPerClient(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := newTestServer(t, Options{UploadLimit: ratelimit.New(1, func() time.Time { return now })})
	ts.mustAdd(armored(t, binaryKey(t, newEntity(t, "Alice", "alice@example.org", 1))))
	r := ts.add(armored(t, binaryKey(t, newEntity(t, "Bob", "bob@example.org", 2))))
	if r.code != http.StatusTooManyRequests || r.header.Get("Retry-After") != "60" {
		t.Errorf("past the budget: %d Retry-After %q %q", r.code, r.header.Get("Retry-After"), r.body)
	}
	if n := ts.keyCount(); n != 1 {
		t.Errorf("%d keys stored, want 1", n)
	}
}
