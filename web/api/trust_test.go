package api_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"encoding/binary"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/web/api"
)

// verifyLog re-verifies the whole log as `kith verify-log` does and fails
// the test on any failure; it returns how many records it checked.
func (k *kith) verifyLog() int {
	k.t.Helper()
	return len(k.verifiedLog())
}

// verifiedLog re-verifies the whole public log as `kith verify-log` does,
// fails the test on any failure, and returns the records. A record may be
// unchecked only when what it proves is private by design (a user ID's
// or a mailed address's link, its server revocation, a private ID
// token): every other record must verify from its public bytes.
func (k *kith) verifiedLog() []*identity.Evidence {
	k.t.Helper()
	var page api.LogPage
	k.call("GET", "/api/v1/log?limit=1000", nil, &page)
	var v verify.LogVerifier
	var out []*identity.Evidence
	for _, r := range page.Records {
		e, err := r.Evidence()
		if err != nil {
			k.t.Fatal(err)
		}
		for _, f := range v.Add(e) {
			if f.Unchecked && privateByDesign(e) {
				continue
			}
			k.t.Errorf("verify-log: record %d (%s): %s", f.Seq, r.Method, f.Reason)
		}
		out = append(out, e)
	}
	return out
}

// privateByDesign reports whether what e proves is kept private in the
// public log.
func privateByDesign(e *identity.Evidence) bool {
	switch {
	case e.Method == identity.MethodPGPUIDSelfSig, e.Method == identity.MethodEmailVerified:
		return true
	case e.Method == identity.MethodRevocation && e.Purpose == "" && e.To.Kind == identity.KindEmail:
		return true
	}
	return e.Committed(identity.ArtifactIDToken)
}

// upload stores key bytes through the upload path (identity/keys), which
// refreshes the links of the key.
func (k *kith) upload(key []byte) {
	k.t.Helper()
	parsed, err := pgp.ParseKey(key)
	if err != nil {
		k.t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(parsed)
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.keys.Upload(context.Background(), applied, keys.UploadOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// strangerCertifies returns key with a certification of its first user
// ID by a key nobody has (and nobody can verify the certification with).
func strangerCertifies(t *testing.T, key []byte) []byte {
	t.Helper()
	e, err := openpgp.ReadEntity(packet.NewReader(bytes.NewReader(key)))
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := openpgp.NewEntity("Stranger", "", "stranger@example.net", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name := range e.Identities {
		if err := e.SignIdentity(name, stranger, nil); err != nil {
			t.Fatal(err)
		}
		break
	}
	var b bytes.Buffer
	if err := e.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// touchBindings returns key with a copy of every subkey binding whose
// unhashed area carries one more (harmless) issuer subpacket: new
// signature bytes that anyone can make, saying nothing new.
func touchBindings(t *testing.T, key []byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var out []pgp.Packet
	inSubkey := false
	for _, p := range k.Packets() {
		out = append(out, p)
		switch {
		case p.Tag == pgp.TagPublicSubkey:
			inSubkey = true
		case p.Tag != pgp.TagSignature:
			inSubkey = false
		case inSubkey && p.Body[0] == 4 && p.Body[1] == 0x18:
			b := p.Body
			hashed := int(binary.BigEndian.Uint16(b[4:6]))
			at := 6 + hashed
			unhashed := int(binary.BigEndian.Uint16(b[at : at+2]))
			extra := append([]byte{9, 16}, make([]byte, 8)...)
			binary.BigEndian.PutUint64(extra[2:], rand.Uint64())
			nb := append([]byte{}, b[:at]...)
			nb = binary.BigEndian.AppendUint16(nb, uint16(unhashed+len(extra)))
			nb = append(nb, b[at+2:at+2+unhashed]...)
			nb = append(nb, extra...)
			nb = append(nb, b[at+2+unhashed:]...)
			out = append(out, pgp.Packet{Tag: pgp.TagSignature, Body: nb})
		}
	}
	return pgp.NewKey(out).Bytes()
}

// sshSubkey is the RSA SSH key line as an OpenPGP subkey.
func sshSubkey(t *testing.T, sshLine string) *packet.PublicKey {
	t.Helper()
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(sshLine))
	if err != nil {
		t.Fatal(err)
	}
	sub := packet.NewRSAPublicKey(time.Now().Add(-time.Hour), pub.(gossh.CryptoPublicKey).CryptoPublicKey().(*rsa.PublicKey))
	sub.IsSubkey = true
	return sub
}

// bindAuthSubkey returns the gpg key fpr with sub bound to it as an
// authentication subkey by the primary alone (no signature by the
// subkey), as anyone holding a primary key can do for any public key,
// and the primary's entity, for later signatures.
func bindAuthSubkey(t *testing.T, g *gnupg, fpr string, sub *packet.PublicKey) (*openpgp.Entity, []byte) {
	t.Helper()
	owner, err := openpgp.ReadEntity(packet.NewReader(bytes.NewReader(g.Run("", "--export-secret-keys", fpr))))
	if err != nil || owner.PrivateKey == nil {
		t.Fatalf("secret key of %s: %v", fpr, err)
	}
	binding := &packet.Signature{
		Version: 4, SigType: packet.SigTypeSubkeyBinding, PubKeyAlgo: owner.PrimaryKey.PubKeyAlgo, Hash: crypto.SHA256,
		CreationTime: time.Now().Add(-time.Minute), IssuerKeyId: &owner.PrimaryKey.KeyId, FlagsValid: true, FlagAuthenticate: true,
	}
	if err := binding.SignKey(sub, owner.PrivateKey, nil); err != nil {
		t.Fatal(err)
	}
	var key bytes.Buffer
	key.Write(g.Run("", "--export", fpr))
	stored := *sub
	stored.IsSubkey = true
	if err := stored.Serialize(&key); err != nil {
		t.Fatal(err)
	}
	if err := binding.Serialize(&key); err != nil {
		t.Fatal(err)
	}
	return owner, key.Bytes()
}

// TestRevokedAuthSubkeyStaysRevokedWhateverStrangersUpload is item 1 of
// the identity-core issue: Bob revokes the SSH link his OpenPGP key
// carries; a stranger's certification, a re-signed binding (changed
// unhashed area) or an identical re-upload must not bring it back, nor
// make verify-log fail; an ordinary key update appends only what it adds.
func TestRevokedAuthSubkeyStaysRevokedWhateverStrangersUpload(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	fpr := g.NewKey("Bob <bob@example.org>", "sign")
	g.Run("", "--quick-add-key", fpr, "ed25519", "sign,auth", "0")
	g.store(k, fpr)
	stmt := k.challenge("bob", fpr, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(stmt, g.clearsign(fpr, stmt)), nil); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	_, served := k.get("/users/bob.keys")
	if strings.Count(served, "\n") != 1 {
		t.Fatalf("before the revocation bob serves %q, want his auth subkey", served)
	}
	line := strings.TrimSpace(served)

	// Bob revokes the link, signed by his OpenPGP key.
	stmt = k.challenge("bob", line, "revoke")
	if st, code := k.call("POST", "/api/v1/identities/bob/revocations", api.RevokeRequest{
		Statement: stmt, By: fpr, Signature: g.detachSign(fpr, stmt),
	}, nil); st != 200 {
		t.Fatalf("revoke: %d %s", st, code)
	}
	if _, served := k.get("/users/bob.keys"); served != "" {
		t.Fatalf("after the revocation bob serves %q", served)
	}
	records := k.verifyLog()

	exported := g.Run("", "--export", fpr)
	for _, c := range []struct {
		name string
		key  []byte
	}{
		{"identical re-upload", exported},
		{"a stranger's certification", strangerCertifies(t, exported)},
		{"a binding with a changed unhashed area", touchBindings(t, exported)},
	} {
		k.upload(c.key)
		if _, served := k.get("/users/bob.keys"); served != "" {
			t.Errorf("after %s bob serves the revoked key again:\n%s", c.name, served)
		}
		var doc api.IdentityDoc
		k.call("GET", "/users/bob.json", nil, &doc)
		for _, f := range doc.Factors {
			if f.Kind == "ssh" && f.Assurance == "proven" {
				t.Errorf("after %s .json says %s is proven", c.name, f.Value)
			}
		}
		if n := k.verifyLog(); n != records {
			t.Errorf("after %s the log has %d records, want %d: an upload that changes no link appends nothing", c.name, n, records)
		}
	}

	// An ordinary update (a new user ID) appends its one new link only.
	g.Run("", "--quick-add-uid", fpr, "Bob <bob@example.net>")
	g.store(k, fpr)
	if n := k.verifyLog(); n != records+1 {
		t.Errorf("after a new user ID the log has %d records, want %d", n, records+1)
	}
	if _, served := k.get("/users/bob.keys"); served != "" {
		t.Errorf("after a key update bob serves the revoked key again:\n%s", served)
	}

	// Bob's new signed consent brings the link back.
	stmt = k.challenge("bob", line, "add")
	if st, code := k.call("POST", "/api/v1/identities/bob/factors", api.AddRequest{
		Statement: stmt, By: fpr, BySignature: g.detachSign(fpr, stmt),
	}, nil); st != 200 {
		t.Fatalf("re-authorise: %d %s", st, code)
	}
	if _, served := k.get("/users/bob.keys"); strings.TrimSpace(served) != line {
		t.Errorf("after bob's new consent he serves %q, want %q", served, line)
	}
	k.verifyLog()
}

// TestAStrangersKeyCannotProveSomeoneElsesSSHKey is item 2 of the
// identity-core issue: Mallory binds Alice's public SSH key to an OpenPGP
// key of her own as an authentication subkey and claims "mallory". The
// SSH key is only claimed for mallory, is served for no one, names no
// one, and Alice can still prove it for herself.
func TestAStrangersKeyCannotProveSomeoneElsesSSHKey(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	alice := malloryClaimsAlicesSSHKey(t, k, g)

	var doc api.IdentityDoc
	k.call("GET", "/users/mallory.json", nil, &doc)
	var fp string
	for _, f := range doc.Factors {
		if f.Kind == "ssh" {
			fp = f.Value
			if f.Assurance != "claimed" {
				t.Errorf("alice's SSH key is %q for mallory, want claimed", f.Assurance)
			}
		}
	}
	if fp == "" {
		t.Fatal("mallory's key carries no SSH factor: the test proves nothing")
	}
	if _, served := k.get("/users/mallory.keys"); strings.Contains(served, keyOnly(alice.pub)) {
		t.Fatalf("mallory serves alice's SSH key:\n%s", served)
	}
	if st, _ := k.call("GET", "/api/v1/ssh/"+url.PathEscape(fp), nil, nil); st != 404 {
		t.Errorf("/api/v1/ssh/%s: %d, want 404 (nobody proved it)", fp, st)
	}

	// Alice proves her own key.
	stmt := k.challenge("alice", alice.pub, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(stmt, alice.sign(t, stmt, "kith")), nil); st != 201 {
		t.Fatalf("alice's own claim of her key: %d %s", st, code)
	}
	var owner api.SSHOwner
	if st, _ := k.call("GET", "/api/v1/ssh/"+url.PathEscape(fp), nil, &owner); st != 200 || owner.Handle != "alice" {
		t.Errorf("/api/v1/ssh/%s: %d %q, want alice", fp, st, owner.Handle)
	}
	if _, served := k.get("/users/alice.keys"); !strings.Contains(served, keyOnly(alice.pub)) {
		t.Errorf("alice does not serve her key:\n%s", served)
	}
	k.verifyLog()
}

// TestAuthOnlySubkeyIsProvenByItsOwnSSHSignature: an auth subkey without
// a back-signature is a claim until the SSH key signs an add statement
// for the identity; the proof ends with the subkey.
func TestAuthOnlySubkeyIsProvenByItsOwnSSHSignature(t *testing.T) {
	k := newKith(t)
	g := newGnuPG(t)
	ssh := newSSHKey(t, t.TempDir(), "rsa")
	fpr := g.NewKey("Carol <carol@example.org>", "sign")
	sub := sshSubkey(t, ssh.pub)
	carol, key := bindAuthSubkey(t, g, fpr, sub)
	k.upload(key)
	stmt := k.challenge("carol", fpr, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(stmt, g.clearsign(fpr, stmt)), nil); st != 201 {
		t.Fatalf("claim: %d %s", st, code)
	}
	if _, served := k.get("/users/carol.keys"); served != "" {
		t.Fatalf("an unsigned auth subkey is served: %q", served)
	}
	// The SSH key's own signature, with the key's binding as consent.
	stmt = k.challenge("carol", ssh.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/carol/factors", api.AddRequest{
		Statement: stmt, Signature: ssh.sign(t, stmt, "kith"),
	}, nil); st != 200 {
		t.Fatalf("add with the SSH key's signature: %d %s", st, code)
	}
	if _, served := k.get("/users/carol.keys"); !strings.Contains(served, keyOnly(ssh.pub)) {
		t.Fatalf("the proven auth subkey is not served: %q", served)
	}
	// The key revokes the subkey: the link ends.
	sig := &packet.Signature{
		Version: 4, SigType: packet.SigTypeSubkeyRevocation, PubKeyAlgo: carol.PrimaryKey.PubKeyAlgo, Hash: crypto.SHA256,
		CreationTime: time.Now(), IssuerKeyId: &carol.PrimaryKey.KeyId,
	}
	if err := sig.RevokeSubkey(sub, carol.PrivateKey, nil); err != nil {
		t.Fatal(err)
	}
	revoked := bytes.NewBuffer(key)
	if err := sig.Serialize(revoked); err != nil {
		t.Fatal(err)
	}
	k.upload(revoked.Bytes())
	if _, served := k.get("/users/carol.keys"); served != "" {
		t.Errorf("a revoked auth subkey is served: %q", served)
	}
	k.verifyLog()
}

// malloryClaimsAlicesSSHKey makes Alice's SSH key (RSA) and has Mallory
// bind its public half into an OpenPGP key of her own as an
// authentication subkey, upload it and claim "mallory" with that key, so
// that Alice's SSH key is claimed for mallory. It returns Alice's key.
func malloryClaimsAlicesSSHKey(t *testing.T, k *kith, g *gnupg) sshKey {
	t.Helper()
	alice := newSSHKey(t, t.TempDir(), "rsa")
	malloryFpr := g.NewKey("Mallory <mallory@example.org>", "sign")
	_, key := bindAuthSubkey(t, g, malloryFpr, sshSubkey(t, alice.pub))
	k.upload(key)
	stmt := k.challenge("mallory", malloryFpr, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(stmt, g.clearsign(malloryFpr, stmt)), nil); st != 201 {
		t.Fatalf("mallory's claim: %d %s", st, code)
	}
	return alice
}
