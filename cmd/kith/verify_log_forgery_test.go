package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
)

// TestVerifyLogFailsAFabricatedLogin is the attack of issue 11: whoever
// can write the database appends a claim by a Google account whose ID
// token is signed by a key the forger made, the key kept in the record
// itself. The record is well-formed and its token verifies with that key,
// so a verifier that takes the provider key from the record says ok; the
// log's rule is that a token verifies only with a key an earlier oidc.jwks
// record published, and none did.
func TestVerifyLogFailsAFabricatedLogin(t *testing.T) {
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
	claims, _ := json.Marshal(map[string]any{"iss": issuer, "sub": subject, "aud": client,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "auth_time": now.Unix()})
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	account := identity.OIDCFactor(issuer, subject)
	statement := identity.LoginStatementTitle + "\n\nserver: Kith test\npurpose: claim\nhandle: victim\nfactor: " + account.String() +
		"\nsigner: " + account.String() + "\nprovider: google\nclient_id: " + client +
		"\nauthenticated: " + now.UTC().Format(time.RFC3339) + "\nrecorded: " + now.UTC().Format(time.RFC3339) + "\n"
	forged := &identity.Evidence{Method: identity.MethodOIDCLogin, Purpose: identity.PurposeClaim, Handle: "victim",
		From: account, Statement: []byte(statement), Signature: []byte(token), SignerKey: jwk, Created: now}
	err = a.store.Update(context.Background(), func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.CreateIdentity(ctx, "victim", now); err != nil {
			return err
		}
		return tx.Append(ctx, forged)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The record on its own, with the key it carries, checks out: this
	// is what verify-log used to rely on.
	if err := verify.Record(forged); err != nil {
		t.Fatalf("the forged record is not even well-formed: %v", err)
	}
	a.integrate()
	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	if !errors.Is(err, errLogInvalid) || !strings.Contains(out, "record 1: FAIL: its ID token is checked with a key of https://accounts.google.com that no earlier oidc.jwks record published") {
		t.Fatalf("verify-log on a fabricated login: %v\n%s", err, out)
	}
}
