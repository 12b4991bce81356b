package oidc

import "testing"

func TestSafeNext(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/account", "/account"},
		{"/users/alice", "/users/alice"},
		{"/users/alice?tab=keys#ssh", "/users/alice?tab=keys#ssh"},
		{"/a%20b", "/a%20b"},
		{"/search?q=alice%20smith%40example.org", "/search?q=alice%20smith%40example.org"},
		{"/users/%C3%A9", "/users/%C3%A9"},
		{"/", "/"},
		{"", "/"},
		{"//evil.example", "/"},
		{"///evil.example", "/"},
		{"https://evil.example", "/"},
		{"http:evil.example", "/"},
		{"/\\evil.example", "/"},
		{"\\\\evil.example", "/"},
		{"/x\\y", "/"},
		{"javascript:alert(1)", "/"},
		{"JavaScript:alert(1)", "/"},
		{"data:text/html,x", "/"},
		{"account", "/"},
		{"/%2F%2Fevil.example", "/"},
		{"/%2fevil.example", "/"},
		{"/%5Cevil.example", "/"},
		{"/%252F%252Fevil.example", "/"},
		{"%2F%2Fevil.example", "/"},
		{"/%0d%0aSet-Cookie:x", "/"},
		{"/\r\nLocation: //evil", "/"},
		{"/ evil", "/"},
		{"/\tevil", "/"},
		{"/é", "/"},
		{"/%zz", "/"},
		{"/" + string(make([]byte, 2000)), "/"},
	} {
		if got := SafeNext(tc.in); got != tc.want {
			t.Errorf("SafeNext(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
