package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// TestVerifyLogWithPrivateArtifacts: a claim by a real provider's login
// whose email the provider verified. The public log holds neither the
// email nor the email login's ID token, only commitments; verify-log
// without the artifacts says which records it could not check, and
// with the owner's artifacts checks them; wrong artifacts fail; after the
// identity is deleted its artifacts are gone and the log still verifies,
// those records reported as erased.
func TestVerifyLogWithPrivateArtifacts(t *testing.T) {
	a := newAPIServer(t)
	op := startProvider(t)
	account := identity.OIDCFactor(op.Issuer, providerUser.Subject)
	emailToken, jwk := op.idToken(t, "the-first-login-of-the-account-nonce", "openid", "email")
	first := identity.Login{Account: account, Provider: "test", ClientID: providerClient, AuthTime: time.Now(), IDToken: emailToken, SigningKey: jwk,
		Email: identity.EmailFactor(providerUser.Email)}
	consent, _ := claimByConsent(t, a, op, "victim", first)
	a.integrate()

	resp, err := http.Get(a.srv.URL + "/api/v1/log")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(raw), providerUser.Email) || strings.Contains(string(raw), emailToken[:40]) {
		t.Errorf("/api/v1/log shows the verified email or its ID token:\n%s", raw)
	}

	out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
	if err != nil || !strings.Contains(out, "record 3: unchecked: verify login record 3: its proof is a private artifact: the ID token and email address are kept private") ||
		!strings.Contains(out, "ok: 2 records verified, 1 unchecked (what they prove is in private artifacts") {
		t.Fatalf("verify-log without artifacts: %v\n%s", err, out)
	}

	arts, err := a.svc.IdentityArtifacts(a.ctx, "victim")
	if err != nil || len(arts) != 1 || arts[0].Seq != 3 {
		t.Fatalf("artifacts: %+v, %v", arts, err)
	}
	file := filepath.Join(t.TempDir(), "artifacts.json")
	writeJSON(t, file, arts)
	out, _, err = kithCmd("verify-log", "--server", a.srv.URL, "--artifacts", file)
	if err != nil || !strings.Contains(out, "ok: 3 records verified, 1 checked with their artifacts;") || strings.Contains(out, "unchecked") {
		t.Fatalf("verify-log with the owner's artifacts: %v\n%s", err, out)
	}
	for i := range arts[0].Artifacts {
		if arts[0].Artifacts[i].Kind == identity.ArtifactEmail {
			arts[0].Artifacts[i].Value = []byte("mallory@example.org")
		}
	}
	writeJSON(t, file, arts)
	out, _, err = kithCmd("verify-log", "--server", a.srv.URL, "--artifacts", file)
	if !errors.Is(err, errLogInvalid) || !strings.Contains(out, "record 3: FAIL: record 3: email: the artifact does not match the record's commitment") {
		t.Fatalf("verify-log with a wrong email: %v\n%s", err, out)
	}

	d, err := a.svc.IssueChallenge(a.ctx, identity.PurposeDelete, "victim", account)
	if err != nil {
		t.Fatal(err)
	}
	delSalt := salt(t)
	del := consent
	del.IDToken, _ = op.idToken(t, identity.ConsentNonce(d.Statement, delSalt), "openid")
	if _, _, err := a.svc.DeleteWithSession(a.ctx, d.Statement, identity.Consent{Login: del, Salt: delSalt}); err != nil {
		t.Fatal(err)
	}
	if left, err := a.svc.IdentityArtifacts(a.ctx, "victim"); err != nil || len(left) != 0 {
		t.Fatalf("artifacts after deletion: %+v, %v", left, err)
	}
	a.integrate()
	out, _, err = kithCmd("verify-log", "--server", a.srv.URL)
	if err != nil || !strings.Contains(out, "record 3: artifact erased: verify login record 3: its proof is a private artifact: artifact erased: the ID token and email address are gone") ||
		!strings.Contains(out, "1 of them artifact erased") {
		t.Fatalf("verify-log after the deletion: %v\n%s", err, out)
	}
}

func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
