package ssh

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	pgped25519 "github.com/ProtonMail/go-crypto/openpgp/ed25519"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// subkeys reads the exported key with go-crypto's packet reader and returns its
// subkeys by key ID.
func subkeys(t *testing.T, exported []byte) map[uint64]*packet.PublicKey {
	t.Helper()
	out := map[uint64]*packet.PublicKey{}
	r := packet.NewReader(bytes.NewReader(exported))
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading gpg's export: %v", err)
		}
		if pk, ok := p.(*packet.PublicKey); ok && pk.IsSubkey {
			out[pk.KeyId] = pk
		}
	}
	return out
}

func TestFromOpenPGPMatchesGPGExportSSHKey(t *testing.T) {
	g := gpgtest.New(t)
	g.Run("", "--quick-gen-key", "Kith Test <test@kith.test>", "ed25519", "sign", "never")
	var primary string
	for _, line := range strings.Split(string(g.Run("", "--with-colons", "--list-keys")), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" {
			primary = f[9]
			break
		}
	}
	if primary == "" {
		t.Fatal("no primary fingerprint from gpg")
	}
	// gpg names ECDSA on NIST curves "nistpNNN/ecdsa" (plain nistpNNN is ECDH).
	for _, algo := range []string{"ed25519", "rsa2048", "nistp256/ecdsa", "nistp384/ecdsa", "nistp521/ecdsa", "dsa2048"} {
		g.Run("", "--quick-add-key", primary, algo, "auth", "never")
	}
	subs := subkeys(t, g.Run("", "--export", primary))
	if len(subs) != 6 {
		t.Fatalf("%d subkeys, want 6", len(subs))
	}
	wantTypes := map[string]bool{}
	for id, sub := range subs {
		t.Run(fmt.Sprintf("%016X", id), func(t *testing.T) {
			want := string(g.Run("", "--export-ssh-key", fmt.Sprintf("%016X!", id)))
			pub, err := FromOpenPGP(sub)
			if err != nil {
				t.Fatal(err)
			}
			got := string(MarshalAuthorizedKey(NewKey(pub, OpenPGPComment(sub))))
			if got != want {
				t.Errorf("got\n%s\ngpg --export-ssh-key\n%s", got, want)
			}
			wantTypes[pub.Type()] = true
		})
	}
	for _, typ := range []string{ssh.KeyAlgoED25519, ssh.KeyAlgoRSA, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, keyTypeDSA} {
		if !wantTypes[typ] {
			t.Errorf("no %s subkey was compared", typ)
		}
	}
}

func TestFromOpenPGPConvertsV6Ed25519(t *testing.T) {
	// gpg 2.2 does not make RFC 9580 (v6) keys, so this one is made with go-crypto and
	// checked against the key's own point.
	e, err := openpgp.NewEntity("Kith V6", "", "v6@kith.test", &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519})
	if err != nil {
		t.Fatal(err)
	}
	pk := e.PrimaryKey
	if pk.Version != 6 || pk.PubKeyAlgo != packet.PubKeyAlgoEd25519 {
		t.Fatalf("made a v%d key of algorithm %d", pk.Version, pk.PubKeyAlgo)
	}
	got, err := FromOpenPGP(pk)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ssh.NewPublicKey(ed25519.PublicKey(pk.PublicKey.(*pgped25519.PublicKey).Point))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Marshal(), want.Marshal()) {
		t.Error("converted key differs from the OpenPGP key's point")
	}
	if c, want := OpenPGPComment(pk), fmt.Sprintf("openpgp:0x%X", pk.Fingerprint[4:8]); c != want {
		t.Errorf("comment %q, want %q (low half of the v6 key ID)", c, want)
	}
}

func TestFromOpenPGPRefusesKeysWithoutSSHForm(t *testing.T) {
	v6, err := openpgp.NewEntity("Kith V6", "", "v6@kith.test", &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519})
	if err != nil {
		t.Fatal(err)
	}
	brainpool, err := openpgp.NewEntity("Kith BP", "", "bp@kith.test", &packet.Config{Algorithm: packet.PubKeyAlgoECDSA, Curve: packet.CurveBrainpoolP256})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		pub     *packet.PublicKey
		wantErr error
	}{
		{"nil", nil, ErrMalformedKey},
		{"no key material", &packet.PublicKey{}, ErrMalformedKey},
		{"X25519 encryption subkey", v6.Subkeys[0].PublicKey, ErrUnsupportedKeyType},
		{"ECDSA on Brainpool", brainpool.PrimaryKey, ErrUnsupportedKeyType},
	}
	for _, c := range cases {
		if _, err := FromOpenPGP(c.pub); !errors.Is(err, c.wantErr) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.wantErr)
		}
	}
	if OpenPGPComment(nil) != "" {
		t.Error("nil key has a comment")
	}
}
