package postgres_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

// TestArtifactsStayOutOfTheLogInBothStores runs a claim with a verified
// email through the identity service over postgres and over the
// in-memory store, and checks that both keep the email and the ID token
// out of Log, hand them to IdentityArtifacts, erase them with the
// identity, and keep every hash.
func TestArtifactsStayOutOfTheLogInBothStores(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	pst, err := postgres.Open(context.Background(), dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pst.Close)
	for name, st := range map[string]identity.Store{"postgres": pst, "inprocess": inprocess.New()} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := inprocess.NewVerifier()
			svc, err := identity.NewService(st, v, identity.ServiceOptions{Server: "Kith test"})
			if err != nil {
				t.Fatal(err)
			}
			acct := identity.OIDCFactor("https://id.example.org", "alice")
			c, err := svc.IssueChallenge(ctx, identity.PurposeClaim, "alice", acct)
			if err != nil {
				t.Fatal(err)
			}
			salt := bytes.Repeat([]byte{3}, identity.ConsentSaltSize)
			consent := identity.Login{Account: acct, Provider: "p", ClientID: "kith", IDToken: "consent-token", SigningKey: []byte(`{"kty":"x"}`),
				PublicToken: true, Nonce: identity.ConsentNonce(c.Statement, salt)}
			first := identity.Login{Account: acct, Provider: "p", ClientID: "kith", IDToken: "first-token-with-alice@example.org",
				SigningKey: []byte(`{"kty":"x"}`), Email: identity.EmailFactor("alice@example.org")}
			v.AddLogin(consent)
			v.AddLogin(first)
			consent.Nonce = ""
			if _, err := svc.ClaimWithLogin(ctx, c.Statement, identity.Consent{Login: consent, Salt: salt}, first); err != nil {
				t.Fatal(err)
			}
			log, err := st.Log(ctx, 0, 100)
			if err != nil || len(log) != 3 {
				t.Fatalf("log: %d records, %v", len(log), err)
			}
			for i := range log {
				if bytes.Contains(log[i].CanonicalBytes(), []byte("alice@example.org")) || bytes.Contains(log[i].Signature, []byte("alice@")) {
					t.Errorf("record %d shows the email", log[i].Seq)
				}
				if !bytes.Equal(log[i].ComputeHash(), log[i].Hash) {
					t.Errorf("record %d: the public form hashes differently", log[i].Seq)
				}
			}
			if string(log[1].Signature) != "consent-token" || len(log[1].Commitments) != 0 {
				t.Errorf("the consent record hides its public token: %q %v", log[1].Signature, log[1].Commitments)
			}
			email := log[2]
			if email.Method != identity.MethodOIDCEmailVerified || email.To.Kind != identity.KindEmail || email.To.Value != "" || len(email.Signature) != 0 ||
				!email.Committed(identity.ArtifactEmail) || !email.Committed(identity.ArtifactIDToken) || email.Erased {
				t.Fatalf("email record in the log: %+v", email)
			}
			arts, err := st.IdentityArtifacts(ctx, "alice")
			if err != nil || len(arts) != 1 || arts[0].Seq != 3 || len(arts[0].Artifacts) != 2 {
				t.Fatalf("artifacts: %+v, %v", arts, err)
			}
			if err := email.Reveal(arts[0].Artifacts); err != nil || email.To.Value != "alice@example.org" || string(email.Signature) != first.IDToken {
				t.Fatalf("reveal: %v %+v", err, email)
			}
			_, recs, err := st.IdentityRecords(ctx, "alice")
			if err != nil || len(recs) != 2 || recs[1].To.Value != "alice@example.org" {
				t.Fatalf("the owner's records lost the email: %+v, %v", recs, err)
			}

			d, err := svc.IssueChallenge(ctx, identity.PurposeDelete, "alice", acct)
			if err != nil {
				t.Fatal(err)
			}
			del := consent
			del.IDToken, del.Nonce = "delete-consent-token", identity.ConsentNonce(d.Statement, salt)
			v.AddLogin(del)
			del.Nonce = ""
			if _, _, err := svc.DeleteWithSession(ctx, d.Statement, identity.Consent{Login: del, Salt: salt}); err != nil {
				t.Fatal(err)
			}
			if arts, err := st.IdentityArtifacts(ctx, "alice"); err != nil || len(arts) != 0 {
				t.Errorf("artifacts after deletion: %+v, %v", arts, err)
			}
			after, err := st.Log(ctx, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			for i := range log {
				if !bytes.Equal(after[i].ComputeHash(), log[i].Hash) {
					t.Errorf("record %d hashes differently after erasure", log[i].Seq)
				}
			}
			if !after[2].Erased || after[2].To.Kind != identity.KindEmail || after[1].Erased {
				t.Errorf("after erasure: email record %+v, consent record erased=%v", after[2], after[1].Erased)
			}
			if _, recs, _ := st.IdentityRecords(ctx, "alice"); len(recs) < 2 || !recs[1].To.IsZero() {
				t.Errorf("the erased email record still names the address: %+v", recs)
			}
			if name == "postgres" {
				conn, err := pgx.Connect(ctx, dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				var n int
				err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM factors WHERE value = 'alice@example.org')
					+ (SELECT count(*) FROM evidence_artifacts)`).Scan(&n)
				if err != nil || n != 0 {
					t.Errorf("the database still holds the email or artifacts: %d rows, %v", n, err)
				}
			}
		})
	}
}
