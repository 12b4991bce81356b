// openpgp.go: the SSH key of an OpenPGP authentication key, as `gpg --export-ssh-key`
// derives it.

package ssh

import (
	"bytes"
	"crypto/dsa" //lint:ignore SA1019 go-crypto hands over OpenPGP DSA keys as *dsa.PublicKey; only read here, never used to verify.
	"crypto/ecdsa"
	stded25519 "crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"
	"math/big"

	pgpecdsa "github.com/ProtonMail/go-crypto/openpgp/ecdsa"
	pgped25519 "github.com/ProtonMail/go-crypto/openpgp/ed25519"
	"github.com/ProtonMail/go-crypto/openpgp/eddsa"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/crypto/ssh"
)

// FromOpenPGP returns the SSH public key of an OpenPGP public key or subkey, the key
// `gpg --export-ssh-key` prints for it: RSA (ssh-rsa), DSA (ssh-dss), ECDSA on NIST
// P-256, P-384 or P-521 (ecdsa-sha2-nistpNNN), and Ed25519 both as legacy EdDSA
// (algorithm 22) and as RFC 9580 Ed25519 (algorithm 27), all as ssh-ed25519. Other
// algorithms (encryption-only ones, Brainpool curves, Ed448, post-quantum ones) have no
// SSH form and give ErrUnsupportedKeyType.
//
// It converts the key material only. Whether pub is a validly bound, unexpired,
// unrevoked authentication subkey is for the caller (package pgp) to have checked.
func FromOpenPGP(pub *packet.PublicKey) (ssh.PublicKey, error) {
	if pub == nil || pub.PublicKey == nil {
		return nil, fmt.Errorf("ssh: from OpenPGP key: %w: no key material", ErrMalformedKey)
	}
	k, err := fromOpenPGP(pub)
	if err != nil {
		return nil, fmt.Errorf("ssh: from OpenPGP key %X (algorithm %d): %w", pub.Fingerprint, pub.PubKeyAlgo, err)
	}
	return k, nil
}

func fromOpenPGP(pub *packet.PublicKey) (ssh.PublicKey, error) {
	switch pk := pub.PublicKey.(type) {
	case *rsa.PublicKey:
		if pk.N == nil || pk.N.Sign() <= 0 || pk.E <= 0 {
			return nil, fmt.Errorf("%w: bad RSA key", ErrMalformedKey)
		}
		return ssh.NewPublicKey(&rsa.PublicKey{N: new(big.Int).Set(pk.N), E: pk.E})
	case *dsa.PublicKey:
		return newDSAKey(clone(pk.P), clone(pk.Q), clone(pk.G), clone(pk.Y))
	case *pgpecdsa.PublicKey:
		if pk.GetCurve() == nil {
			return nil, fmt.Errorf("%w: ECDSA key without a curve", ErrMalformedKey)
		}
		var curve elliptic.Curve
		switch name := pk.GetCurve().GetCurveName(); name {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("%w: ECDSA on curve %s (SSH has NIST P-256, P-384 and P-521 only)", ErrUnsupportedKeyType, name)
		}
		if pk.X == nil || pk.Y == nil {
			return nil, fmt.Errorf("%w: ECDSA key without a point", ErrMalformedKey)
		}
		ec, err := ecdsa.ParseUncompressedPublicKey(curve, pk.MarshalPoint())
		if err != nil {
			return nil, fmt.Errorf("%w: ECDSA point: %v", ErrMalformedKey, err)
		}
		return ssh.NewPublicKey(ec)
	case *eddsa.PublicKey:
		if pk.GetCurve() == nil || pk.GetCurve().GetCurveName() != "ed25519" {
			return nil, fmt.Errorf("%w: EdDSA on a curve other than Ed25519", ErrUnsupportedKeyType)
		}
		return newEd25519(pk.X)
	case *pgped25519.PublicKey:
		return newEd25519(pk.Point)
	}
	return nil, fmt.Errorf("%w: OpenPGP algorithm %d has no SSH form", ErrUnsupportedKeyType, pub.PubKeyAlgo)
}

func newEd25519(point []byte) (ssh.PublicKey, error) {
	if len(point) != stded25519.PublicKeySize {
		return nil, fmt.Errorf("%w: Ed25519 key of %d bytes", ErrMalformedKey, len(point))
	}
	return ssh.NewPublicKey(stded25519.PublicKey(bytes.Clone(point)))
}

// clone copies a big.Int, keeping nil as nil.
func clone(v *big.Int) *big.Int {
	if v == nil {
		return nil
	}
	return new(big.Int).Set(v)
}

// OpenPGPComment returns the comment gpg writes after a key it exports with
// --export-ssh-key: "openpgp:0x" and the low 32 bits of the (sub)key's key ID in
// upper-case hex, e.g. "openpgp:0x8D593FAC".
func OpenPGPComment(pub *packet.PublicKey) string {
	if pub == nil {
		return ""
	}
	return fmt.Sprintf("openpgp:0x%08X", uint32(pub.KeyId))
}
