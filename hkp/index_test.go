package hkp

import (
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

func TestMachineIndexExactLines(t *testing.T) {
	fp := make([]byte, 20)
	for i := range fp {
		fp[i] = byte(i + 1)
	}
	v6 := make([]byte, 32)
	for i := range v6 {
		v6[i] = 0xa0 + byte(i%16)
	}
	created := time.Unix(1614834367, 0)
	expired := time.Unix(1640995200, 0)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := []keys.Stored{
		{
			Fingerprint: fp, Algorithm: 1, Bits: 4096, Created: created, Revoked: true,
			UserIDs: []keys.StoredUserID{
				{Text: "Alice: 100% <alice@example.org>", Created: created, Expires: expired},
				{Text: "Jürgen Über <j@example.de>", Created: created},
				{Text: "Tab\tNewline\nDel\x7f", Revoked: true},
			},
		},
		{
			Fingerprint: v6, Algorithm: 27, Bits: 255, Created: created, Expires: expired,
			UserIDs: []keys.StoredUserID{{Text: "Bob <bob@example.org>", Created: created, Expires: now.Add(time.Hour)}},
		},
	}
	want := strings.Join([]string{
		"info:1:2",
		"pub:0102030405060708090A0B0C0D0E0F1011121314:1:4096:1614834367::r",
		"uid:Alice%3A 100%25 <alice@example.org>:1614834367:1640995200:e",
		"uid:J%C3%BCrgen %C3%9Cber <j@example.de>:1614834367::",
		"uid:Tab%09Newline%0ADel%7F:::r",
		"pub:A0A1A2A3A4A5A6A7A8A9AAABACADAEAFA0A1A2A3A4A5A6A7A8A9AAABACADAEAF:27:255:1614834367:1640995200:e",
		"uid:Bob <bob@example.org>:1614834367:1767229200:",
		"",
	}, "\n")
	if got := string(machineIndex(keys, now)); got != want {
		t.Errorf("machine index:\n%s\nwant:\n%s", got, want)
	}
}

func TestEscapeFieldEscapesColonPercentControlAndNonASCII(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain <a@b.c>", "plain <a@b.c>"},
		{"a:b", "a%3Ab"},
		{"100%", "100%25"},
		{"é", "%C3%A9"},
		{"\x00\x1f ", "%00%1F "},
		{"", ""},
	} {
		if got := escapeField(tc.in); got != tc.want {
			t.Errorf("escapeField(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFlagsMarkRevokedAndExpired(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		revoked bool
		expires time.Time
		want    string
	}{
		{false, time.Time{}, ""},
		{true, time.Time{}, "r"},
		{false, time.Unix(999, 0), "e"},
		{false, time.Unix(1000, 0), "e"},
		{false, time.Unix(1001, 0), ""},
		{true, time.Unix(1, 0), "re"},
	} {
		if got := flags(tc.revoked, tc.expires, now); got != tc.want {
			t.Errorf("flags(%v, %v) = %q, want %q", tc.revoked, tc.expires.Unix(), got, tc.want)
		}
	}
}
