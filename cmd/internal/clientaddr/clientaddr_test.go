package clientaddr

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func resolver(t *testing.T, networks ...string) Resolver {
	t.Helper()
	p, err := ParsePrefixes(networks)
	if err != nil {
		t.Fatal(err)
	}
	return Resolver{Trusted: p}
}

func TestClient(t *testing.T) {
	res := resolver(t, "10.0.0.0/8", "127.0.0.1", "2001:db8:ffff::/48")
	for _, c := range []struct {
		name, peer string
		header     map[string][]string
		want       string // "" means the peer stays the client
	}{
		{"untrusted peer: X-Forwarded-For ignored", "198.51.100.7:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.1"}}, ""},
		{"untrusted peer: Forwarded ignored", "198.51.100.7:5000",
			map[string][]string{"Forwarded": {"for=203.0.113.1"}}, ""},
		{"trusted peer, no header", "127.0.0.1:5000", nil, ""},
		{"one proxy", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.1"}}, "203.0.113.1"},
		{"spoofed entries left of the proxy's are ignored", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"192.0.2.66, 10.9.9.9, 203.0.113.1"}}, "203.0.113.1"},
		{"multiple proxies: the right-most untrusted", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"192.0.2.66, 203.0.113.1, 10.1.2.3"}}, "203.0.113.1"},
		{"multiple header lines are one list", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"192.0.2.66, 203.0.113.1", "10.1.2.3"}}, "203.0.113.1"},
		{"every hop trusted: the farthest", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"10.0.0.5, 10.1.2.3"}}, "10.0.0.5"},
		{"X-Forwarded-For with a port", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.1:4711"}}, "203.0.113.1"},
		{"X-Forwarded-For IPv6", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"2001:db8:1::7"}}, "2001:db8:1::7"},
		{"X-Forwarded-For bracketed IPv6 with a port", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"[2001:db8:1::7]:443"}}, "2001:db8:1::7"},
		{"trusted IPv6 proxy", "[2001:db8:ffff::1]:5000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.9, 2001:db8:ffff:1::2"}}, "198.51.100.9"},
		{"IPv4-mapped peer", "[::ffff:127.0.0.1]:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.1"}}, "203.0.113.1"},
		{"X-Forwarded-For wins over Forwarded", "127.0.0.1:5000",
			map[string][]string{"X-Forwarded-For": {"203.0.113.1"}, "Forwarded": {"for=192.0.2.66"}}, "203.0.113.1"},
		{"Forwarded", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=192.0.2.66, for=203.0.113.1;proto=https;by=10.0.0.1"}}, "203.0.113.1"},
		{"Forwarded: parameter names are case-insensitive", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"For=203.0.113.1"}}, "203.0.113.1"},
		{"Forwarded: quoted IPv6 with brackets and port", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {`for="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17"},
		{"Forwarded: quoted IPv6 with brackets", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {`for="[2001:db8:cafe::17]"`}}, "2001:db8:cafe::17"},
		{"Forwarded: quoted IPv4 with an obfuscated port", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {`for="203.0.113.1:_port"`}}, "203.0.113.1"},
		{"Forwarded: a quoted comma does not split", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {`for=192.0.2.66;ext="a,for=10.0.0.1", for=203.0.113.1;by="x;y"`}}, "203.0.113.1"},
		{"Forwarded: several proxies, several lines", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=192.0.2.66", "for=203.0.113.1", `for="10.1.2.3"`}}, "203.0.113.1"},
		{"Forwarded: unknown from the proxy: the proxy", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=192.0.2.66, for=unknown, for=10.1.2.3"}}, "10.1.2.3"},
		{"Forwarded: an element without for=", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"proto=https"}}, ""},
		{"Forwarded: obfuscated node", "127.0.0.1:5000",
			map[string][]string{"Forwarded": {"for=_hidden"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range c.header {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			got, ok := res.Client(c.peer, h)
			switch {
			case c.want == "" && ok:
				t.Errorf("client %s, want the peer %s", got, c.peer)
			case c.want != "" && (!ok || got != netip.MustParseAddr(c.want)):
				t.Errorf("client %s (%v), want %s", got, ok, c.want)
			}
		})
	}
}

// TestGarbageIsIgnored: header values that are no addresses never name a
// client and never panic; the peer, or the trusted hop right of the
// garbage, stays the client.
func TestGarbageIsIgnored(t *testing.T) {
	res := resolver(t, "127.0.0.0/8")
	garbage := []string{
		"", ",", ",,,", " ", "unknown", "not an address", "999.1.1.1", "1.2.3", "::zz", "[", "]", "[]",
		"[2001:db8::1", "2001:db8::1]", "[2001:db8::1]x", "[fe80::1%eth0]", "fe80::1%eth0",
		"1.2.3.4:5:6", "\x00\xff", strings.Repeat("a", 10000), strings.Repeat("1.2.3.4,", 5000) + "garbage",
		"for=", "for", ";;;", `for="`, `for="\`, `for="[`, `for="[::1`, `"`, `\`, `for=""`, `for="\"\""`,
		"=;=,=", strings.Repeat(`"`, 1001), strings.Repeat(`for="a\`, 500),
	}
	for _, g := range garbage {
		for _, name := range []string{"X-Forwarded-For", "Forwarded"} {
			h := http.Header{name: {g}}
			if got, ok := res.Client("127.0.0.1:1", h); ok && !got.IsLoopback() {
				t.Errorf("%s: %q named client %s", name, g, got)
			}
			// Garbage left of a good hop does not matter.
			h = http.Header{name: {g + ",203.0.113.1"}}
			if name == "Forwarded" {
				h = http.Header{name: {g, "for=203.0.113.1"}}
			}
			if got, ok := res.Client("127.0.0.1:1", h); !ok || got != netip.MustParseAddr("203.0.113.1") {
				t.Errorf("%s: %q before a good hop: client %s (%v)", name, g, got, ok)
			}
		}
	}
	for _, peer := range []string{"", "garbage", "127.0.0.1", "[::1]", "@"} {
		if got, ok := res.Client(peer, http.Header{"X-Forwarded-For": {"203.0.113.1"}}); ok {
			t.Errorf("peer %q: client %s from the header", peer, got)
		}
	}
}

func TestHandlerRewritesRemoteAddrOnlyForTrustedPeers(t *testing.T) {
	var got string
	h := resolver(t, "10.0.0.0/8").Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.RemoteAddr }))
	for _, c := range []struct{ peer, xff, want string }{
		{"10.0.0.1:4000", "203.0.113.1", "203.0.113.1:0"},
		{"10.0.0.1:4000", "2001:db8::1", "[2001:db8::1]:0"},
		{"10.0.0.1:4000", "", "10.0.0.1:4000"},
		{"192.0.2.1:4000", "203.0.113.1", "192.0.2.1:4000"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: RemoteAddr %q, want %q", c.peer, c.xff, got, c.want)
		}
		if r.RemoteAddr != c.peer {
			t.Errorf("the caller's request was changed: %q", r.RemoteAddr)
		}
	}
	// No trusted proxy: the handler is next itself, headers ignored.
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if h := (Resolver{}).Handler(next); h == nil {
		t.Fatal("nil handler")
	}
}

func TestParsePrefixes(t *testing.T) {
	p, err := ParsePrefixes([]string{"10.1.2.3/8", " 127.0.0.1 ", "::1", "2001:db8::/32", "::ffff:10.0.0.0/104"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "::1/128", "2001:db8::/32", "10.0.0.0/8"}
	for i, w := range want {
		if p[i].String() != w {
			t.Errorf("%d: %s, want %s", i, p[i], w)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "example.org", "10.0.0.0/", "fe80::1%eth0", "::ffff:0:0/80"} {
		if _, err := ParsePrefixes([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzClient: no header value panics.
func FuzzClient(f *testing.F) {
	for _, s := range []string{"203.0.113.1", "for=203.0.113.1", `for="[2001:db8::1]:80"`, `for="`, "[::1]:", "a,b;c=d"} {
		f.Add(s, s)
	}
	res := Resolver{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		h := http.Header{"Forwarded": {fwd}}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		res.Client("127.0.0.1:1", h)
		res.Client("192.0.2.1:1", h)
	})
}
