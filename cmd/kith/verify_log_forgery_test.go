package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/oidc/oidctest"
)

// TestVerifyLogFailsAFabricatedLogin is the attack of issue 11: whoever
// can write the database appends a claim by a Google account whose ID
// token is signed by a key the forger made, the key kept in the record
// itself, and a "consent" by that account to add an SSH key the forger
// holds, with the key's own signature. The records are well-formed, the
// tokens verify with that key and even commit to their statements (the
// forger chose their nonces), so a verifier that takes the provider key
// from the record says ok; the log's rule is that a token verifies only
// with a key an earlier oidc.jwks record published, and none did.
func TestVerifyLogFailsAFabricatedLogin(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	a := newAPIServer(t)
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := (&jose.JSONWebKey{Key: &priv.PublicKey, KeyID: "forged", Algorithm: "ES256", Use: "sig"}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: "forged"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	const issuer, subject, client = "https://accounts.google.com", "104729", "kith-client"
	now := time.Now()
	token := func(nonce string) string {
		claims, _ := json.Marshal(map[string]any{"iss": issuer, "sub": subject, "aud": client, "nonce": nonce,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "auth_time": now.Unix()})
		jws, err := signer.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		s, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	account := identity.OIDCFactor(issuer, subject)
	claim := challengeText(t, identity.PurposeClaim, "victim", account)
	claimSalt := salt(t)
	forgedClaim := &identity.Evidence{Method: identity.MethodOIDCLogin, Purpose: identity.PurposeClaim, Handle: "victim",
		From: account, Statement: claim, Signature: []byte(token(identity.ConsentNonce(claim, claimSalt))), SignerKey: jwk,
		Consent: claimSalt, Created: now}
	key := newSSHKeyPair(t, t.TempDir(), "forger")
	keyFactor := sshFactor(t, key.pub)
	add := challengeText(t, identity.PurposeAdd, "victim", keyFactor)
	addSalt := salt(t)
	forgedConsent := &identity.Evidence{Method: identity.MethodOIDCLogin, Purpose: identity.PurposeAdd, Handle: "victim",
		From: account, To: keyFactor, Statement: add, Signature: []byte(token(identity.ConsentNonce(add, addSalt))), SignerKey: jwk,
		Consent: addSalt, Created: now}
	possession := &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeAdd, Handle: "victim",
		From: keyFactor, Statement: add, Signature: []byte(key.sign(t, string(add))), SignerKey: keyFactor.Data, Created: now}
	err = a.store.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.CreateIdentity(ctx, "victim", now); err != nil {
			return err
		}
		for _, e := range []*identity.Evidence{forgedClaim, forgedConsent, possession} {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each record on its own, with the key it carries, checks out: this
	// is what verify-log used to rely on.
	for _, e := range []*identity.Evidence{forgedClaim, forgedConsent, possession} {
		if err := verify.Record(e); err != nil {
			t.Fatalf("the forged record %d is not even well-formed: %v", e.Seq, err)
		}
	}
	a.integrate()
	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	const noKey = "FAIL: its ID token is checked with a key of https://accounts.google.com that no earlier oidc.jwks record published"
	if !errors.Is(err, errLogInvalid) || !strings.Contains(out, "record 1: "+noKey) || !strings.Contains(out, "record 2: "+noKey) {
		t.Fatalf("verify-log on a fabricated login: %v\n%s", err, out)
	}
}

// TestVerifyLogFailsAReplayedLoginToken: a forger who holds real ID
// tokens of an account (logins it made for other reasons, whose provider
// key the log did publish) makes up a consent by that account to add the
// forger's SSH key. The tokens verify, with a recorded key, for the right
// account and client; but a consent's token must carry the nonce that
// commits to the record's statement, and these carry another.
func TestVerifyLogFailsAReplayedLoginToken(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	a := newAPIServer(t)
	op := startProvider(t)
	account := identity.OIDCFactor(op.Issuer, providerUser.Subject)

	// The real claim, through the identity service: its consent login's
	// nonce commits to the claim statement.
	login, claimSalt := claimByConsent(t, a, op, "victim", identity.Login{})
	claimToken, jwk := login.IDToken, login.SigningKey
	a.integrate()
	if out, _, err := kithCmd("verify-log", "--server", a.srv.URL); err != nil || !strings.Contains(out, "ok: 2 records verified;") {
		t.Fatalf("verify-log on the real claim: %v\n%s", err, out)
	}

	// The forgery: the forger's key, "approved" first by a plain login's
	// token (a random nonce) and then by the claim's own token and salt.
	key := newSSHKeyPair(t, t.TempDir(), "forger")
	keyFactor := sshFactor(t, key.pub)
	add := challengeText(t, identity.PurposeAdd, "victim", keyFactor)
	plain, _ := op.idToken(t, "a-random-nonce-of-a-login-made-elsewhere", "openid")
	now := time.Now()
	var forged []*identity.Evidence
	for _, tok := range []struct {
		token string
		salt  []byte
	}{{plain, salt(t)}, {claimToken, claimSalt}} {
		forged = append(forged, &identity.Evidence{Method: identity.MethodOIDCLogin, Purpose: identity.PurposeAdd, Handle: "victim",
			From: account, To: keyFactor, Statement: add, Signature: []byte(tok.token), SignerKey: jwk, Consent: tok.salt, Created: now})
	}
	forged = append(forged, &identity.Evidence{Method: identity.MethodSSHChallenge, Purpose: identity.PurposeAdd, Handle: "victim",
		From: keyFactor, Statement: add, Signature: []byte(key.sign(t, string(add))), SignerKey: keyFactor.Data, Created: now})
	err := a.store.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
		for _, e := range forged {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a.integrate()
	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	if !errors.Is(err, errLogInvalid) {
		t.Fatalf("verify-log on replayed tokens: %v\n%s", err, out)
	}
	for _, e := range forged[:2] {
		if want := "record " + strconv.FormatInt(e.Seq, 10) + ": FAIL: verify consent record " + strconv.FormatInt(e.Seq, 10) + ": the ID token's nonce does not commit to the statement"; !strings.Contains(out, want) {
			t.Errorf("verify-log does not fail record %d for its nonce:\n%s", e.Seq, out)
		}
	}
	if strings.Contains(out, "record "+strconv.FormatInt(forged[2].Seq, 10)+": FAIL") {
		t.Errorf("the possession record itself is well made; only its consent is forged:\n%s", out)
	}
}

// claimByConsent claims handle for the test provider's user through the
// identity service, approved by a consent login whose nonce commits to
// the claim statement (scope openid only, so its token holds nothing
// private and the record shows it), with first as the login that
// proposed the claim (zero: the consent login itself). It returns the
// consent login and its salt.
func claimByConsent(t *testing.T, a *apiServer, op *testProvider, handle string, first identity.Login) (identity.Login, []byte) {
	t.Helper()
	account := identity.OIDCFactor(op.Issuer, providerUser.Subject)
	c, err := a.svc.IssueChallenge(a.ctx, identity.PurposeClaim, handle, account)
	if err != nil {
		t.Fatal(err)
	}
	claimSalt := salt(t)
	token, jwk := op.idToken(t, identity.ConsentNonce(c.Statement, claimSalt), "openid")
	login := identity.Login{Account: account, Provider: "test", ClientID: providerClient, AuthTime: time.Now(), IDToken: token, SigningKey: jwk, PublicToken: true}
	if first.IDToken == "" {
		first = login
	}
	if _, err := a.svc.ClaimWithLogin(a.ctx, c.Statement, identity.Consent{Login: login, Salt: claimSalt}, first); err != nil {
		t.Fatal(err)
	}
	return login, claimSalt
}

// challengeText is a statement as this server would issue it.
func challengeText(t *testing.T, p identity.Purpose, h identity.Handle, f identity.Factor) []byte {
	t.Helper()
	nonce := make([]byte, identity.NonceSize)
	rand.Read(nonce)
	c, err := identity.NewChallenge("Kith test", p, h, f, nonce, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c.Statement
}

func salt(t *testing.T) []byte {
	t.Helper()
	b, err := identity.NewConsentSalt(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The test provider's account and Kith's client there.
var providerUser = oidctest.User{Subject: "u-victim", Username: "victim", Email: "victim@example.org", EmailVerified: true}

const (
	providerClient   = "kith"
	providerSecret   = "s3cr3t-forgery-test-client"
	providerRedirect = "https://127.0.0.1:9/login/test/callback"
)

// testProvider is a real OpenID provider that approves every login as
// providerUser.
type testProvider struct {
	*oidctest.Server
	hc *http.Client
}

func startProvider(t *testing.T) *testProvider {
	t.Helper()
	s, err := oidctest.Start(oidctest.Config{Users: []oidctest.User{providerUser},
		Clients:   []oidctest.Client{{ID: providerClient, Secret: providerSecret, RedirectURIs: []string{providerRedirect}}},
		AutoLogin: providerUser.Username})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &testProvider{Server: s, hc: s.HTTPClient()}
}

// idToken runs the code flow with nonce and returns the ID token and the
// provider's JWK that signs it, as its key set publishes it.
func (p *testProvider) idToken(t *testing.T, nonce string, scopes ...string) (string, []byte) {
	t.Helper()
	var meta struct {
		AuthURL  string `json:"authorization_endpoint"`
		TokenURL string `json:"token_endpoint"`
		JWKSURI  string `json:"jwks_uri"`
	}
	getJSON(t, p.hc, p.Issuer+"/.well-known/openid-configuration", &meta)
	cfg := oauth2.Config{ClientID: providerClient, ClientSecret: providerSecret, RedirectURL: providerRedirect,
		Scopes: scopes, Endpoint: oauth2.Endpoint{AuthURL: meta.AuthURL, TokenURL: meta.TokenURL}}
	verifier := oauth2.GenerateVerifier()
	stop := *p.hc
	stop.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), providerRedirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := stop.Get(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %s %v %v", resp.Status, loc, err)
	}
	tok, err := cfg.Exchange(context.WithValue(t.Context(), oauth2.HTTPClient, p.hc), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	getJSON(t, p.hc, meta.JWKSURI, &set)
	if raw == "" || len(set.Keys) != 1 {
		t.Fatalf("no ID token, or not one key: %q, %d keys", raw, len(set.Keys))
	}
	return raw, set.Keys[0]
}

func getJSON(t *testing.T, hc *http.Client, url string, v any) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// TestVerifyLogFailsADeletionWithoutConsent: whoever can write the
// database ends a victim's links with revocations that keep no proof, as
// account deletions were recorded before they took a consent login (the
// server's word, which verify-log used to pass with a warning), or with
// the victim's real claim token replayed as the deletion's consent. Both
// fail; a deletion through the identity service, approved by a login
// whose nonce commits to its delete statement, verifies.
func TestVerifyLogFailsADeletionWithoutConsent(t *testing.T) {
	a := newAPIServer(t)
	op := startProvider(t)
	account := identity.OIDCFactor(op.Issuer, providerUser.Subject)
	login, claimSalt := claimByConsent(t, a, op, "victim", identity.Login{})
	claimToken, jwk := login.IDToken, login.SigningKey
	claimSeq := int64(2) // record 1 is the provider's key set

	now := time.Now()
	revoke := challengeText(t, identity.PurposeRevoke, "victim", account)
	del := challengeText(t, identity.PurposeDelete, "victim", account)
	forged := []*identity.Evidence{
		// The server's word: no token, no key, no salt.
		{Method: identity.MethodRevocation, Purpose: identity.PurposeRevoke, Handle: "victim", From: account, To: account,
			Label: identity.DeletedLabel, Statement: revoke, Revokes: claimSeq, Created: now},
		// A delete statement "approved" by the claim's token and salt.
		{Method: identity.MethodRevocation, Purpose: identity.PurposeDelete, Handle: "victim", From: account, To: account,
			Label: identity.DeletedLabel, Statement: del, Signature: []byte(claimToken), SignerKey: jwk, Consent: claimSalt, Revokes: claimSeq, Created: now},
	}
	err := a.store.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
		for _, e := range forged {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a.integrate()
	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	if !errors.Is(err, errLogInvalid) || strings.Contains(out, "warning") {
		t.Fatalf("verify-log on deletions without consent: %v\n%s", err, out)
	}
	for i, why := range []string{"the record keeps no provider key", "the ID token's nonce does not commit to the statement"} {
		seq := strconv.FormatInt(forged[i].Seq, 10)
		if want := "record " + seq + ": FAIL: verify consent record " + seq + ": " + why; !strings.Contains(out, want) {
			t.Errorf("verify-log does not fail record %s with %q:\n%s", seq, why, out)
		}
	}
}

// TestVerifyLogChecksAConsentedDeletion: a deletion through the identity
// service keeps its delete statement, the consent login's token and its
// salt in each revocation, and verify-log checks them offline.
func TestVerifyLogChecksAConsentedDeletion(t *testing.T) {
	a := newAPIServer(t)
	op := startProvider(t)
	account := identity.OIDCFactor(op.Issuer, providerUser.Subject)
	login, claimSalt := claimByConsent(t, a, op, "victim", identity.Login{})
	d, err := a.svc.IssueChallenge(a.ctx, identity.PurposeDelete, "victim", account)
	if err != nil {
		t.Fatal(err)
	}
	delSalt := salt(t)
	del := login
	del.IDToken, _ = op.idToken(t, identity.ConsentNonce(d.Statement, delSalt), "openid")
	// A token for another statement is refused, and nothing is written.
	if _, _, err := a.svc.DeleteWithSession(a.ctx, d.Statement, identity.Consent{Login: login, Salt: claimSalt}); identity.CodeOf(err) != identity.CodeBadSignature {
		t.Fatalf("a deletion approved by the claim's token: %v, want bad_signature", err)
	}
	if _, n, err := a.svc.DeleteWithSession(a.ctx, d.Statement, identity.Consent{Login: del, Salt: delSalt}); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	a.integrate()
	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	if err != nil || !strings.Contains(out, "ok: 3 records verified;") || strings.Contains(out, "unchecked") {
		t.Fatalf("verify-log after a consented deletion: %v\n%s", err, out)
	}
}
