// host.go: host identities. A host's SSH host keys are published under
// the handle "host:NAME", NAME a DNS name, through the same statements as
// a person's keys: the claim is signed by a host key itself (ssh-keygen -Y
// sign -f /etc/ssh/ssh_host_ed25519_key), so only someone who can read
// that key (root on the host) can publish it. That proves possession of
// the host key, not ownership of the name: which names may be claimed at
// all is the operator's HostPolicy.

package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// HostPrefix starts every host handle.
const HostPrefix = "host:"

// MaxHostNameLen is the longest DNS name, in bytes, without the final dot.
const MaxHostNameLen = 253

// ErrBadHostName: the text is not a DNS host name.
var ErrBadHostName = errors.New("invalid host name")

// ParseHostName checks s as a host name: dot-separated labels of 1 to 63
// lower-case ASCII letters, digits and hyphens, neither starting nor
// ending with a hyphen, at most 253 bytes in all, with no final dot, and
// a last label that is not all digits (so that no IP address passes). It
// does not fold case (see FoldHostName).
func ParseHostName(s string) (string, error) {
	if s == "" || len(s) > MaxHostNameLen {
		return "", fmt.Errorf("%w %q: must be 1 to %d characters", ErrBadHostName, clip(s), MaxHostNameLen)
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("%w %q: each dot-separated label must be 1 to 63 characters", ErrBadHostName, clip(s))
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			case c == '-' && i != 0 && i != len(l)-1:
			case c == '-':
				return "", fmt.Errorf("%w %q: a label must not start or end with '-'", ErrBadHostName, clip(s))
			default:
				return "", fmt.Errorf("%w %q: only lower-case letters, digits, '-' and '.' are allowed", ErrBadHostName, clip(s))
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("%w %q: an address is not a host name", ErrBadHostName, clip(s))
	}
	return s, nil
}

// FoldHostName is the form in which lookups take a host name: ASCII
// lower-cased (DNS names are case-insensitive) and without one final dot.
func FoldHostName(s string) string {
	return strings.TrimSuffix(FoldHandle(s), ".")
}

// HostHandle returns the handle of the host name, which ParseHostName
// must have accepted.
func HostHandle(name string) Handle { return Handle(HostPrefix + name) }

// Host returns the host name of a host handle, and false for any other.
func (h Handle) Host() (string, bool) {
	return strings.CutPrefix(string(h), HostPrefix)
}

// ParseIdentityHandle checks s as a person's handle (ParseHandle) or a
// host's ("host:" and a ParseHostName name).
func ParseIdentityHandle(s string) (Handle, error) {
	name, ok := strings.CutPrefix(s, HostPrefix)
	if !ok {
		return ParseHandle(s)
	}
	if _, err := ParseHostName(name); err != nil {
		return "", fmt.Errorf("%w: host handle: %w", ErrBadHandle, err)
	}
	return Handle(s), nil
}

// HostPolicy says which host names may be claimed, and so served: the
// operator's list of names ("git.example.org") and of domains whose every
// subdomain may be claimed ("*.lab.example.org"). The zero policy allows
// none. Whoever first signs a claim for an allowed name with a host key
// holds it; the list keeps strangers from claiming names outside it
// (host:github.com with a key of their own).
type HostPolicy struct {
	exact    map[string]bool
	suffixes []string // ".lab.example.org"
}

// ErrBadHostPattern: a host policy entry is neither a host name nor
// "*." and one.
var ErrBadHostPattern = errors.New("invalid host name pattern")

// ParseHostPolicy reads the policy's entries: host names, and "*.DOMAIN"
// for every name below DOMAIN (not DOMAIN itself).
func ParseHostPolicy(patterns []string) (HostPolicy, error) {
	p := HostPolicy{exact: map[string]bool{}}
	for _, pat := range patterns {
		domain, wild := strings.CutPrefix(pat, "*.")
		if _, err := ParseHostName(domain); err != nil {
			return HostPolicy{}, fmt.Errorf("%w %q: want a lower-case host name or *.DOMAIN: %w", ErrBadHostPattern, clip(pat), err)
		}
		if wild {
			p.suffixes = append(p.suffixes, "."+domain)
		} else {
			p.exact[domain] = true
		}
	}
	return p, nil
}

// Allows reports whether the host name may be claimed and served.
func (p HostPolicy) Allows(name string) bool {
	if p.exact[name] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// IsZero reports whether the policy allows no host name.
func (p HostPolicy) IsZero() bool { return len(p.exact) == 0 && len(p.suffixes) == 0 }

// checkHost applies the rules of host identities to an operation on
// handle h with factor f: a host holds only SSH host keys, never logs in,
// and is claimed and certified (a host certificate) only under a name the
// policy allows. Other handles pass.
func (s *Service) checkHost(purpose Purpose, h Handle, f Factor) error {
	name, ok := h.Host()
	if !ok {
		return nil
	}
	if purpose == PurposeLogin {
		return Refuse(CodeUnsupported, "a host identity does not log in")
	}
	if f.Kind != KindSSH {
		return Refuse(CodeUnsupported, "a host identity holds only SSH host keys, not a %s factor", f.Kind)
	}
	if purpose == PurposeClaim && !s.hosts.Allows(name) {
		return Refuse(CodeHostNotAllowed, "this server does not publish keys for host %q: its operator lists the host names that may be claimed", name)
	}
	if purpose == PurposeCertificate && !s.hosts.Allows(name) {
		return Refuse(CodeHostNotAllowed, "this server certifies no host %q: its operator lists the host names it serves", name)
	}
	return nil
}

// LookupHost is Lookup for the host identity of a host name, as a lookup
// gives it (folded by FoldHostName here). A name the policy no longer
// allows is unknown: the operator's list decides what is served.
func (s *Service) LookupHost(ctx context.Context, name string) (Identity, *Assessment, []Evidence, error) {
	name = FoldHostName(name)
	if _, err := ParseHostName(name); err != nil {
		return Identity{}, nil, nil, RefuseErr(CodeUnknownIdentity, err, "no host has name %q", clip(name))
	}
	if !s.hosts.Allows(name) {
		return Identity{}, nil, nil, Refuse(CodeUnknownIdentity, "no host has name %q here", name)
	}
	return s.Lookup(ctx, string(HostHandle(name)))
}

// Patterns returns the policy's entries, as ssh_known_hosts patterns
// match them too: host names, then "*.DOMAIN" for every name below
// DOMAIN, each sorted.
func (p HostPolicy) Patterns() []string {
	var out []string
	for name := range p.exact {
		out = append(out, name)
	}
	slices.Sort(out)
	var wild []string
	for _, s := range p.suffixes {
		wild = append(wild, "*"+s)
	}
	slices.Sort(wild)
	return append(out, wild...)
}

// PatternsUnder returns the patterns of the names the policy allows that
// are domain or below it: the entries within domain, and domain itself
// and "*.domain" when an entry's wildcard covers domain. A
// /.well-known/ssh-known-hosts answer names nothing outside the domain
// it is served from.
func (p HostPolicy) PatternsUnder(domain string) []string {
	within := func(name string) bool { return name == domain || strings.HasSuffix(name, "."+domain) }
	var out []string
	for _, pat := range p.Patterns() {
		name, wild := strings.CutPrefix(pat, "*.")
		switch {
		case within(name):
			out = append(out, pat)
		case wild && strings.HasSuffix(domain, "."+name):
			for _, q := range []string{domain, "*." + domain} {
				if !slices.Contains(out, q) {
					out = append(out, q)
				}
			}
		}
	}
	return out
}

// MaxHostsUnder is the most host identities HostsUnder returns.
const MaxHostsUnder = 1000

// Host is a host identity as a lookup assesses it.
type Host struct {
	// Name is the host's name (its handle without "host:").
	Name       string
	Assessment *Assessment
}

// HostsUnder returns the host identities named domain or below it (at
// most MaxHostsUnder, by name) whose names the policy allows, each
// assessed now.
func (s *Service) HostsUnder(ctx context.Context, domain string) ([]Host, error) {
	domain = FoldHostName(domain)
	if _, err := ParseHostName(domain); err != nil {
		return nil, RefuseErr(CodeUnknownIdentity, err, "no host has name %q", clip(domain))
	}
	hs, err := s.store.HostsUnder(ctx, domain, MaxHostsUnder)
	if err != nil {
		return nil, fmt.Errorf("identity: hosts under %s: %w", domain, err)
	}
	var out []Host
	for _, h := range hs {
		name, _ := h.Host()
		if !s.hosts.Allows(name) {
			continue
		}
		_, a, _, err := s.Lookup(ctx, string(h))
		if CodeOf(err) == CodeUnknownIdentity {
			continue // gone since
		}
		if err != nil {
			return nil, fmt.Errorf("identity: hosts under %s: %w", domain, err)
		}
		out = append(out, Host{Name: name, Assessment: a})
	}
	return out, nil
}

// HostPatterns returns the patterns of the host names this server
// certifies (HostPolicy.Patterns), or those within domain when it is not
// empty (HostPolicy.PatternsUnder).
func (s *Service) HostPatterns(domain string) []string {
	if domain == "" {
		return s.hosts.Patterns()
	}
	return s.hosts.PatternsUnder(FoldHostName(domain))
}
