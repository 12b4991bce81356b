package api_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/web/api"
)

// TestGPGAnswerLeavesV6KeysOutBesideV4Ones: /users/H.gpg is what the
// profile page tells people to give gpg --fetch-keys, and gpg refuses a
// whole answer at a v6 key, so an identity with a v4 and a v6 key proven
// is answered with the v4 key alone (pgp.ForLegacyClients), which gpg
// imports.
func TestGPGAnswerLeavesV6KeysOutBesideV4Ones(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	fpr := g.NewKey("Carol <carol@example.org>", "sign")
	g.store(k, fpr)
	stmt := k.challenge("carol", fpr, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(stmt, g.clearsign(fpr, stmt)), nil); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}

	v6, err := keygen.NewKey(keygen.V6Ed25519, "Carol", "carol@example.org", time.Now().Add(-time.Hour).Truncate(time.Second), 6)
	if err != nil {
		t.Fatal(err)
	}
	var pub bytes.Buffer
	if err := keygen.Serialize(&pub, v6); err != nil {
		t.Fatal(err)
	}
	key, err := pgp.ParseKey(pub.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.keys.Upload(context.Background(), applied, keys.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	v6fpr := applied.Describe().FingerprintHex()
	stmt = k.challenge("carol", v6fpr, "add")
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, v6, strings.NewReader(stmt), nil); err != nil {
		t.Fatal(err)
	}
	if st, code := k.call("POST", "/api/v1/identities/carol/factors", api.AddRequest{
		Statement: stmt, Signature: sig.String(), By: fpr, BySignature: g.detachSign(fpr, stmt),
	}, nil); st != 200 {
		t.Fatalf("add the v6 key: %d %s", st, code)
	}
	var doc api.IdentityDoc
	k.call("GET", "/users/carol.json", nil, &doc)
	proven := 0
	for _, f := range doc.Factors {
		if f.Kind == "pgp" && f.Assurance == "proven" {
			proven++
		}
	}
	if proven != 2 {
		t.Fatalf("%d PGP keys proven, want the v4 and the v6 one: %+v", proven, doc.Factors)
	}

	_, armored := k.get("/users/carol.gpg")
	ks, err := pgp.ReadKeys(strings.NewReader(armored))
	if err != nil || len(ks) != 1 || !strings.EqualFold(pgp.NewKey(ks[0].Packets()).Describe().FingerprintHex(), fpr) {
		t.Fatalf(".gpg answers %d keys (%v), want the v4 key %s alone:\n%s", len(ks), err, fpr, armored)
	}
	importer := newGnuPG(t)
	importer.Run(armored, "--import")
	if out := string(importer.Run("", "--with-colons", "--list-keys", fpr)); !strings.Contains(out, strings.ToUpper(fpr)) {
		t.Errorf("gpg did not import the .gpg answer:\n%s", out)
	}
}
