// verify.go: verifying signatures that a key's owner made over data (detached
// and cleartext signatures), for proof-of-possession challenges.

package pgp

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Errors from VerifyDetached and VerifyCleartext (besides ErrBadSignature
// and ErrUnsupportedSignature).
var (
	// ErrNoSignature: the input holds no signature packet.
	ErrNoSignature = errors.New("no signature found")
	// ErrUnknownSigner: the signature's issuer is not the key's primary key
	// or one of its signing-capable subkeys.
	ErrUnknownSigner = errors.New("signature not made by this key")
	// ErrSignerRevoked: the signing key or subkey is revoked.
	ErrSignerRevoked = errors.New("signing key is revoked")
)

// Signer identifies the key that made a verified signature.
type Signer struct {
	// Fingerprint and KeyID are those of the primary key or subkey that
	// signed.
	Fingerprint []byte
	KeyID       uint64
	// Subkey is set when a subkey signed.
	Subkey bool
}

// VerifyDetached verifies a detached signature (armored or binary) over
// message, made by k's primary key or one of its signing-capable subkeys.
// Binary (0x00) and text (0x01) signatures are accepted. If k has not been
// through a Policy, the default policy is applied first.
func VerifyDetached(k *Key, message, signature []byte) (Signer, error) {
	sig, err := readSignature(signature)
	if err != nil {
		return Signer{}, fmt.Errorf("pgp: verify detached: %w", err)
	}
	data := message
	if sig.SigType == packet.SigTypeText {
		data = canonicalText(message)
	} else if sig.SigType != packet.SigTypeBinary {
		return Signer{}, fmt.Errorf("pgp: verify detached: signature type %#x: %w", sig.SigType, ErrUnsupportedSignature)
	}
	s, err := verifyData(k, sig, data)
	if err != nil {
		return Signer{}, fmt.Errorf("pgp: verify detached: %w", err)
	}
	return s, nil
}

// VerifyCleartext verifies a cleartext-signed message ("-----BEGIN PGP
// SIGNED MESSAGE-----") made by k's primary key or a signing-capable subkey,
// and returns the message text (dash-escaping undone, lines joined by LF).
func VerifyCleartext(k *Key, clearsigned []byte) ([]byte, Signer, error) {
	b, _ := clearsign.Decode(clearsigned)
	if b == nil {
		return nil, Signer{}, fmt.Errorf("pgp: verify cleartext: %w", ErrNoSignature)
	}
	body, err := io.ReadAll(b.ArmoredSignature.Body)
	if err != nil {
		return nil, Signer{}, fmt.Errorf("pgp: verify cleartext: %w", err)
	}
	sig, err := firstSignature(body)
	if err != nil {
		return nil, Signer{}, fmt.Errorf("pgp: verify cleartext: %w", err)
	}
	if sig.SigType != packet.SigTypeText && sig.SigType != packet.SigTypeBinary {
		return nil, Signer{}, fmt.Errorf("pgp: verify cleartext: signature type %#x: %w", sig.SigType, ErrUnsupportedSignature)
	}
	s, err := verifyData(k, sig, b.Bytes)
	if err != nil {
		return nil, Signer{}, fmt.Errorf("pgp: verify cleartext: %w", err)
	}
	return b.Plaintext, s, nil
}

// readSignature decodes an armored or binary signature.
func readSignature(b []byte) (*packet.Signature, error) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '-' {
		blk, err := armor.Decode(bytes.NewReader(t))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadArmor, err)
		}
		if b, err = io.ReadAll(blk.Body); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadArmor, err)
		}
	}
	return firstSignature(b)
}

// firstSignature returns the first signature packet in b.
func firstSignature(b []byte) (*packet.Signature, error) {
	for len(b) > 0 {
		h, err := parseHeader(b)
		if err != nil {
			return nil, err
		}
		end := int64(h.hdrLen) + h.bodyLen
		if end > int64(len(b)) {
			return nil, ErrTruncated
		}
		if h.tag == TagSignature {
			sig, err := goCryptoSignature(b[h.hdrLen:end])
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUnsupportedSignature, err)
			}
			return sig, nil
		}
		b = b[end:]
	}
	return nil, ErrNoSignature
}

// verifyData checks sig over data against k's signing keys.
func verifyData(k *Key, sig *packet.Signature, data []byte) (Signer, error) {
	d := k.Describe()
	if d.Fingerprint == nil {
		return Signer{}, fmt.Errorf("%w: key rejected by policy", ErrUnknownSigner)
	}
	matches := func(fpr []byte, id uint64) bool {
		if sig.IssuerFingerprint != nil {
			return bytes.Equal(sig.IssuerFingerprint, fpr)
		}
		return sig.IssuerKeyId != nil && *sig.IssuerKeyId == id
	}
	type cand struct {
		pub     *packet.PublicKey
		signer  Signer
		revoked bool
	}
	var cands []cand
	if matches(d.Fingerprint, d.KeyID) && d.Capabilities.Sign {
		if km, err := parseKeyMaterial(k.packets[0].Body, false); err == nil && km.pub != nil {
			cands = append(cands, cand{km.pub, Signer{Fingerprint: d.Fingerprint, KeyID: d.KeyID}, d.Revoked})
		}
	}
	for _, s := range d.Subkeys {
		if matches(s.Fingerprint, s.KeyID) && s.Capabilities.Sign && s.pub != nil {
			cands = append(cands, cand{s.pub, Signer{Fingerprint: s.Fingerprint, KeyID: s.KeyID, Subkey: true}, s.Revoked || d.Revoked})
		}
	}
	if len(cands) == 0 {
		return Signer{}, ErrUnknownSigner
	}
	var last error
	for _, c := range cands {
		h, err := sig.PrepareVerify()
		if err != nil {
			return Signer{}, fmt.Errorf("%w: %v", ErrUnsupportedSignature, err)
		}
		h.Write(data)
		if err := c.pub.VerifySignature(h, sig); err != nil {
			last = fmt.Errorf("%w: %v", ErrBadSignature, err)
			continue
		}
		if c.revoked {
			return Signer{}, ErrSignerRevoked
		}
		return c.signer, nil
	}
	return Signer{}, last
}

// canonicalText converts line endings to CRLF (RFC 9580 section 5.2.1.2).
func canonicalText(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/32)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b...)
			break
		}
		line := bytes.TrimSuffix(b[:i], []byte("\r"))
		out = append(out, line...)
		out = append(out, '\r', '\n')
		b = b[i+1:]
	}
	return out
}
