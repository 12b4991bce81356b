package oidc

import (
	"testing"
	"time"
)

func TestProposeHandle(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"alice", "alice"},
		{"Alice.Liddell", "alice-liddell"},
		{"alice@example.org", "alice"},
		{"first.last+tag@example.org", "first-last-tag"},
		{"José Ñúñez", "jose-nunez"},
		{"__bob__", "bob"},
		{"a", ""},
		{"", ""},
		{"---", ""},
		{"日本", ""},
		{"x..y", "x-y"},
		{"abcdefghijabcdefghijabcdefghijabcdefgh-ijk", "abcdefghijabcdefghijabcdefghijabcdefgh"},
		{"0123456789012345678901234567890123456789", "012345678901234567890123456789012345678"},
	} {
		got := ProposeHandle(tc.in)
		if got != tc.want {
			t.Errorf("ProposeHandle(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if len(got) > maxHandleLen {
			t.Errorf("ProposeHandle(%q) is %d long", tc.in, len(got))
		}
	}
	c := &Claims{PreferredUsername: "", Email: "carol@example.org"}
	if got := proposeHandle(HandleClaimPreferredUsername, c); got != "carol" {
		t.Errorf("fallback to email: %q", got)
	}
	c.PreferredUsername = "Dave"
	if got := proposeHandle(HandleClaimEmail, c); got != "carol" {
		t.Errorf("handle_claim email: %q", got)
	}
}

func TestParseClaimsVariants(t *testing.T) {
	c, err := parseClaims([]byte(`{"iss":"https://i","sub":"s","aud":"kith","email_verified":"true","iat":1700000000.5,"exp":1700000600,"auth_time":1699999990}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Audience) != 1 || c.Audience[0] != "kith" || !c.EmailVerified || c.Expiry.Unix() != 1700000600 || c.AuthTime.Unix() != 1699999990 || c.IssuedAt.Sub(time.Unix(1700000000, 0)) != 500*time.Millisecond {
		t.Errorf("claims %+v", c)
	}
	if _, err := parseClaims([]byte(`{"iss":"https://i","aud":["kith"]}`)); err == nil {
		t.Error("a token without sub parsed")
	}
}
