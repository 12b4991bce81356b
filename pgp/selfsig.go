// selfsig.go: verification of self-signatures over the original packet bytes.
// Kith hashes exactly the bytes it keeps (RFC 9580 section 5.2.4) and lets
// go-crypto check the signature value; version 3 signatures, which go-crypto
// no longer parses, are checked here.

package pgp

import (
	"crypto"
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
	//lint:ignore SA1019 RIPEMD-160 is needed to verify old self-signatures that gpg accepts.
	_ "golang.org/x/crypto/ripemd160"
)

// Errors from signature verification (wrapped in drop reports, or returned
// by VerifyDetached and VerifyCleartext).
var (
	// ErrBadSignature: the signature does not verify.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrUnsupportedSignature: the signature's version, hash or algorithm is
	// one Kith cannot check.
	ErrUnsupportedSignature = errors.New("unsupported signature")
	// ErrMissingBackSignature: a signing-capable subkey's binding lacks a
	// valid primary-key binding (back-)signature.
	ErrMissingBackSignature = errors.New("signing subkey without valid back-signature")
)

// componentKind says what a signature is bound to.
type componentKind uint8

const (
	kindDirect componentKind = iota // the primary key itself
	kindUserID
	kindUserAttribute
	kindSubkey
)

// selfSig is what a verified self-signature says.
type selfSig struct {
	sigType     uint8
	created     time.Time
	keyLifetime uint32 // seconds; 0 = none
	sigLifetime uint32
	flagsValid  bool
	flags       uint8 // key flags, first octet
	primaryID   bool
	revocation  bool
	// reason is a revocation's Reason for Revocation subpacket (code and
	// text), if it carries one.
	reason *RevocationReason
	// attestation: an attestation key signature (attest.go), which says
	// nothing about the user ID or the key itself.
	attestation bool
	// backSigned: a subkey binding that embeds a valid primary-key
	// binding signature made by the subkey itself, so the subkey's holder
	// consented to the binding (required for signing subkeys, optional
	// for others).
	backSigned bool
}

// sigAllowedFor reports whether a signature type belongs on a component kind.
func sigAllowedFor(t uint8, kind componentKind) bool {
	switch kind {
	case kindDirect:
		return t == sigTypeDirectKey || t == sigTypeKeyRevoke
	case kindUserID, kindUserAttribute:
		return (t >= sigTypeGenericCert && t <= sigTypePositiveCert) || t == sigTypeCertRevoke || t == sigTypeAttestation
	case kindSubkey:
		return t == sigTypeSubkeyBind || t == sigTypeSubkeyRevoke
	}
	return false
}

// verifySelfSig verifies s, made by primary, over the component comp (a user
// ID, user attribute or subkey body; nil for direct signatures).
//
// With a batch, Ed25519 checks go into it and hold only if it verifies.
// Each check is paid from bud first; one it cannot pay for is not made,
// and the error is errNoBudget.
func verifySelfSig(batch *ed25519Batch, bud *keyBudget, primary *keyMaterial, s *sigInfo, kind componentKind, comp []byte, sub *keyMaterial, requireBackSig bool) (ss *selfSig, err error) {
	defer func() {
		if r := recover(); r != nil {
			ss, err = nil, fmt.Errorf("%w: verifier panicked: %v", ErrBadSignature, r)
		}
	}()
	if primary.pub == nil {
		return nil, fmt.Errorf("%w: primary key: %v", ErrUnsupportedSignature, primary.pubErr)
	}
	// RFC 9580: v6 keys make v6 signatures; v3 and v4 keys make v3 or v4 ones.
	if (primary.version == 6) != (s.version == 6) || s.version == 5 {
		return nil, fmt.Errorf("%w: v%d signature by a v%d key", ErrUnsupportedSignature, s.version, primary.version)
	}
	if s.version <= 3 {
		return verifyV3(bud, primary, s, kind, comp, sub)
	}
	gs, err := parseV4Signature(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedSignature, err)
	}
	h, err := gs.PrepareVerify()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedSignature, err)
	}
	writeSignedData(h, s.version, primary, kind, comp, sub)
	if !bud.spend(verifyWork(primary.pub)) {
		return nil, errNoBudget
	}
	if err := verifyValue(batch, primary.pub, h, gs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	ss = &selfSig{
		sigType:     uint8(gs.SigType),
		created:     gs.CreationTime,
		flagsValid:  gs.FlagsValid,
		revocation:  s.sigType == sigTypeKeyRevoke || s.sigType == sigTypeSubkeyRevoke || s.sigType == sigTypeCertRevoke,
		attestation: s.sigType == sigTypeAttestation,
	}
	if gs.KeyLifetimeSecs != nil {
		ss.keyLifetime = *gs.KeyLifetimeSecs
	}
	if gs.SigLifetimeSecs != nil {
		ss.sigLifetime = *gs.SigLifetimeSecs
	}
	if gs.IsPrimaryId != nil {
		ss.primaryID = *gs.IsPrimaryId
	}
	if ss.revocation && gs.RevocationReason != nil {
		ss.reason = &RevocationReason{Code: uint8(*gs.RevocationReason), Text: gs.RevocationReasonText}
	}
	if gs.FlagsValid {
		ss.flags = flagsOf(gs)
	}
	if kind == kindSubkey && s.sigType == sigTypeSubkeyBind {
		if gs.EmbeddedSignature != nil && sub != nil && sub.pub != nil && !bud.spend(verifyWork(sub.pub)) {
			return nil, errNoBudget
		}
		err := verifyBackSig(batch, primary, sub, gs)
		if err != nil && requireBackSig && gs.FlagsValid && gs.FlagSign {
			return nil, err
		}
		ss.backSigned = err == nil
	}
	return ss, nil
}

// hashRIPEMD160 is the OpenPGP ID of RIPEMD-160, which go-crypto does not
// map but older keys (gpg 1.x defaults of some distributions) used for
// self-signatures that gpg still accepts.
const hashRIPEMD160 = 3

// parseV4Signature parses a v4/v6 signature: the common v4 ones in place
// (parseV4Fast), the others with go-crypto. A v4 signature over RIPEMD-160
// is parsed as if it were SHA-1 (the encodings are the same) and then
// given back its hash and hash suffix.
func parseV4Signature(s *sigInfo) (*packet.Signature, error) {
	if s.attestedAt > 0 {
		return parseAttestation(s)
	}
	if gs, ok := parseV4Fast(s.body); ok {
		return gs, nil
	}
	if s.version != 4 || s.hashAlgo != hashRIPEMD160 {
		return goCryptoSignature(s.body)
	}
	b := append([]byte(nil), s.body...)
	b[3] = 2 // SHA-1
	gs, err := goCryptoSignature(b)
	if err != nil {
		return nil, err
	}
	if len(gs.HashSuffix) < 4 {
		return nil, errors.New("short hash suffix")
	}
	gs.Hash = crypto.RIPEMD160
	gs.HashSuffix[3] = hashRIPEMD160
	return gs, nil
}

// parseAttestation parses an attestation key signature whose Attested
// Certifications subpacket is marked critical, as sq makes them: go-crypto
// refuses critical subpackets it does not know, so it parses a copy with
// the critical bit clear, and the hashed data gets the original octet back.
func parseAttestation(s *sigInfo) (*packet.Signature, error) {
	b := append([]byte(nil), s.body...)
	b[s.attestedAt] &^= 0x80
	gs, err := goCryptoSignature(b)
	if err != nil {
		return nil, err
	}
	// The hash suffix starts with the signature's first octets, through
	// its hashed subpackets.
	if len(gs.HashSuffix) <= s.attestedAt || gs.HashSuffix[s.attestedAt] != b[s.attestedAt] {
		return nil, errors.New("attestation: unexpected hash suffix layout")
	}
	gs.HashSuffix[s.attestedAt] = s.body[s.attestedAt]
	return gs, nil
}

// ripemd160DigestInfo is the DER DigestInfo prefix of a RIPEMD-160 hash in
// PKCS #1 v1.5 signatures (RFC 9580 section 5.2.2).
var ripemd160DigestInfo = []byte{0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x24, 0x03, 0x02, 0x01, 0x05, 0x00, 0x04, 0x14}

// verifyValue checks the signature value over the data hashed into h. RSA
// signatures are checked with verifyRSA (crypto/rsa or math/big, whichever
// is faster for the key's size, and it knows RIPEMD-160), v4 Ed25519 ones
// with verifyEd25519 (into batch when not nil); everything else by
// go-crypto.
func verifyValue(batch *ed25519Batch, pub *packet.PublicKey, h hash.Hash, gs *packet.Signature) error {
	if done, err := verifyEd25519Value(batch, pub, h, gs); done {
		return err
	}
	rpub, isRSA := pub.PublicKey.(*rsa.PublicKey)
	if _, known := digestInfo[gs.Hash]; !isRSA || !known || gs.RSASignature == nil || gs.Version > 4 {
		return pub.VerifySignature(h, gs)
	}
	if pub.PubKeyAlgo != gs.PubKeyAlgo {
		return errors.New("public key and signature use different algorithms")
	}
	h.Write(gs.HashSuffix)
	digest := h.Sum(nil)
	return verifyRSA(rpub, gs.Hash, digest, gs.RSASignature.Bytes())
}

// verifyBackSig checks the primary-key binding signature embedded in a
// signing subkey's binding (into batch, when not nil, as verifyValue).
func verifyBackSig(batch *ed25519Batch, primary, sub *keyMaterial, binding *packet.Signature) error {
	emb := binding.EmbeddedSignature
	if emb == nil {
		return ErrMissingBackSignature
	}
	if sub == nil || sub.pub == nil {
		return fmt.Errorf("%w: subkey algorithm unsupported", ErrMissingBackSignature)
	}
	h, err := emb.PrepareVerify()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMissingBackSignature, err)
	}
	writeKeyPrefix(h, primary.version, primary.body)
	writeKeyPrefix(h, sub.version, sub.body)
	done, err := verifyEd25519Value(batch, sub.pub, h, emb)
	if !done {
		err = sub.pub.VerifySignature(h, emb)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMissingBackSignature, err)
	}
	return nil
}

// verifyEd25519Value checks gs over the data hashed into h when it is a
// v4 Ed25519 signature by pub (into batch, when not nil), and reports
// whether it was one.
func verifyEd25519Value(batch *ed25519Batch, pub *packet.PublicKey, h hash.Hash, gs *packet.Signature) (done bool, err error) {
	if gs.Version != 4 || pub.PubKeyAlgo != gs.PubKeyAlgo {
		return false, nil
	}
	key, sig, isEd25519, err := ed25519Parts(pub, gs)
	if !isEd25519 || err != nil {
		return isEd25519, err
	}
	h.Write(gs.HashSuffix)
	return true, verifyEd25519(batch, key, h.Sum(nil), sig)
}

// flagsOf packs go-crypto's key flags back into the first flags octet.
func flagsOf(gs *packet.Signature) uint8 {
	var f uint8
	if gs.FlagCertify {
		f |= packet.KeyFlagCertify
	}
	if gs.FlagSign {
		f |= packet.KeyFlagSign
	}
	if gs.FlagEncryptCommunications {
		f |= packet.KeyFlagEncryptCommunications
	}
	if gs.FlagEncryptStorage {
		f |= packet.KeyFlagEncryptStorage
	}
	if gs.FlagAuthenticate {
		f |= packet.KeyFlagAuthenticate
	}
	return f
}

// writeSignedData hashes what a key signature covers: the primary key, then
// the user ID (prefixed 0xB4 and a four-byte length in v4/v6 signatures, bare
// in v3), the user attribute (0xD1) or the subkey.
func writeSignedData(h hash.Hash, sigVersion int, primary *keyMaterial, kind componentKind, comp []byte, sub *keyMaterial) {
	writeKeyPrefix(h, primary.version, primary.body)
	switch kind {
	case kindUserID, kindUserAttribute:
		if sigVersion >= 4 {
			var hdr [5]byte
			hdr[0] = 0xb4
			if kind == kindUserAttribute {
				hdr[0] = 0xd1
			}
			binary.BigEndian.PutUint32(hdr[1:], uint32(len(comp)))
			h.Write(hdr[:])
		}
		h.Write(comp)
	case kindSubkey:
		writeKeyPrefix(h, sub.version, sub.body)
	}
}

// v3Hashes maps the hash IDs that version 3 signatures use.
func v3Hash(id uint8) (crypto.Hash, bool) {
	switch id {
	case 1:
		return crypto.MD5, true
	case 2:
		return crypto.SHA1, true
	case 8:
		return crypto.SHA256, true
	case 9:
		return crypto.SHA384, true
	case 10:
		return crypto.SHA512, true
	case 11:
		return crypto.SHA224, true
	}
	return 0, false
}

// verifyV3 verifies a version 3 signature (RFC 4880 section 5.2.2): the data,
// then the signature type and creation time, no trailer. RSA signatures are
// checked here; DSA ones go through go-crypto with a synthetic v4 packet that
// carries the same numbers.
func verifyV3(bud *keyBudget, primary *keyMaterial, s *sigInfo, kind componentKind, comp []byte, sub *keyMaterial) (*selfSig, error) {
	ch, ok := v3Hash(s.hashAlgo)
	if !ok || !ch.Available() {
		return nil, fmt.Errorf("%w: v3 hash %d", ErrUnsupportedSignature, s.hashAlgo)
	}
	h := ch.New()
	writeSignedData(h, 3, primary, kind, comp, sub)
	suffix := s.body[2:7] // type and creation time
	ss := &selfSig{
		sigType:     s.sigType,
		created:     time.Unix(s.created, 0),
		revocation:  s.sigType == sigTypeKeyRevoke || s.sigType == sigTypeSubkeyRevoke || s.sigType == sigTypeCertRevoke,
		attestation: s.sigType == sigTypeAttestation,
	}
	if packet.PublicKeyAlgorithm(s.algo) != primary.algo {
		return nil, fmt.Errorf("%w: algorithm mismatch", ErrBadSignature)
	}
	switch primary.algo {
	case packet.PubKeyAlgoRSA, packet.PubKeyAlgoRSASignOnly:
		h.Write(suffix)
		digest := h.Sum(nil)
		if digest[0] != s.v3Left[0] || digest[1] != s.v3Left[1] {
			return nil, fmt.Errorf("%w: hash prefix mismatch", ErrBadSignature)
		}
		mpi, _, ok := readMPI(s.v3MPIs)
		if !ok {
			return nil, fmt.Errorf("%w: truncated RSA value", ErrBadSignature)
		}
		if !bud.spend(verifyWork(primary.pub)) {
			return nil, errNoBudget
		}
		pub, _ := primary.pub.PublicKey.(*rsa.PublicKey)
		if err := verifyRSA(pub, ch, digest, mpi); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return ss, nil
	case packet.PubKeyAlgoDSA:
		synth := make([]byte, 0, 16+len(s.v3MPIs))
		synth = append(synth, 4, s.sigType, s.algo, s.hashAlgo, 0, 6, 5, subpacketCreationTime)
		synth = append(synth, s.body[3:7]...)
		synth = append(synth, 0, 0, s.v3Left[0], s.v3Left[1])
		synth = append(synth, s.v3MPIs...)
		gs, err := goCryptoSignature(synth)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedSignature, err)
		}
		gs.HashSuffix = suffix
		if !bud.spend(verifyWork(primary.pub)) {
			return nil, errNoBudget
		}
		if err := primary.pub.VerifySignature(h, gs); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return ss, nil
	}
	return nil, fmt.Errorf("%w: v3 signature algorithm %d", ErrUnsupportedSignature, s.algo)
}

// verifyCertification reports whether s, a third-party signature over the
// component comp of the key primary, was made by the public key whose
// packet body is issuerBody. Only v4 and v6 signatures are checked (a v3
// certification ranks as unverified). The check is paid from bud; one it
// cannot pay for is not made (false).
func verifyCertification(bud *keyBudget, primary *keyMaterial, s *sigInfo, kind componentKind, comp, issuerBody []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	if s.version < 4 {
		return false
	}
	issuer, err := parseKeyMaterial(issuerBody, false)
	if err != nil || issuer.pub == nil || (issuer.version == 6) != (s.version == 6) {
		return false
	}
	if s.issuerFpr != nil && string(s.issuerFpr) != string(issuer.fpr) {
		return false
	}
	gs, err := parseV4Signature(s)
	if err != nil {
		return false
	}
	h, err := gs.PrepareVerify()
	if err != nil {
		return false
	}
	writeSignedData(h, s.version, primary, kind, comp, nil)
	if !bud.spend(verifyWork(issuer.pub)) {
		return false
	}
	return verifyValue(nil, issuer.pub, h, gs) == nil
}
