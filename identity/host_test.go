package identity_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
)

func TestParseHostNameAcceptsOnlyDNSNames(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"git.example.org", true},
		{"localhost", true},
		{"a-b.c0.example", true},
		{"xn--bcher-kva.example", true},
		{strings.Repeat("a", 63) + ".org", true},
		{strings.Repeat("a", 64) + ".org", false},
		{strings.Repeat("abc.", 63) + "org", false}, // 255 bytes
		{"", false},
		{"Git.example.org", false},
		{"git.example.org.", false},
		{".example.org", false},
		{"git..example.org", false},
		{"-git.example.org", false},
		{"git-.example.org", false},
		{"git_lab.example.org", false},
		{"git example.org", false},
		{"127.0.0.1", false},
		{"10.1.2.3", false},
		{"[::1]", false},
		{"bücher.example", false},
		{"git.example.org:22", false},
		{"*.example.org", false},
	} {
		_, err := identity.ParseHostName(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseHostName(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
		if err != nil && !errors.Is(err, identity.ErrBadHostName) {
			t.Errorf("ParseHostName(%q): %v is not ErrBadHostName", tt.in, err)
		}
		h, err := identity.ParseIdentityHandle("host:" + tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseIdentityHandle(host:%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
		if err == nil {
			if name, ok := h.Host(); !ok || name != tt.in {
				t.Errorf("Host() of %q = %q, %v", h, name, ok)
			}
		}
	}
	// A person's handle never parses as a host's, nor a host's as a
	// person's: the frontends for people (ParseHandle) never reach hosts.
	if _, err := identity.ParseHandle("host:git.example.org"); err == nil {
		t.Error("ParseHandle accepted a host handle")
	}
	if _, ok := identity.Handle("alice").Host(); ok {
		t.Error("alice is a host")
	}
}

func TestHostPolicy(t *testing.T) {
	p, err := identity.ParseHostPolicy([]string{"git.example.org", "*.lab.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"git.example.org": true, "a.lab.example.org": true, "b.a.lab.example.org": true,
		"lab.example.org": false, "example.org": false, "www.example.org": false,
		"xlab.example.org": false, "github.com": false, "git.example.org.evil.com": false,
	} {
		if got := p.Allows(name); got != want {
			t.Errorf("Allows(%q) = %v, want %v", name, got, want)
		}
	}
	for _, bad := range []string{"*", "*.", "**.example.org", "Git.example.org", "git.*.org", "10.0.0.1", ""} {
		if _, err := identity.ParseHostPolicy([]string{bad}); !errors.Is(err, identity.ErrBadHostPattern) {
			t.Errorf("ParseHostPolicy(%q) = %v, want ErrBadHostPattern", bad, err)
		}
	}
	if !(identity.HostPolicy{}).IsZero() || p.IsZero() {
		t.Error("IsZero is wrong")
	}
}

// newHostEnv is newEnv with a Service that lets the host names of
// patterns be claimed.
func newHostEnv(t *testing.T, patterns ...string) *env {
	t.Helper()
	e := newEnv(t)
	p, err := identity.ParseHostPolicy(patterns)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := identity.NewService(e.st, e.v, identity.ServiceOptions{
		Server: server, Now: func() time.Time { return e.clock }, Rand: rand.NewChaCha8([32]byte{2}), Hosts: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// hostKeys returns the host's proven keys as known_hosts would serve
// them: LookupHost's proven SSH factors.
func (e *env) hostKeys(name string) ([]identity.Factor, error) {
	_, a, _, err := e.svc.LookupHost(e.ctx, name)
	if err != nil {
		return nil, err
	}
	var out []identity.Factor
	for _, st := range a.Of(identity.KindSSH, identity.LevelProven) {
		out = append(out, st.Factor)
	}
	return out, nil
}

// TestStrangerCannotClaimUnlistedHost is the first-come attack: a
// stranger signs a claim for host:github.com with a key of their own, so
// that ssh users of this server would trust it for github.com. The
// operator's list does not name github.com, so the claim is refused
// however it is made, nothing is written, and nothing is served.
func TestStrangerCannotClaimUnlistedHost(t *testing.T) {
	mallory := sshKey("mallory's own key")
	for _, patterns := range [][]string{nil, {"*.example.org", "git.example.net"}} {
		e := newHostEnv(t, patterns...)
		for _, name := range []string{"github.com", "example.org", "git.example.org.evil.com", "gitexample.net"} {
			h := "host:" + name
			// Through the front door: no challenge is issued.
			if _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, h, mallory); identity.CodeOf(err) != identity.CodeHostNotAllowed {
				t.Errorf("%v: challenge for %s: %v, want host_not_allowed", patterns, h, err)
			}
			// With a statement made and saved by hand, as if the list had
			// named the host when it was issued: the claim itself checks.
			nonce := []byte(strings.Repeat(name, 32))[:32]
			c, err := identity.NewChallenge(server, identity.PurposeClaim, identity.Handle(h), mallory, nonce, e.clock)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.st.SaveChallenge(e.ctx, c); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(mallory, c.Statement)}); identity.CodeOf(err) != identity.CodeHostNotAllowed {
				t.Errorf("%v: claim of %s: %v, want host_not_allowed", patterns, h, err)
			}
			if keys, err := e.hostKeys(name); identity.CodeOf(err) != identity.CodeUnknownIdentity {
				t.Errorf("%v: %s serves %v, %v", patterns, name, keys, err)
			}
		}
		if n := len(e.log()); n != 0 {
			t.Errorf("%v: the refused claims wrote %d records", patterns, n)
		}
	}
}

// TestHostIdentity walks a host's life: claimed with its host key, the key
// rotated (the new key co-signed by the old), the old key revoked; and
// the attempts of a stranger, who has only their own key, to take over.
func TestHostIdentity(t *testing.T) {
	e := newHostEnv(t, "git.example.org", "*.lab.example.org")
	hostKey, newKey, mallory := sshKey("host key"), sshKey("new host key"), sshKey("mallory")
	const h = "host:git.example.org"

	// The claim must be signed by the key it names.
	c := e.issue(identity.PurposeClaim, h, hostKey)
	forged := sign(mallory, c.Statement)
	forged.Factor = identity.Factor{}
	if _, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *forged}); identity.CodeOf(err) != identity.CodeWrongKey {
		t.Fatalf("a claim signed by another key: %v (%s), want wrong_key", err, identity.CodeOf(err))
	}
	e.claim(h, hostKey)
	if keys, err := e.hostKeys("GIT.Example.ORG."); err != nil || len(keys) != 1 || !keys[0].Same(hostKey) {
		t.Fatalf("served %v, %v; want the host key", keys, err)
	}
	// A host is no person: its key answers no "who is this" question.
	if hd, err := e.svc.WhoProves(e.ctx, hostKey); identity.CodeOf(err) != identity.CodeNotLinked {
		t.Errorf("WhoProves(host key) = %q, %v", hd, err)
	}

	// The stranger: the name is taken; their key does not join it on its
	// own signature, nor co-signed by itself.
	if err := e.claimErr(h, mallory); identity.CodeOf(err) != identity.CodeHandleTaken {
		t.Errorf("second claim: %v, want handle_taken", err)
	}
	if err := e.addErr(h, mallory, true, identity.Factor{}); identity.CodeOf(err) != identity.CodeNotAuthorized {
		t.Errorf("add on its own signature: %v, want not_authorized", err)
	}
	if err := e.addErr(h, mallory, true, sshKey("mallory's second key")); identity.CodeOf(err) != identity.CodeNotProven {
		t.Errorf("add co-signed by a stranger's key: %v, want not_proven", err)
	}
	if err := e.revokeErr(h, hostKey, mallory); identity.CodeOf(err) != identity.CodeNotProven {
		t.Errorf("revoke by a stranger: %v, want not_proven", err)
	}

	// Only SSH host keys, and no logins.
	e.storeKey(pM)
	if err := e.addErr(h, pM, true, hostKey); identity.CodeOf(err) != identity.CodeUnsupported {
		t.Errorf("an OpenPGP key for a host: %v, want unsupported", err)
	}
	if _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "host:a.lab.example.org", pM); identity.CodeOf(err) != identity.CodeUnsupported {
		t.Errorf("a host claimed with an OpenPGP key: %v, want unsupported", err)
	}
	if _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeLogin, h, hostKey); identity.CodeOf(err) != identity.CodeUnsupported {
		t.Errorf("a host login: %v, want unsupported", err)
	}
	if err := e.claimLoginErr("host:a.lab.example.org", e.login("carol")); identity.CodeOf(err) != identity.CodeUnsupported {
		t.Errorf("a host claimed with a login: %v, want unsupported", err)
	}

	// Rotation: the new key, co-signed by the old; then the old revoked.
	e.add(h, newKey, true, hostKey)
	e.revoke(h, hostKey, newKey)
	keys, err := e.hostKeys("git.example.org")
	if err != nil || len(keys) != 1 || !keys[0].Same(newKey) {
		t.Fatalf("after rotation served %v, %v; want the new key only", keys, err)
	}
	e.wantLevel(h, hostKey, identity.LevelRevoked)

	// One machine, several names: its key may prove each of them, but a
	// host key is never also a person's.
	e.claim("host:a.lab.example.org", newKey)
	if err := e.claimErr("alice", newKey); identity.CodeOf(err) != identity.CodeFactorLinked {
		t.Errorf("a host key claimed for a person: %v, want factor_linked", err)
	}
	e.claim("alice", k1)
	if err := e.claimErr("host:b.lab.example.org", k1); identity.CodeOf(err) != identity.CodeFactorLinked {
		t.Errorf("a person's key claimed for a host: %v, want factor_linked", err)
	}

	// The operator's list decides what is served: a name dropped from it
	// is unknown, though its records stay.
	e2, err := identity.ParseHostPolicy([]string{"*.lab.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := identity.NewService(e.st, e.v, identity.ServiceOptions{Server: server, Now: func() time.Time { return e.clock }, Hosts: e2})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	if keys, err := e.hostKeys("git.example.org"); identity.CodeOf(err) != identity.CodeUnknownIdentity {
		t.Errorf("a dropped name serves %v, %v", keys, err)
	}
	if keys, err := e.hostKeys("a.lab.example.org"); err != nil || len(keys) != 1 {
		t.Errorf("a listed name serves %v, %v", keys, err)
	}
	for _, bad := range []string{"", "127.0.0.1", "a..b", "host:a.lab.example.org", strings.Repeat("x", 300)} {
		if _, err := e.hostKeys(bad); identity.CodeOf(err) != identity.CodeUnknownIdentity {
			t.Errorf("LookupHost(%q): %v, want unknown_identity", bad, err)
		}
	}
}

// TestReleaseHostFreesASquattedName: a squatter claims a listed host name
// with a key of their own, before the host; the operator releases it.
// The squatter's key is no longer served, nor proven (so no certificate),
// and the name may be claimed again; the real host claims it, and the
// squatter, racing after, finds it taken. The squatter cannot release it
// again by re-claiming with the released key while the host holds it,
// and a second release of a released host writes nothing.
func TestReleaseHostFreesASquattedName(t *testing.T) {
	e := newHostEnv(t, "*.lab.example.org")
	squatter, hostKey := sshKey("squatter"), sshKey("the real host key")
	const name, h = "db.lab.example.org", "host:db.lab.example.org"
	e.claim(h, squatter)
	if err := e.claimErr(h, hostKey); identity.CodeOf(err) != identity.CodeHandleTaken {
		t.Fatalf("before the release: %v, want handle_taken", err)
	}
	if _, err := e.svc.ReleaseHost(e.ctx, "nope..example"); identity.CodeOf(err) != identity.CodeBadHandle {
		t.Errorf("release of no host name: %v", err)
	}
	if _, err := e.svc.ReleaseHost(e.ctx, "other.lab.example.org"); identity.CodeOf(err) != identity.CodeUnknownIdentity {
		t.Errorf("release of an unknown host: %v", err)
	}
	before := len(e.log())
	released, err := e.svc.ReleaseHost(e.ctx, "DB.lab.example.org.")
	if err != nil || len(released) != 1 || !released[0].Same(squatter) {
		t.Fatalf("release: %v, %v", released, err)
	}
	recs := e.log()
	if len(recs) != before+1 || recs[len(recs)-1].Method != identity.MethodHostRelease || recs[len(recs)-1].Handle != h {
		t.Fatalf("the release wrote %+v", recs[before:])
	}
	if keys, err := e.hostKeys(name); err != nil || len(keys) != 0 {
		t.Fatalf("after the release: serves %v, %v", keys, err)
	}
	if again, err := e.svc.ReleaseHost(e.ctx, name); err != nil || len(again) != 0 || len(e.log()) != before+1 {
		t.Errorf("a second release: %v, %v, %d records", again, err, len(e.log())-before)
	}

	// The real host claims the name; the squatter, after, cannot.
	e.claim(h, hostKey)
	if keys, err := e.hostKeys(name); err != nil || len(keys) != 1 || !keys[0].Same(hostKey) {
		t.Fatalf("after the host's claim: serves %v, %v", keys, err)
	}
	if err := e.claimErr(h, squatter); identity.CodeOf(err) != identity.CodeHandleTaken {
		t.Errorf("the squatter's claim after the host's: %v, want handle_taken", err)
	}
	// The name is the host's again: a release of another host's name
	// does not free it, and its own stays held.
	if _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, h, squatter); identity.CodeOf(err) != identity.CodeHandleTaken {
		t.Errorf("a claim challenge for the held name: %v", err)
	}
	// The release record verifies offline (this test's other records are
	// signed by stand-in keys verify cannot check).
	for _, r := range e.log() {
		if r.Method != identity.MethodHostRelease {
			continue
		}
		if err := verify.Record(&r); err != nil {
			t.Errorf("record %d (%s): %v", r.Seq, r.Method, err)
		}
	}
	forged := recs[len(recs)-1]
	forged.Statement = identity.HostReleaseStatement(server, identity.Handle(h), hostKey, forged.Created)
	if err := verify.Record(&forged); err == nil {
		t.Error("a release record whose statement names another key verifies")
	}
}

// TestReleasedHostStaysHeldOnceClaimedAgain: a release frees the name
// only until a key claims it again. The host that claimed it after the
// release and then revoked its own key holds the name as a host never
// released would: a stranger's claim finds it taken, and so no stranger
// gets its host certificate.
func TestReleasedHostStaysHeldOnceClaimedAgain(t *testing.T) {
	e := newHostEnv(t, "*.lab.example.org")
	squatter, hostKey, stranger := sshKey("squatter"), sshKey("the real host key"), sshKey("a stranger")
	const h = "host:db.lab.example.org"
	e.claim(h, squatter)
	if _, err := e.svc.ReleaseHost(e.ctx, "db.lab.example.org"); err != nil {
		t.Fatal(err)
	}
	e.claim(h, hostKey)
	e.revoke(h, hostKey, hostKey)
	if err := e.claimErr(h, stranger); identity.CodeOf(err) != identity.CodeHandleTaken {
		t.Fatalf("a stranger's claim after the host revoked its key: %v, want handle_taken", err)
	}
	// Released again by the operator, the name is free once more.
	if _, err := e.svc.ReleaseHost(e.ctx, "db.lab.example.org"); err != nil {
		t.Fatal(err)
	}
	e.claim(h, stranger)
}
