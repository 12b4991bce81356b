package identity_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
)

const server = "Kith <https://keys.example.org>"

// env is a Service over the in-memory store and the fake verifier, with
// a clock the test moves and a record of what subscribers were told.
type env struct {
	t       *testing.T
	ctx     context.Context
	st      *inprocess.Store
	v       *inprocess.Verifier
	svc     *identity.Service
	clock   time.Time
	changed [][]identity.Handle
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), st: inprocess.New(), v: inprocess.NewVerifier(),
		clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	svc, err := identity.NewService(e.st, e.v, identity.ServiceOptions{
		Server: server,
		Now:    func() time.Time { return e.clock },
		Rand:   rand.NewChaCha8([32]byte{1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.Subscribe(func(ctx context.Context, hs []identity.Handle) { e.changed = append(e.changed, slices.Clone(hs)) })
	e.svc = svc
	return e
}

// sshKey returns an SSH factor with a well-formed ed25519 blob made from
// name, and its true fingerprint.
func sshKey(name string) identity.Factor {
	sum := sha256.Sum256([]byte(name))
	var blob []byte
	blob = binary.BigEndian.AppendUint32(blob, 11)
	blob = append(blob, "ssh-ed25519"...)
	blob = binary.BigEndian.AppendUint32(blob, 32)
	blob = append(blob, sum[:]...)
	fp := sha256.Sum256(blob)
	return identity.SSHFactor("SHA256:"+base64.RawStdEncoding.EncodeToString(fp[:]), blob)
}

// pgpKey returns an OpenPGP factor with a v4-sized fingerprint made from
// name.
func pgpKey(name string) identity.Factor {
	sum := sha1.Sum([]byte(name))
	return identity.PGPFactor(sum[:])
}

// sign returns f's fake signature over statement.
func sign(f identity.Factor, statement []byte) *identity.Proof {
	switch f.Kind {
	case identity.KindSSH:
		return &identity.Proof{Factor: f, Signature: inprocess.SignSSH(f.Data, statement)}
	case identity.KindPGP:
		return &identity.Proof{Factor: f, Signature: inprocess.SignPGP(f.Value, statement)}
	}
	return &identity.Proof{Factor: f, Signature: []byte("x")}
}

func authSub(k identity.Factor) identity.KeyLink {
	return identity.KeyLink{Method: identity.MethodPGPAuthSubkey, To: k, Label: "sub",
		Statement: []byte("subkey " + k.Value), Signature: []byte("binding")}
}

func authSubSigned(k identity.Factor) identity.KeyLink {
	l := authSub(k)
	l.Method, l.Signature = identity.MethodPGPAuthSubkeySigned, []byte("binding with back-signature")
	return l
}

func uid(email string) identity.KeyLink {
	return identity.KeyLink{Method: identity.MethodPGPUIDSelfSig, To: identity.EmailFactor(email),
		Statement: []byte("uid <" + email + ">"), Signature: []byte("selfsig")}
}

// storeKey stores the OpenPGP key p carrying links in the fake verifier.
func (e *env) storeKey(p identity.Factor, links ...identity.KeyLink) {
	e.v.SetPGPKey(p.Value, []byte("key "+p.Value), links)
}

// login returns a login of account name that the verifier accepts.
func (e *env) login(name string) identity.Login {
	l := identity.Login{Account: identity.OIDCFactor("https://id.example.org", name), Provider: "example",
		ClientID: "kith", AuthTime: e.clock, IDToken: "token-" + name, SigningKey: []byte("jwk")}
	e.v.AddLogin(l)
	return l
}

// consentOf returns l (a login the verifier accepts) as a consent login
// approving statement: the verifier accepts its token only with the nonce
// that commits to the statement.
func (e *env) consentOf(l identity.Login, statement []byte) identity.Consent {
	salt := make([]byte, identity.ConsentSaltSize)
	crand.Read(salt)
	l.Nonce = identity.ConsentNonce(statement, salt)
	l.IDToken += "-consent-" + l.Nonce
	e.v.AddLogin(l)
	l.Nonce = "" // the frontend does not set it; the Service does
	return identity.Consent{Login: l, Salt: salt}
}

// claimLoginErr claims h with a consent login l.
func (e *env) claimLoginErr(h string, l identity.Login) error {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, h, l.Account)
	if err != nil {
		return err
	}
	_, err = e.svc.ClaimWithLogin(e.ctx, c.Statement, e.consentOf(l, c.Statement), l)
	return err
}

// claimLogin claims h with a consent login l, or fails the test.
func (e *env) claimLogin(h string, l identity.Login) {
	e.t.Helper()
	if err := e.claimLoginErr(h, l); err != nil {
		e.t.Fatalf("claim %s with login %s: %v", h, l.Account, err)
	}
}

// linkLoginErr links l's account to h, approved by a consent login of by.
func (e *env) linkLoginErr(h string, by, l identity.Login) error {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeAdd, h, l.Account)
	if err != nil {
		return err
	}
	return e.svc.LinkLogin(e.ctx, c.Statement, e.consentOf(by, c.Statement), l)
}

// addWithSession adds f to h with f's signature, approved by a consent
// login of l.
func (e *env) addWithSessionErr(h string, f identity.Factor, withNew bool, l identity.Login) error {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeAdd, h, f)
	if err != nil {
		return err
	}
	req := identity.SessionAddRequest{Statement: c.Statement, Consent: e.consentOf(l, c.Statement)}
	if withNew {
		req.New = sign(f, c.Statement)
	}
	return e.svc.AddWithSession(e.ctx, req)
}

// deleteErr deletes h with a consent login l: a delete statement for
// l's account, approved by l.
func (e *env) deleteErr(h string, l identity.Login) (int, error) {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeDelete, h, l.Account)
	if err != nil {
		return 0, err
	}
	_, n, err := e.svc.DeleteWithSession(e.ctx, c.Statement, e.consentOf(l, c.Statement))
	return n, err
}

func (e *env) issue(p identity.Purpose, h string, f identity.Factor) *identity.Challenge {
	e.t.Helper()
	c, err := e.svc.IssueChallenge(e.ctx, p, h, f)
	if err != nil {
		e.t.Fatalf("issue %s %s %s: %v", p, h, f, err)
	}
	return c
}

func (e *env) claimErr(h string, f identity.Factor) error {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, h, f)
	if err != nil {
		return err
	}
	_, err = e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(f, c.Statement)})
	return err
}

func (e *env) claim(h string, f identity.Factor) {
	e.t.Helper()
	if err := e.claimErr(h, f); err != nil {
		e.t.Fatalf("claim %s with %s: %v", h, f, err)
	}
}

// addErr adds f to h: with f's own signature when withNew, with by's
// consent when by is not zero.
func (e *env) addErr(h string, f identity.Factor, withNew bool, by identity.Factor) error {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeAdd, h, f)
	if err != nil {
		return err
	}
	req := identity.AddRequest{Statement: c.Statement}
	if withNew {
		req.New = sign(f, c.Statement)
	}
	if !by.IsZero() {
		req.By = sign(by, c.Statement)
	}
	return e.svc.Add(e.ctx, req)
}

func (e *env) add(h string, f identity.Factor, withNew bool, by identity.Factor) {
	e.t.Helper()
	if err := e.addErr(h, f, withNew, by); err != nil {
		e.t.Fatalf("add %s to %s: %v", f, h, err)
	}
}

func (e *env) revokeErr(h string, f, by identity.Factor) error {
	c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeRevoke, h, f)
	if err != nil {
		return err
	}
	return e.svc.Revoke(e.ctx, identity.RevokeRequest{Statement: c.Statement, By: *sign(by, c.Statement)})
}

func (e *env) revoke(h string, f, by identity.Factor) {
	e.t.Helper()
	if err := e.revokeErr(h, f, by); err != nil {
		e.t.Fatalf("revoke %s from %s: %v", f, h, err)
	}
}

func (e *env) sync(p identity.Factor) {
	e.t.Helper()
	fp := mustHex(e.t, p.Value)
	if err := e.svc.SyncKey(e.ctx, fp); err != nil {
		e.t.Fatalf("sync %s: %v", p, err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) level(h string, f identity.Factor) identity.Level {
	e.t.Helper()
	_, a, _, err := e.svc.Lookup(e.ctx, h)
	if err != nil {
		e.t.Fatalf("lookup %s: %v", h, err)
	}
	st, _ := a.Status(f)
	return st.Level
}

func (e *env) wantLevel(h string, f identity.Factor, want identity.Level) {
	e.t.Helper()
	if got := e.level(h, f); got != want {
		e.t.Errorf("%s of %s: %s, want %s", f, h, got, want)
	}
}

// log returns the whole evidence log.
func (e *env) log() []identity.Evidence {
	e.t.Helper()
	recs, err := e.st.Log(e.ctx, 0, 1<<30)
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

var (
	k1, k2, k3 = sshKey("k1"), sshKey("k2"), sshKey("k3")
	pA, pM     = pgpKey("alice's key"), pgpKey("mallory's key")
	mail       = identity.EmailFactor("alice@example.org")
)

// TestServiceRefusals has a row for every refusal the Service makes: each
// sets up, then runs one operation that must be refused with the code,
// write nothing to the log and tell no subscriber.
func TestServiceRefusals(t *testing.T) {
	none := identity.Factor{}
	tests := []struct {
		name string
		code identity.Code
		// run sets up and returns the operation to refuse.
		run func(e *env) func() error
	}{
		{"a purpose that is not claim, add or revoke", identity.CodeBadRequest, func(e *env) func() error {
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, "destroy", "alice", k1); return err }
		}},
		{"an add with neither proof", identity.CodeBadRequest, func(e *env) func() error {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeAdd, "alice", k2)
			return func() error { return e.svc.Add(e.ctx, identity.AddRequest{Statement: c.Statement}) }
		}},
		{"an authorising proof that names no factor", identity.CodeBadRequest, func(e *env) func() error {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeAdd, "alice", k2)
			by := sign(k1, c.Statement)
			by.Factor = none
			return func() error { return e.svc.Add(e.ctx, identity.AddRequest{Statement: c.Statement, By: by}) }
		}},
		{"a handle in upper case", identity.CodeBadHandle, func(e *env) func() error {
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "Alice", k1); return err }
		}},
		{"a statement naming a bad handle", identity.CodeBadHandle, func(e *env) func() error {
			c, err := identity.NewChallenge(server, identity.PurposeClaim, "-x-", k1, make([]byte, 32), e.clock)
			if err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k1, c.Statement)})
				return err
			}
		}},
		{"a login claiming a bad handle", identity.CodeBadHandle, func(e *env) func() error {
			l := e.login("carol")
			return func() error { return e.claimLoginErr("ca_rol", l) }
		}},
		{"a host name the operator does not list", identity.CodeHostNotAllowed, func(e *env) func() error {
			return func() error {
				_, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "host:git.example.org", k1)
				return err
			}
		}},
		{"a reserved handle", identity.CodeReservedHandle, func(e *env) func() error {
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "admin", k1); return err }
		}},
		{"a claim challenge for a taken handle", identity.CodeHandleTaken, func(e *env) func() error {
			e.claim("alice", k1)
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "alice", k2); return err }
		}},
		{"a claim answered after another took the handle", identity.CodeHandleTaken, func(e *env) func() error {
			c1 := e.issue(identity.PurposeClaim, "alice", k1)
			c2 := e.issue(identity.PurposeClaim, "alice", k2)
			if _, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c1.Statement, Proof: *sign(k1, c1.Statement)}); err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c2.Statement, Proof: *sign(k2, c2.Statement)})
				return err
			}
		}},
		{"a login claiming a taken handle", identity.CodeHandleTaken, func(e *env) func() error {
			l := e.login("carol")
			c, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "alice", l.Account)
			if err != nil {
				e.t.Fatal(err)
			}
			cl := e.consentOf(l, c.Statement)
			e.claim("alice", k1)
			return func() error { _, err := e.svc.ClaimWithLogin(e.ctx, c.Statement, cl, cl.Login); return err }
		}},
		{"an add challenge for no identity", identity.CodeUnknownIdentity, func(e *env) func() error {
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeAdd, "nobody", k1); return err }
		}},
		{"an add answered for no identity", identity.CodeUnknownIdentity, func(e *env) func() error {
			e.claim("alice", k1)
			c, err := identity.NewChallenge(server, identity.PurposeAdd, "nobody", k2, make([]byte, 32), e.clock)
			if err != nil {
				e.t.Fatal(err)
			}
			if err := e.st.SaveChallenge(e.ctx, c); err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				return e.svc.Add(e.ctx, identity.AddRequest{Statement: c.Statement, New: sign(k2, c.Statement), By: sign(k1, c.Statement)})
			}
		}},
		{"a login linked to no identity", identity.CodeUnknownIdentity, func(e *env) func() error {
			by, l := e.login("carol"), e.login("carol2")
			c, err := identity.NewChallenge(server, identity.PurposeAdd, "nobody", l.Account, make([]byte, 32), e.clock)
			if err != nil {
				e.t.Fatal(err)
			}
			if err := e.st.SaveChallenge(e.ctx, c); err != nil {
				e.t.Fatal(err)
			}
			return func() error { return e.svc.LinkLogin(e.ctx, c.Statement, e.consentOf(by, c.Statement), l) }
		}},
		{"deleting no identity", identity.CodeUnknownIdentity, func(e *env) func() error {
			l := e.login("carol")
			return func() error { _, err := e.deleteErr("nobody", l); return err }
		}},
		{"recording an email for no identity", identity.CodeUnknownIdentity, func(e *env) func() error {
			l := e.login("carol")
			l.Email = identity.EmailFactor("carol@example.org")
			e.v.AddLogin(l)
			return func() error { return e.svc.RecordLoginEmail(e.ctx, "nobody", l) }
		}},
		{"an SSH factor that is not a fingerprint", identity.CodeBadFactor, func(e *env) func() error {
			f := identity.Factor{Kind: identity.KindSSH, Value: "MD5:aa", Data: k1.Data}
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeClaim, "alice", f); return err }
		}},
		{"a login by an account that is not OpenID Connect", identity.CodeBadFactor, func(e *env) func() error {
			l := e.login("carol")
			c := e.issue(identity.PurposeClaim, "carol", k1)
			cl := e.consentOf(l, c.Statement)
			cl.Login.Account = k1
			return func() error { _, err := e.svc.ClaimWithLogin(e.ctx, c.Statement, cl, cl.Login); return err }
		}},
		{"a login with a bad verified email", identity.CodeBadFactor, func(e *env) func() error {
			l := e.login("carol")
			c := e.issue(identity.PurposeClaim, "carol", l.Account)
			cl := e.consentOf(l, c.Statement)
			cl.Login.Email = identity.Factor{Kind: identity.KindEmail, Value: "not an address"}
			return func() error { _, err := e.svc.ClaimWithLogin(e.ctx, c.Statement, cl, cl.Login); return err }
		}},
		{"a claim by an OpenPGP key that is not stored", identity.CodeUnknownKey, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", pA)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(pA, c.Statement)})
				return err
			}
		}},
		{"a statement this server did not write", identity.CodeBadStatement, func(e *env) func() error {
			st := []byte("I am alice, trust me\n")
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: st, Proof: *sign(k1, st)})
				return err
			}
		}},
		{"a statement that differs from the one issued with its nonce", identity.CodeStatementChanged, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			forged, err := identity.NewChallenge(server, identity.PurposeClaim, "alice", k1, c.Nonce, e.clock.Add(time.Second))
			if err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: forged.Statement, Proof: *sign(k1, forged.Statement)})
				return err
			}
		}},
		{"a statement issued by another server", identity.CodeWrongServer, func(e *env) func() error {
			c, err := identity.NewChallenge("Other <https://other.example>", identity.PurposeClaim, "alice", k1, make([]byte, 32), e.clock)
			if err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k1, c.Statement)})
				return err
			}
		}},
		{"an add statement answered as a claim", identity.CodeWrongPurpose, func(e *env) func() error {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeAdd, "alice", k2)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k2, c.Statement)})
				return err
			}
		}},
		{"a statement with a nonce this server never issued", identity.CodeUnknownNonce, func(e *env) func() error {
			c, err := identity.NewChallenge(server, identity.PurposeClaim, "alice", k1, make([]byte, 32), e.clock)
			if err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k1, c.Statement)})
				return err
			}
		}},
		{"a challenge answered twice", identity.CodeNonceUsed, func(e *env) func() error {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeAdd, "alice", k2)
			req := identity.AddRequest{Statement: c.Statement, New: sign(k2, c.Statement), By: sign(k1, c.Statement)}
			if err := e.svc.Add(e.ctx, req); err != nil {
				e.t.Fatal(err)
			}
			// Not already_linked: the nonce is checked first.
			return func() error { return e.svc.Add(e.ctx, req) }
		}},
		{"a challenge answered too late", identity.CodeExpired, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			e.clock = e.clock.Add(identity.ChallengeTTL + time.Second)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k1, c.Statement)})
				return err
			}
		}},
		{"a signature over another statement", identity.CodeBadSignature, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			other := e.issue(identity.PurposeClaim, "alice", k1)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k1, other.Statement)})
				return err
			}
		}},
		{"no signature", identity.CodeBadSignature, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: identity.Proof{Factor: k1}})
				return err
			}
		}},
		{"an OpenPGP signature over another statement", identity.CodeBadSignature, func(e *env) func() error {
			e.storeKey(pA)
			c := e.issue(identity.PurposeClaim, "alice", pA)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(pA, []byte("other"))})
				return err
			}
		}},
		{"a login whose ID token does not verify", identity.CodeBadSignature, func(e *env) func() error {
			l := e.login("carol")
			c := e.issue(identity.PurposeClaim, "carol", l.Account)
			cl := e.consentOf(l, c.Statement)
			cl.Login.IDToken = "forged"
			return func() error { _, err := e.svc.ClaimWithLogin(e.ctx, c.Statement, cl, cl.Login); return err }
		}},
		{"a login for another account than its ID token's", identity.CodeBadSignature, func(e *env) func() error {
			l := e.login("carol")
			mallory := identity.OIDCFactor("https://id.example.org", "mallory")
			c := e.issue(identity.PurposeClaim, "mallory", mallory)
			cl := e.consentOf(l, c.Statement)
			cl.Login.Account = mallory
			return func() error { _, err := e.svc.ClaimWithLogin(e.ctx, c.Statement, cl, cl.Login); return err }
		}},
		{"an SSH signature in another namespace", identity.CodeWrongNamespace, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			p := identity.Proof{Factor: k1, Signature: inprocess.SignSSHNamespace("git", k1.Data, c.Statement)}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: p})
				return err
			}
		}},
		{"a proof by another factor than the statement's", identity.CodeWrongKey, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k2, c.Statement)})
				return err
			}
		}},
		{"an SSH signature made by another key", identity.CodeWrongKey, func(e *env) func() error {
			c := e.issue(identity.PurposeClaim, "alice", k1)
			p := identity.Proof{Factor: k1, Signature: inprocess.SignSSH(k2.Data, c.Statement)}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: p})
				return err
			}
		}},
		{"an OpenPGP signature made by another key", identity.CodeWrongKey, func(e *env) func() error {
			e.storeKey(pA)
			e.storeKey(pM)
			c := e.issue(identity.PurposeClaim, "alice", pA)
			p := identity.Proof{Factor: pA, Signature: inprocess.SignPGP(pM.Value, c.Statement)}
			return func() error {
				_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: p})
				return err
			}
		}},
		{"a claim by a factor proven for another identity", identity.CodeFactorLinked, func(e *env) func() error {
			e.claim("alice", k1)
			return func() error { return e.claimErr("bob", k1) }
		}},
		{"an add of a factor proven for another identity", identity.CodeFactorLinked, func(e *env) func() error {
			e.claim("alice", k1)
			e.claim("bob", k2)
			return func() error { return e.addErr("bob", k1, true, k2) }
		}},
		{"a consent-only add of a factor proven for another identity", identity.CodeFactorLinked, func(e *env) func() error {
			e.claim("alice", k1)
			e.claim("bob", k2)
			return func() error { return e.addErr("bob", k1, false, k2) }
		}},
		{"a login claim by an account proven for another identity", identity.CodeFactorLinked, func(e *env) func() error {
			l := e.login("carol")
			e.claimLogin("carol", l)
			return func() error { return e.claimLoginErr("carol2", l) }
		}},
		{"linking an account proven for another identity", identity.CodeFactorLinked, func(e *env) func() error {
			a, b := e.login("a"), e.login("b")
			for _, x := range []struct {
				h string
				l identity.Login
			}{{"aa", a}, {"bb", b}} {
				e.claimLogin(x.h, x.l)
			}
			return func() error { return e.linkLoginErr("aa", a, b) }
		}},
		{"an add of a factor already proven here", identity.CodeAlreadyLinked, func(e *env) func() error {
			e.claim("alice", k1)
			e.add("alice", k2, true, k1)
			return func() error { return e.addErr("alice", k2, true, k1) }
		}},
		{"linking an account already linked here", identity.CodeAlreadyLinked, func(e *env) func() error {
			a, b := e.login("a"), e.login("b")
			e.claimLogin("aa", a)
			if err := e.linkLoginErr("aa", a, b); err != nil {
				e.t.Fatal(err)
			}
			return func() error { return e.linkLoginErr("aa", a, b) }
		}},
		{"consent by a factor not proven here", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			e.claim("mallory", k3)
			return func() error { return e.addErr("alice", k2, true, k3) }
		}},
		{"a factor authorising itself", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			return func() error { return e.addErr("alice", k2, true, k2) }
		}},
		{"a session authorising its own account", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			l := e.login("carol")
			return func() error { return e.addWithSessionErr("alice", l.Account, false, l) }
		}},
		{"a session whose account is not proven here consenting", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			l := e.login("carol")
			return func() error { return e.addWithSessionErr("alice", k2, true, l) }
		}},
		{"a session's consent login made for another statement", identity.CodeBadSignature, func(e *env) func() error {
			l := e.login("alice")
			e.claimLogin("alice", l)
			other := e.issue(identity.PurposeAdd, "alice", k2)
			c := e.issue(identity.PurposeAdd, "alice", k1)
			cl := e.consentOf(l, other.Statement)
			return func() error {
				return e.svc.AddWithSession(e.ctx, identity.SessionAddRequest{Statement: c.Statement, New: sign(k1, c.Statement), Consent: cl})
			}
		}},
		{"a session's login that commits to no statement", identity.CodeBadRequest, func(e *env) func() error {
			l := e.login("alice")
			e.claimLogin("alice", l)
			c := e.issue(identity.PurposeAdd, "alice", k1)
			return func() error {
				return e.svc.AddWithSession(e.ctx, identity.SessionAddRequest{Statement: c.Statement, New: sign(k1, c.Statement), Consent: identity.Consent{Login: l}})
			}
		}},
		{"a session's plain login token offered as consent", identity.CodeBadSignature, func(e *env) func() error {
			l := e.login("alice")
			e.claimLogin("alice", l)
			c := e.issue(identity.PurposeRevoke, "alice", l.Account)
			salt := make([]byte, identity.ConsentSaltSize)
			return func() error {
				return e.svc.RevokeWithSession(e.ctx, c.Statement, identity.Consent{Login: l, Salt: salt})
			}
		}},
		{"a claim login for another account than the statement's", identity.CodeWrongKey, func(e *env) func() error {
			l := e.login("carol")
			c := e.issue(identity.PurposeClaim, "carol", identity.OIDCFactor("https://id.example.org", "dave"))
			return func() error {
				_, err := e.svc.ClaimWithLogin(e.ctx, c.Statement, e.consentOf(l, c.Statement), l)
				return err
			}
		}},
		{"a revocation by a factor not proven here", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			e.claim("mallory", k3)
			return func() error { return e.revokeErr("alice", k1, k3) }
		}},
		{"a session revocation by an account not proven here", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			l := e.login("carol")
			c := e.issue(identity.PurposeRevoke, "alice", k1)
			return func() error { return e.svc.RevokeWithSession(e.ctx, c.Statement, e.consentOf(l, c.Statement)) }
		}},
		{"an email recorded for an account not proven here", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			l := e.login("carol")
			l.Email = identity.EmailFactor("carol@example.org")
			e.v.AddLogin(l)
			return func() error { return e.svc.RecordLoginEmail(e.ctx, "alice", l) }
		}},
		{"deletion by a session not proven here", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			l := e.login("carol")
			return func() error { _, err := e.deleteErr("alice", l); return err }
		}},
		{"deletion approved by another account than the statement's", identity.CodeWrongKey, func(e *env) func() error {
			l := e.login("alice")
			e.claimLogin("alice", l)
			other := e.login("carol")
			c := e.issue(identity.PurposeDelete, "alice", l.Account)
			return func() error {
				_, _, err := e.svc.DeleteWithSession(e.ctx, c.Statement, e.consentOf(other, c.Statement))
				return err
			}
		}},
		{"deletion approved for another statement", identity.CodeBadSignature, func(e *env) func() error {
			l := e.login("alice")
			e.claimLogin("alice", l)
			c := e.issue(identity.PurposeDelete, "alice", l.Account)
			d := e.issue(identity.PurposeDelete, "alice", l.Account)
			consent := e.consentOf(l, d.Statement)
			return func() error { _, _, err := e.svc.DeleteWithSession(e.ctx, c.Statement, consent); return err }
		}},
		{"a delete statement for a key", identity.CodeUnsupported, func(e *env) func() error {
			e.claim("alice", k1)
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeDelete, "alice", k1); return err }
		}},
		{"deletion with a revoke statement", identity.CodeWrongPurpose, func(e *env) func() error {
			l := e.login("alice")
			e.claimLogin("alice", l)
			c := e.issue(identity.PurposeRevoke, "alice", l.Account)
			return func() error {
				_, _, err := e.svc.DeleteWithSession(e.ctx, c.Statement, e.consentOf(l, c.Statement))
				return err
			}
		}},
		{"an account link by a session not proven here", identity.CodeNotProven, func(e *env) func() error {
			e.claim("alice", k1)
			by, l := e.login("carol"), e.login("carol2")
			return func() error { return e.linkLoginErr("alice", by, l) }
		}},
		{"possession of a factor nobody authorised", identity.CodeNotAuthorized, func(e *env) func() error {
			e.claim("alice", k1)
			return func() error { return e.addErr("alice", k2, true, none) }
		}},
		{"possession of an auth subkey of a key only claimed here", identity.CodeNotAuthorized, func(e *env) func() error {
			e.claim("alice", k1)
			e.storeKey(pA, authSub(k2))
			e.add("alice", pA, false, k1) // consent only: pA is claimed
			e.sync(pA)
			if got := e.level("alice", k2); got != identity.LevelClaimed {
				e.t.Fatalf("k2 through a claimed key: %s, want claimed", got)
			}
			return func() error { return e.addErr("alice", k2, true, none) }
		}},
		{"possession after the identity revoked the factor", identity.CodeNotAuthorized, func(e *env) func() error {
			e.storeKey(pA, authSub(k2))
			e.claim("alice", pA)
			e.revoke("alice", k2, pA)
			return func() error { return e.addErr("alice", k2, true, none) }
		}},
		{"revoking a factor that is not linked", identity.CodeNotLinked, func(e *env) func() error {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeRevoke, "alice", k2)
			return func() error {
				return e.svc.Revoke(e.ctx, identity.RevokeRequest{Statement: c.Statement, By: *sign(k1, c.Statement)})
			}
		}},
		{"revoking a factor twice", identity.CodeAlreadyRevoked, func(e *env) func() error {
			e.claim("alice", k1)
			e.add("alice", k2, true, k1)
			e.revoke("alice", k2, k1)
			return func() error { return e.revokeErr("alice", k2, k1) }
		}},
		{"who proves a factor nobody proved", identity.CodeNotLinked, func(e *env) func() error {
			e.claim("alice", k1)
			e.add("alice", k2, false, k1) // claimed only
			return func() error { _, err := e.svc.WhoProves(e.ctx, k2); return err }
		}},
		{"a challenge for an email", identity.CodeUnsupported, func(e *env) func() error {
			return func() error { _, err := e.svc.IssueChallenge(e.ctx, identity.PurposeAdd, "alice", mail); return err }
		}},
		{"consent signed by an email", identity.CodeUnsupported, func(e *env) func() error {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeAdd, "alice", k2)
			by := &identity.Proof{Factor: mail, Signature: []byte("x")}
			return func() error {
				return e.svc.Add(e.ctx, identity.AddRequest{Statement: c.Statement, New: sign(k2, c.Statement), By: by})
			}
		}},
	}
	covered := map[identity.Code]bool{}
	for _, tt := range tests {
		covered[tt.code] = true
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			op := tt.run(e)
			before := len(e.log())
			e.changed = nil
			err := op()
			if got := identity.CodeOf(err); got != tt.code {
				t.Fatalf("got %v (code %q), want code %q", err, got, tt.code)
			}
			if n := len(e.log()); n != before {
				t.Errorf("the refusal wrote %d records", n-before)
			}
			if len(e.changed) != 0 {
				t.Errorf("the refusal told subscribers %v changed", e.changed)
			}
		})
	}
	for _, c := range []identity.Code{
		identity.CodeBadRequest, identity.CodeBadHandle, identity.CodeReservedHandle, identity.CodeHandleTaken,
		identity.CodeUnknownIdentity, identity.CodeBadFactor, identity.CodeUnknownKey, identity.CodeBadStatement,
		identity.CodeStatementChanged, identity.CodeWrongServer, identity.CodeWrongPurpose, identity.CodeUnknownNonce,
		identity.CodeNonceUsed, identity.CodeExpired, identity.CodeBadSignature, identity.CodeWrongNamespace,
		identity.CodeWrongKey, identity.CodeFactorLinked, identity.CodeAlreadyLinked, identity.CodeNotProven,
		identity.CodeNotAuthorized, identity.CodeNotLinked, identity.CodeAlreadyRevoked, identity.CodeUnsupported, identity.CodeHostNotAllowed,
	} {
		if !covered[c] {
			t.Errorf("no row for code %s", c)
		}
	}
}

// lastRecord returns the log's last record.
func (e *env) lastRecord() identity.Evidence {
	e.t.Helper()
	log := e.log()
	if len(log) == 0 {
		e.t.Fatal("empty log")
	}
	return log[len(log)-1]
}

func (e *env) wantWhoProves(f identity.Factor, want string) {
	e.t.Helper()
	h, err := e.svc.WhoProves(e.ctx, f)
	if want == "" {
		if identity.CodeOf(err) != identity.CodeNotLinked {
			e.t.Errorf("who proves %s: %q, %v; want not_linked", f, h, err)
		}
		return
	}
	if err != nil || string(h) != want {
		e.t.Errorf("who proves %s: %q, %v; want %q", f, h, err, want)
	}
}

func wantCode(t *testing.T, err error, code identity.Code) {
	t.Helper()
	if got := identity.CodeOf(err); got != code {
		t.Fatalf("got %v (code %q), want %q", err, got, code)
	}
}

// TestServiceTrustRules has a row for every trust rule of Assess's doc and
// links.go, played through the Service.
func TestServiceTrustRules(t *testing.T) {
	none := identity.Factor{}
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"a claim proves its factor", func(t *testing.T, e *env) {
			e.claim("alice", k1)
			e.wantLevel("alice", k1, identity.LevelProven)
			e.wantWhoProves(k1, "alice")
		}},
		{"an add needs consent and possession", func(t *testing.T, e *env) {
			e.claim("alice", k1)
			e.add("alice", k2, false, k1)
			e.wantLevel("alice", k2, identity.LevelClaimed)
			e.wantWhoProves(k2, "")
			e.add("alice", k2, true, none)
			e.wantLevel("alice", k2, identity.LevelProven)
			e.add("alice", k3, true, k1)
			e.wantLevel("alice", k3, identity.LevelProven)
			e.wantWhoProves(k3, "alice")
		}},
		{"a session's consent and the factor's possession prove it", func(t *testing.T, e *env) {
			l := e.login("alice")
			e.claimLogin("alice", l)
			if err := e.addWithSessionErr("alice", k1, true, l); err != nil {
				t.Fatal(err)
			}
			e.wantLevel("alice", k1, identity.LevelProven)
		}},
		{"a claim elsewhere never blocks the factor's holder", func(t *testing.T, e *env) {
			// Mallory claims alice's public SSH keys: one bound into his
			// OpenPGP key, one added with his consent only.
			e.storeKey(pM, authSub(k1))
			e.claim("mallory", pM)
			e.claim("mallory2", k3)
			e.add("mallory2", k2, false, k3)
			e.wantLevel("mallory", k1, identity.LevelClaimed)
			e.wantLevel("mallory2", k2, identity.LevelClaimed)
			e.claim("alice", k1)
			e.add("alice", k2, true, k1)
			e.wantLevel("alice", k1, identity.LevelProven)
			e.wantLevel("alice", k2, identity.LevelProven)
			e.wantWhoProves(k1, "alice")
			e.wantWhoProves(k2, "alice")
			// And the holder's proof does not let mallory's claim grow.
			e.wantLevel("mallory", k1, identity.LevelClaimed)
		}},
		{"an auth subkey is a claim", func(t *testing.T, e *env) {
			e.storeKey(pA, authSub(k1), uid("alice@example.org"))
			e.claim("alice", pA)
			e.wantLevel("alice", pA, identity.LevelProven)
			e.wantLevel("alice", k1, identity.LevelClaimed)
			_, a, _, _ := e.svc.Lookup(e.ctx, "alice")
			if st, _ := a.Status(k1); !st.Parent.Same(pA) {
				t.Errorf("k1's parent: %v, want %s", st.Parent, pA)
			}
			e.wantWhoProves(k1, "")
		}},
		{"a user ID's email is only ever claimed", func(t *testing.T, e *env) {
			e.storeKey(pA, uid("alice@example.org"))
			e.claim("alice", pA)
			e.wantLevel("alice", mail, identity.LevelClaimed)
		}},
		{"a back-signed auth subkey is proven while its key is proven", func(t *testing.T, e *env) {
			e.storeKey(pA, authSubSigned(k1))
			e.claim("alice", pA)
			e.wantLevel("alice", k1, identity.LevelProven)
			e.wantWhoProves(k1, "alice")
			e.revoke("alice", pA, pA)
			if got := e.level("alice", k1); got == identity.LevelProven {
				t.Errorf("k1 of a revoked key: %s", got)
			}
			e.wantWhoProves(k1, "")
		}},
		{"the SSH key's own add signature proves an auth-subkey claim", func(t *testing.T, e *env) {
			e.storeKey(pA, authSub(k1))
			e.claim("alice", pA)
			e.add("alice", k1, true, none)
			e.wantLevel("alice", k1, identity.LevelProven)
		}},
		{"possession signed before the key carries the subkey counts", func(t *testing.T, e *env) {
			e.storeKey(pA)
			e.claim("alice", pA)
			// The SSH key cannot be added alone yet...
			wantCode(t, e.addErr("alice", k1, true, none), identity.CodeNotAuthorized)
			// ...but with the key's consent its possession counts at once.
			e.add("alice", k1, true, pA)
			e.wantLevel("alice", k1, identity.LevelProven)
		}},
		{"a key that stops carrying a link gets a revocation record", func(t *testing.T, e *env) {
			e.storeKey(pA, authSub(k1))
			e.claim("alice", pA)
			e.add("alice", k1, true, none)
			carried := -1
			for _, r := range e.log() {
				if r.Method == identity.MethodPGPAuthSubkey && r.To.Same(k1) {
					carried = int(r.Seq)
				}
			}
			e.storeKey(pA)
			e.changed = nil
			e.sync(pA)
			r := e.lastRecord()
			if r.Method != identity.MethodRevocation || r.Handle != "" || !r.From.Same(pA) || !r.To.Same(k1) || int(r.Revokes) != carried {
				t.Errorf("last record after the key dropped k1: %+v, want the key's revocation of record %d", r, carried)
			}
			if got := e.level("alice", k1); got == identity.LevelProven {
				t.Errorf("k1 after the key dropped it: %s", got)
			}
			if len(e.changed) != 1 || !slices.Equal(e.changed[0], []identity.Handle{"alice"}) {
				t.Errorf("sync told subscribers %v, want [[alice]]", e.changed)
			}
		}},
		{"the identity's revocation wins over later key-carried records until a new signed consent", func(t *testing.T, e *env) {
			e.storeKey(pA, authSubSigned(k1))
			e.claim("alice", pA)
			e.revoke("alice", k1, pA)
			e.wantLevel("alice", k1, identity.LevelRevoked)
			e.storeKey(pA) // the key drops the subkey...
			e.sync(pA)
			e.storeKey(pA, authSubSigned(k1)) // ...and carries it again
			e.sync(pA)
			e.wantLevel("alice", k1, identity.LevelRevoked)
			wantCode(t, e.addErr("alice", k1, true, none), identity.CodeNotAuthorized)
			e.add("alice", k1, false, pA) // a new signed consent
			e.wantLevel("alice", k1, identity.LevelProven)
		}},
		{"a re-sync of an unchanged key appends nothing", func(t *testing.T, e *env) {
			e.storeKey(pA, authSub(k1), authSubSigned(k2), uid("alice@example.org"))
			e.claim("alice", pA)
			n := len(e.log())
			e.sync(pA)
			e.sync(pA)
			if got := len(e.log()); got != n {
				t.Errorf("re-syncs appended %d records", got-n)
			}
			// New signature bytes saying the same links are nothing new.
			l := authSub(k1)
			l.Signature = []byte("a re-made binding with another unhashed area")
			e.storeKey(pA, authSubSigned(k2), l, uid("alice@example.org"))
			e.sync(pA)
			if got := len(e.log()); got != n {
				t.Errorf("a re-signed link appended %d records", got-n)
			}
			// A changed expiry is a changed link: one new record, one revocation.
			l.Expires = e.clock.Add(24 * time.Hour)
			e.storeKey(pA, authSubSigned(k2), l, uid("alice@example.org"))
			e.sync(pA)
			if got := len(e.log()); got != n+2 {
				t.Errorf("a changed expiry appended %d records, want 2", got-n)
			}
		}},
		{"syncing a key no identity names appends nothing", func(t *testing.T, e *env) {
			e.storeKey(pM, authSub(k1))
			e.sync(pM)
			if n := len(e.log()); n != 0 {
				t.Errorf("appended %d records", n)
			}
		}},
		{"a refused answer leaves its challenge unanswered", func(t *testing.T, e *env) {
			e.claim("alice", k1)
			c := e.issue(identity.PurposeAdd, "alice", k2)
			wantCode(t, e.svc.Add(e.ctx, identity.AddRequest{Statement: c.Statement, New: sign(k2, c.Statement)}), identity.CodeNotAuthorized)
			if err := e.svc.Add(e.ctx, identity.AddRequest{Statement: c.Statement, New: sign(k2, c.Statement), By: sign(k1, c.Statement)}); err != nil {
				t.Fatalf("the same statement with consent: %v", err)
			}
			e.wantLevel("alice", k2, identity.LevelProven)
		}},
		{"subscribers hear of a write before it returns, and can read it", func(t *testing.T, e *env) {
			var saw []string
			e.svc.Subscribe(func(ctx context.Context, hs []identity.Handle) {
				for _, h := range hs {
					_, a, _, err := e.svc.Lookup(ctx, string(h))
					saw = append(saw, string(h)+" "+boolString(err == nil && a.Proven(k1)))
				}
			})
			e.claim("alice", k1)
			if !slices.Equal(saw, []string{"alice true"}) {
				t.Errorf("subscriber saw %v before the claim returned, want [alice true]", saw)
			}
		}},
		{"a write that records links a key carries tells subscribers of every identity naming the key", func(t *testing.T, e *env) {
			// Bob names alice's key (claimed only): what the key carries
			// counts in his assessment too.
			e.claim("bob", k3)
			e.storeKey(pA, authSubSigned(k1))
			e.add("bob", pA, false, k3)
			e.storeKey(pA, authSubSigned(k1), authSubSigned(k2))
			e.changed = nil
			e.claim("alice", pA) // records that pA now carries k2
			_, a, _, _ := e.svc.Lookup(e.ctx, "bob")
			if st, _ := a.Status(k2); st.Level != identity.LevelClaimed {
				t.Fatalf("k2 for bob: %s, want claimed", st.Level)
			}
			told := false
			for _, hs := range e.changed {
				told = told || hs == nil || slices.Contains(hs, "bob")
			}
			if !told {
				t.Errorf("bob's identity changed, but subscribers were told only %v", e.changed)
			}
		}},
		{"a factor its holder proved for two identities is named for the first", func(t *testing.T, e *env) {
			// Only k1's holder can make the back-signed binding, so only
			// they can have k1 proven for two identities; lookups by the
			// SSH key then name the identity that proved it first.
			e.claim("bob", k1)
			e.storeKey(pA, authSubSigned(k1))
			e.claim("alice", pA)
			if h, err := e.svc.WhoProves(e.ctx, k1); err != nil || h != "bob" {
				t.Errorf("WhoProves(k1) = %q, %v; want bob, who proved it first", h, err)
			}
		}},
		{"deletion revokes every factor, the session's account last", func(t *testing.T, e *env) {
			l := e.login("alice")
			e.claimLogin("alice", l)
			if err := e.addWithSessionErr("alice", k1, true, l); err != nil {
				t.Fatal(err)
			}
			l.PublicToken = true // a consent login's token, scope openid
			n, err := e.deleteErr("alice", l)
			if err != nil || n != 2 {
				t.Fatalf("delete: %d, %v; want 2 factors", n, err)
			}
			e.wantLevel("alice", k1, identity.LevelRevoked)
			e.wantLevel("alice", l.Account, identity.LevelRevoked)
			r := e.lastRecord()
			if !r.To.Same(l.Account) || r.Purpose != identity.PurposeDelete || !strings.Contains(string(r.Signature), "-consent-") || len(r.Consent) != identity.ConsentSaltSize {
				t.Errorf("last record %+v: want the account's revocation, with its consent token and salt", r)
			}
			if c, err := identity.ParseStatement(r.Statement); err != nil || c.Purpose != identity.PurposeDelete || !c.Factor.Same(l.Account) {
				t.Errorf("the revocation keeps statement %q (%v), want the delete statement", r.Statement, err)
			}
			// The handle stays taken.
			wantCode(t, e.claimErr("alice", k2), identity.CodeHandleTaken)
			// And k1 is free for anyone who proves it.
			e.claim("bob", k1)
		}},
		{"the log is hash-chained and reads leave artifacts out", func(t *testing.T, e *env) {
			e.storeKey(pA, authSub(k1))
			e.claim("alice", pA)
			e.add("alice", k1, true, none)
			log := e.log()
			var prev []byte
			for i := range log {
				if err := identity.CheckLink(&log[i], int64(i), prev); err != nil {
					t.Fatal(err)
				}
				if len(log[i].Statement) == 0 || log[i].SignerKey == nil {
					t.Errorf("log record %d without artifacts", log[i].Seq)
				}
				prev = log[i].Hash
			}
			_, recs, err := e.st.IdentityRecords(e.ctx, "alice")
			if err != nil || len(recs) != len(log) {
				t.Fatalf("identity records: %d, %v; want %d", len(recs), err, len(log))
			}
			for _, r := range recs {
				if r.Statement != nil || r.Signature != nil || r.SignerKey != nil {
					t.Errorf("identity record %d with artifacts", r.Seq)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newEnv(t)) })
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// sshModel is what the rules predict for one SSH key of alice's, whose
// OpenPGP key stays proven.
type sshModel struct {
	carried      identity.Method // the link alice's key carries now, "" for none
	authz        bool            // a consent since the last revocation
	possession   bool            // a possession proof since the last revocation
	direct       bool            // possession proven while authorised
	revokedSince bool            // revoked, and no consent since
}

func (m *sshModel) proven() bool {
	return m.direct || !m.revokedSince && m.carried != "" &&
		(m.carried == identity.MethodPGPAuthSubkeySigned || m.possession)
}

func (m *sshModel) claimed() bool {
	return !m.proven() && (m.authz || m.carried != "" && !m.revokedSince)
}

func (m *sshModel) revoke() {
	m.authz, m.possession, m.direct, m.revokedSince = false, false, false, true
}

// TestServiceRandomLinks plays a random sequence of key uploads by alice
// (with or without back-signatures), strangers' uploads of keys carrying
// alice's SSH keys, alice's revocations, consents and possession proofs,
// and checks after every step that the proven SSH keys of alice are what
// a simple model of the rules says, that the Service refuses exactly what
// the model says it must, and that refusals write nothing.
func TestServiceRandomLinks(t *testing.T) {
	e := newEnv(t)
	r := rand.New(rand.NewPCG(10, 4))
	// Alice works with her active newest SSH keys, and now and then makes
	// a new one: only a key nothing names yet can be proven by a
	// key-carried claim and a possession proof alone (after a consent its
	// possession proves it directly, after a revocation only a consent
	// helps), so new keys keep that rule exercised.
	const active, maxKeys = 4, 16
	keys := []identity.Factor{sshKey("r0"), sshKey("r1"), sshKey("r2"), sshKey("r3")}
	model := make([]sshModel, len(keys))
	e.storeKey(pA)
	e.claim("alice", pA)
	e.storeKey(pM)
	e.claim("mallory", pM)
	strangerCarries := make([]bool, len(keys))
	var history []string
	fail := func(format string, args ...any) {
		t.Helper()
		from := max(0, len(history)-12)
		t.Fatalf("after steps\n\t%s\n%s", joinLines(history[from:]), fmt.Sprintf(format, args...))
	}
	none := identity.Factor{}
	const steps = 400
	outcomes := map[string]int{}
	provenSteps := 0
	for step := range steps {
		e.clock = e.clock.Add(time.Second)
		i := len(keys) - active + r.IntN(active)
		k, m := keys[i], &model[i]
		before := len(e.log())
		var err error
		var want identity.Code
		var desc string
		switch op := r.IntN(11) / 2; op {
		case 0: // alice uploads her key with new subkeys, for her current SSH keys only
			var links []identity.KeyLink
			same := true
			for j, kj := range keys {
				var method identity.Method
				switch n := r.IntN(3); {
				case j < len(keys)-active:
				case n == 1:
					method = identity.MethodPGPAuthSubkey
					links = append(links, authSub(kj))
				case n == 2:
					method = identity.MethodPGPAuthSubkeySigned
					links = append(links, authSubSigned(kj))
				}
				same = same && model[j].carried == method
				model[j].carried = method
			}
			desc = fmt.Sprintf("alice's key carries %d subkeys", len(links))
			e.storeKey(pA, links...)
			err = e.svc.SyncKey(e.ctx, mustHex(t, pA.Value))
			if same && len(e.log()) != before {
				fail("step %d: re-sync of an unchanged key appended %d records", step, len(e.log())-before)
			}
		case 1: // a stranger uploads a key binding alice's SSH keys (no back-signature: he cannot make one)
			var links []identity.KeyLink
			for j, kj := range keys {
				strangerCarries[j] = j >= len(keys)-active && r.IntN(2) == 0
				if strangerCarries[j] {
					links = append(links, authSub(kj))
				}
			}
			desc = fmt.Sprintf("mallory's key carries %d of alice's keys", len(links))
			e.storeKey(pM, links...)
			err = e.svc.SyncKey(e.ctx, mustHex(t, pM.Value))
		case 5: // alice makes a new SSH key, which nothing names yet
			if len(keys) < maxKeys {
				keys = append(keys, sshKey(fmt.Sprint("r", len(keys))))
				model = append(model, sshModel{})
				strangerCarries = append(strangerCarries, false)
			}
			desc = fmt.Sprintf("alice makes r%d", len(keys)-1)
		case 2: // alice revokes
			desc = fmt.Sprintf("alice revokes r%d", i)
			err = e.revokeErr("alice", k, pA)
			switch {
			case m.proven() || m.claimed():
				m.revoke()
			case m.revokedSince:
				want = identity.CodeAlreadyRevoked
			default:
				want = identity.CodeNotLinked
			}
		case 3: // alice consents, with or without the SSH key's signature
			withNew := r.IntN(2) == 0
			desc = fmt.Sprintf("alice consents to r%d (possession %v)", i, withNew)
			err = e.addErr("alice", k, withNew, pA)
			if m.proven() {
				want = identity.CodeAlreadyLinked
			} else {
				m.authz, m.revokedSince = true, false
				m.direct = m.direct || withNew
			}
		case 4: // the SSH key proves possession alone
			desc = fmt.Sprintf("r%d proves possession", i)
			err = e.addErr("alice", k, true, none)
			switch {
			case m.proven():
				want = identity.CodeAlreadyLinked
			case !m.claimed():
				want = identity.CodeNotAuthorized
			case m.authz:
				m.direct = true
			default:
				m.possession = true
			}
		}
		history = append(history, fmt.Sprintf("%d: %s: %v", step, desc, err))
		outcomes[string(want)]++
		if got := identity.CodeOf(err); got != want || err != nil && want == "" {
			fail("step %d: got %v, want code %q", step, err, want)
		}
		if err != nil && len(e.log()) != before {
			fail("step %d: the refusal wrote %d records", step, len(e.log())-before)
		}
		_, a, _, lerr := e.svc.Lookup(e.ctx, "alice")
		if lerr != nil {
			fail("lookup: %v", lerr)
		}
		var got, wantProven []string
		for _, st := range a.Of(identity.KindSSH, identity.LevelProven) {
			got = append(got, st.Factor.Value)
		}
		for j, kj := range keys {
			if model[j].proven() {
				wantProven = append(wantProven, kj.Value)
			}
			h, _ := e.svc.WhoProves(e.ctx, kj)
			if model[j].proven() != (h == "alice") || h == "mallory" {
				fail("step %d: r%d proven by %q, model says proven=%v", step, j, h, model[j].proven())
			}
			if lvl := e.level("mallory", kj); lvl == identity.LevelProven || strangerCarries[j] != (lvl == identity.LevelClaimed) {
				fail("step %d: r%d is %s for mallory, his key carries it: %v", step, j, lvl, strangerCarries[j])
			}
		}
		if len(wantProven) > 0 {
			provenSteps++
		}
		slices.Sort(got)
		slices.Sort(wantProven)
		if !slices.Equal(got, wantProven) {
			fail("step %d: proven SSH keys %v, model says %v", step, got, wantProven)
		}
	}
	t.Logf("%d steps, %d records; outcomes %v; steps with a proven SSH key: %d", steps, len(e.log()), outcomes, provenSteps)
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n\t"
		}
		out += l
	}
	return out
}

// TestSignatureOverAlteredStatementSaysHow: a signature over the statement
// as a saved copy commonly alters it (final newline lost or doubled, CRLF
// line ends) is refused as statement_changed with a message naming the
// change; any other bad signature says the signed bytes must be exact.
func TestSignatureOverAlteredStatementSaysHow(t *testing.T) {
	k := sshKey("k")
	for _, tc := range []struct {
		name  string
		alter func([]byte) []byte
		code  identity.Code
		says  string
	}{
		{"final newline lost", func(b []byte) []byte { return bytes.TrimSuffix(b, []byte("\n")) }, identity.CodeStatementChanged, "without its final newline"},
		{"newline added", func(b []byte) []byte { return append(bytes.Clone(b), '\n') }, identity.CodeStatementChanged, "extra newline"},
		{"CRLF line ends", func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }, identity.CodeStatementChanged, "CRLF"},
		{"another text", func(b []byte) []byte { return []byte("other") }, identity.CodeBadSignature, "final newline included"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.issue(identity.PurposeClaim, "alice", k)
			before, _ := e.st.Log(e.ctx, 0, 1000)
			_, err := e.svc.Claim(e.ctx, identity.ClaimRequest{Statement: c.Statement, Proof: *sign(k, tc.alter(c.Statement))})
			if identity.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v (%s), want %s saying %q", err, identity.CodeOf(err), tc.code, tc.says)
			}
			if after, _ := e.st.Log(e.ctx, 0, 1000); len(after) != len(before) {
				t.Fatalf("a refused claim appended %d records", len(after)-len(before))
			}
		})
	}
}
