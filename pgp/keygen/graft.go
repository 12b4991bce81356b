// graft.go: a key that carries another person's public key as an
// encryption subkey: the attack as code, for the tests that show a
// lookup by that person's fingerprint or address never answers with it.

package keygen

import (
	"bytes"
	"crypto"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// GraftedSubkey returns a victim's key (RSA-2048, "Victor
// <victor@example.org>") and an attacker's (Ed25519, "Mallory
// <mallory@example.org>") whose encryption subkey is the victim's primary
// key, bound by the attacker's signature alone: an encryption subkey needs
// no back-signature, so anyone can make one from public data. Both are
// binary transferable public keys; fingerprint is the victim's primary
// key's.
func GraftedSubkey() (victim, attacker, fingerprint []byte, err error) {
	v, err := openpgp.NewEntity("Victor", "", "victor@example.org", &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("keygen: victim: %w", err)
	}
	m, err := openpgp.NewEntity("Mallory", "", "mallory@example.org", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("keygen: attacker: %w", err)
	}
	grafted := *v.PrimaryKey
	grafted.IsSubkey = true
	sig := &packet.Signature{Version: m.PrimaryKey.Version, SigType: packet.SigTypeSubkeyBinding,
		PubKeyAlgo: m.PrimaryKey.PubKeyAlgo, Hash: crypto.SHA256, CreationTime: time.Now(),
		IssuerKeyId: &m.PrimaryKey.KeyId, IssuerFingerprint: m.PrimaryKey.Fingerprint,
		FlagsValid: true, FlagEncryptCommunications: true, FlagEncryptStorage: true}
	if err := sig.SignKey(&grafted, m.PrivateKey, nil); err != nil {
		return nil, nil, nil, fmt.Errorf("keygen: bind the grafted subkey: %w", err)
	}
	m.Subkeys = append(m.Subkeys, openpgp.Subkey{PublicKey: &grafted, Sig: sig})
	var vb, mb bytes.Buffer
	if err := v.Serialize(&vb); err != nil {
		return nil, nil, nil, fmt.Errorf("keygen: victim: %w", err)
	}
	if err := m.Serialize(&mb); err != nil {
		return nil, nil, nil, fmt.Errorf("keygen: attacker: %w", err)
	}
	return vb.Bytes(), mb.Bytes(), v.PrimaryKey.Fingerprint, nil
}
