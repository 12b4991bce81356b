// Package clientaddr finds the client of an HTTP request that came through
// trusted proxies, once, for everything after it in kith serve's HTTP
// stack: every per-client limit (identity/ratelimit) and every log line
// read the client from the request's RemoteAddr, which Handler rewrites.
//
// The rule: when the connection's peer is inside a trusted network, the
// client is the right-most address of the proxies' header that is not
// itself trusted: X-Forwarded-For when the request has one, else the for=
// parameters of Forwarded (RFC 7239). Addresses left of it were written
// by the client or untrusted hops and are ignored. From an untrusted peer,
// or with no trusted network, both headers are ignored: the peer is the
// client.
//
// X-Forwarded-For comes first because the proxies people run (nginx,
// HAProxy, Caddy, Apache, Envoy, cloud load balancers) write it and pass
// a client's Forwarded through untouched; a proxy that writes only
// Forwarded must drop the client's X-Forwarded-For.
//
// It owns parsing those headers and the rewrite; it does not own the
// setting (cmd/kith's trusted_proxies) or how clients are counted.
package clientaddr

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds a request's client behind the Trusted proxies. The zero
// Resolver trusts no proxy.
type Resolver struct {
	// Trusted are the networks of the proxies whose headers are
	// believed.
	Trusted []netip.Prefix
}

// ParsePrefixes parses networks as CIDRs ("10.0.0.0/8", "2001:db8::/32");
// a bare address is a network of one.
func ParsePrefixes(networks []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range networks {
		s = strings.TrimSpace(s)
		if a, err := netip.ParseAddr(s); err == nil {
			if a.Zone() != "" {
				return nil, fmt.Errorf("%q: a zone names no network", s)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("%q: an IPv4-mapped network must be /96 or longer", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Handler serves next with r.RemoteAddr rewritten to the client's address
// ("IP:0" when a header named it; the port is unknown) when the peer is a
// trusted proxy; otherwise it passes r on as it is.
func (res Resolver) Handler(next http.Handler) http.Handler {
	if len(res.Trusted) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := res.Client(r.RemoteAddr, r.Header); ok {
			r2 := new(http.Request)
			*r2 = *r
			r2.RemoteAddr = netip.AddrPortFrom(c, 0).String()
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

// Client returns the client a proxy named in header when peer (a
// RemoteAddr, "host:port") is trusted, and false when the peer is not
// trusted, names nobody, or is the client itself.
func (res Resolver) Client(peer string, header http.Header) (netip.Addr, bool) {
	p, err := netip.ParseAddrPort(peer)
	if err != nil || !res.trusted(p.Addr()) {
		return netip.Addr{}, false
	}
	var hops []string
	if v := header.Values("X-Forwarded-For"); len(v) > 0 {
		hops = splitList(strings.Join(v, ","))
	} else {
		// Line by line, so that a quote one line leaves open does not
		// swallow the lines after it.
		for _, line := range header.Values("Forwarded") {
			hops = append(hops, forwardedFor(line)...)
		}
	}
	// From the right: each trusted hop vouches for the one on its left;
	// the first address not trusted is the client. A hop that is no
	// address (garbage, "unknown", an obfuscated name) ends the walk: the
	// client is the last trusted hop, which named it.
	var last netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			break
		}
		if !res.trusted(a) {
			return a, true
		}
		last = a
	}
	return last, last.IsValid()
}

func (res Resolver) trusted(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range res.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// splitList splits a comma-separated header list, trimming spaces.
func splitList(s string) []string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// forwardedFor returns the for= value of each element of a Forwarded
// header (RFC 7239: elements split by commas, pairs by semicolons, values
// tokens or quoted strings), "" for an element without one.
func forwardedFor(s string) []string {
	var out []string
	for len(s) > 0 {
		var elem []string
		elem, s = forwardedElement(s)
		v := ""
		for _, pair := range elem {
			name, val, ok := strings.Cut(pair, "=")
			if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
				v = unquote(strings.TrimSpace(val))
				break
			}
		}
		out = append(out, v)
	}
	return out
}

// forwardedElement splits the first element off s into its pairs,
// honouring quoted strings, and returns the rest after its comma.
func forwardedElement(s string) (pairs []string, rest string) {
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			pairs = append(pairs, s[start:i])
			start = i + 1
		case !quoted && c == ',':
			return append(pairs, s[start:i]), s[i+1:]
		}
	}
	return append(pairs, s[start:]), ""
}

// unquote undoes a quoted string ("..." with \-escapes); a token is
// returned as it is.
func unquote(v string) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '\\' && i+1 < len(v)-1 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// parseNode reads one hop's address: "192.0.2.1", "192.0.2.1:8080",
// "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:8080" (a port may be
// an RFC 7239 obfuscated one, "_x"); anything else is no address.
func parseNode(s string) (netip.Addr, bool) {
	host := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || (end+1 < len(s) && s[end+1] != ':') {
			return netip.Addr{}, false
		}
		host = s[1:end]
	} else if strings.Count(s, ":") == 1 {
		host, _, _ = strings.Cut(s, ":")
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
