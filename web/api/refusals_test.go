package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/web/api"
)

// TestClaimRefusalsWriteNothing checks every way a claim is refused, and
// that a refusal leaves the log as it was.
func TestClaimRefusalsWriteNothing(t *testing.T) {
	k := newKith(t)
	dir := t.TempDir()
	alice := newSSHKey(t, dir, "ed25519")
	other := newSSHKey(t, dir, "ed25519")
	taken := newSSHKey(t, dir, "ecdsa")

	// bob holds a handle and a key already.
	s := k.challenge("bob", taken.pub, "claim")
	if st, code := k.call("POST", "/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: s, Signature: taken.sign(t, s, "kith")}}, nil); st != 201 {
		t.Fatalf("bob's claim: %d %s", st, code)
	}

	tests := []struct {
		name string
		// prepare returns the request to send.
		prepare  func(t *testing.T) api.ClaimRequest
		wantCode string
		wantHTTP int
	}{
		{"tampered statement", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("alice", alice.pub, "claim")
			sig := alice.sign(t, s, "kith")
			return claim(strings.Replace(s, "I hold this key", "I hold that key", 1), sig)
		}, "bad_statement", 400},
		{"statement signed, then changed", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("alice", alice.pub, "claim")
			forged := strings.Replace(s, "issued: ", "issued: 2", 1)
			return claim(s, alice.sign(t, forged, "kith"))
		}, "bad_signature", 422},
		{"signature by another key", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("alice", alice.pub, "claim")
			return claim(s, other.sign(t, s, "kith"))
		}, "wrong_key", 422},
		{"wrong namespace", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("alice", alice.pub, "claim")
			return claim(s, alice.sign(t, s, "git"))
		}, "wrong_namespace", 422},
		{"expired challenge", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("alice", alice.pub, "claim")
			sig := alice.sign(t, s, "kith")
			k.clock.Advance(11 * time.Minute)
			t.Cleanup(func() { k.clock.Advance(-11 * time.Minute) })
			return claim(s, sig)
		}, "challenge_expired", 410},
		{"handle taken", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("carol", alice.pub, "claim")
			sig := alice.sign(t, s, "kith")
			// Someone else claims carol between challenge and answer.
			s2 := k.challenge("carol", other.pub, "claim")
			if st, code := k.call("POST", "/api/v1/identities", claim(s2, other.sign(t, s2, "kith")), nil); st != 201 {
				t.Fatalf("carol's claim: %d %s", st, code)
			}
			return claim(s, sig)
		}, "handle_taken", 409},
		{"factor linked elsewhere", func(t *testing.T) api.ClaimRequest {
			s := k.challenge("dave", taken.pub, "claim")
			return claim(s, taken.sign(t, s, "kith"))
		}, "factor_linked", 409},
		{"not a statement", func(t *testing.T) api.ClaimRequest {
			return claim("hello", alice.sign(t, "hello", "kith"))
		}, "bad_statement", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.prepare(t)
			before := k.logLen()
			st, code := k.call("POST", "/api/v1/identities", req, nil)
			if st != tt.wantHTTP || code != tt.wantCode {
				t.Fatalf("got %d %q, want %d %q", st, code, tt.wantHTTP, tt.wantCode)
			}
			if after := k.logLen(); after != before {
				t.Fatalf("refusal appended %d records", after-before)
			}
		})
	}

	t.Run("reused nonce", func(t *testing.T) {
		s := k.challenge("erin", alice.pub, "claim")
		req := claim(s, alice.sign(t, s, "kith"))
		if st, code := k.call("POST", "/api/v1/identities", req, nil); st != 201 {
			t.Fatalf("first answer: %d %s", st, code)
		}
		before := k.logLen()
		if st, code := k.call("POST", "/api/v1/identities", req, nil); st != 409 || code != "nonce_used" {
			t.Fatalf("second answer: %d %q, want 409 nonce_used", st, code)
		}
		if k.logLen() != before {
			t.Fatal("refusal appended records")
		}
	})
}

func TestChallengeRefusals(t *testing.T) {
	k := newKith(t)
	key := newSSHKey(t, t.TempDir(), "ed25519")
	tests := []struct {
		name, handle, factor, purpose, wantCode string
	}{
		{"reserved handle", "admin", key.pub, "claim", "reserved_handle"},
		{"upper-case handle", "Alice", key.pub, "claim", "bad_handle"},
		{"handle ending in a hyphen", "alice-", key.pub, "claim", "bad_handle"},
		{"one-letter handle", "a", key.pub, "claim", "bad_handle"},
		{"no such identity to add to", "nobody", key.pub, "add", "unknown_identity"},
		{"not a key", "alice", "ssh-ed25519 AAAAnope", "claim", "bad_factor"},
		{"unknown purpose", "alice", key.pub, "steal", "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, code := k.call("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: tt.handle, Factor: tt.factor, Purpose: tt.purpose}, nil)
			if code != tt.wantCode {
				t.Fatalf("code %q, want %q", code, tt.wantCode)
			}
		})
	}
}

func claim(statement, sig string) api.ClaimRequest {
	return api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: statement, Signature: sig}}
}

// TestChallengesAreRateLimitedPerClient: one client cannot fill the
// challenge table; past the limit it gets 429 with a clear code.
func TestChallengesAreRateLimitedPerClient(t *testing.T) {
	k := newKith(t)
	key := newSSHKey(t, t.TempDir(), "ed25519")
	req := api.ChallengeRequest{Handle: "alice", Factor: key.pub, Purpose: "claim"}
	for i := range 30 {
		if st, code := k.call("POST", "/api/v1/challenges", req, nil); st != 201 {
			t.Fatalf("challenge %d: %d %s", i+1, st, code)
		}
	}
	if st, code := k.call("POST", "/api/v1/challenges", req, nil); st != 429 || code != "rate_limited" {
		t.Fatalf("challenge 31: %d %s, want 429 rate_limited", st, code)
	}
}
