package pgp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// sigView is what parseV4Fast promises to set of a Signature, as plain
// values, for comparing its parse with go-crypto's.
type sigView struct {
	Version, BitsRSA, BitsR, BitsS int
	SigType                        packet.SignatureType
	PubKeyAlgo                     packet.PublicKeyAlgorithm
	Hash                           uint
	HashSuffix, RSA, R, S, EdSig   []byte
	HashTag                        [2]byte
	Created                        int64
	SigLifetime, KeyLifetime       *uint32
	PrimaryID                      *bool
	Flags                          [8]bool
	Reason                         *packet.ReasonForRevocation
	ReasonText                     string
	IssuerKeyID                    *uint64
	IssuerFpr                      []byte
	IssuerVersion                  uint8
	Embedded                       *sigView
}

func viewOf(gs *packet.Signature) *sigView {
	if gs == nil {
		return nil
	}
	v := &sigView{
		Version: gs.Version, SigType: gs.SigType, PubKeyAlgo: gs.PubKeyAlgo, Hash: uint(gs.Hash),
		HashSuffix: gs.HashSuffix, HashTag: gs.HashTag, Created: gs.CreationTime.Unix(),
		SigLifetime: gs.SigLifetimeSecs, KeyLifetime: gs.KeyLifetimeSecs, PrimaryID: gs.IsPrimaryId,
		Flags: [8]bool{gs.FlagsValid, gs.FlagCertify, gs.FlagSign, gs.FlagEncryptCommunications,
			gs.FlagEncryptStorage, gs.FlagSplitKey, gs.FlagAuthenticate, gs.FlagGroupKey},
		Reason: gs.RevocationReason, ReasonText: gs.RevocationReasonText,
		IssuerKeyID: gs.IssuerKeyId, IssuerFpr: gs.IssuerFingerprint, IssuerVersion: gs.IssuerKeyVersion,
		EdSig: gs.EdSig, Embedded: viewOf(gs.EmbeddedSignature),
	}
	if gs.RSASignature != nil {
		v.RSA, v.BitsRSA = gs.RSASignature.Bytes(), int(gs.RSASignature.BitLength())
	}
	if gs.EdDSASigR != nil {
		v.R, v.BitsR = gs.EdDSASigR.Bytes(), int(gs.EdDSASigR.BitLength())
	}
	if gs.EdDSASigS != nil {
		v.S, v.BitsS = gs.EdDSASigS.Bytes(), int(gs.EdDSASigS.BitLength())
	}
	return v
}

// checkFastParse fails t when parseV4Fast takes body and go-crypto
// refuses it or reads it otherwise, and reports whether it took it.
func checkFastParse(t *testing.T, what string, body []byte) bool {
	t.Helper()
	fast, ok := parseV4Fast(body)
	if !ok {
		return false
	}
	gc, err := goCryptoSignature(body)
	if err != nil {
		t.Fatalf("%s: the fast parse took a signature go-crypto refuses (%v): %x", what, err, body)
	}
	if got, want := viewOf(fast), viewOf(gc); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the fast parse differs from go-crypto's\n got %+v\nwant %+v\nbody %x", what, got, want, body)
	}
	return true
}

// signatureBodies returns the bodies of the signature packets of keys.
func signatureBodies(t testing.TB, keyring []byte) [][]byte {
	t.Helper()
	var out [][]byte
	r := NewReader(bytes.NewReader(keyring))
	for {
		k, err := r.Next()
		if err != nil {
			break
		}
		for _, p := range k.Packets() {
			if p.Tag == TagSignature {
				out = append(out, p.Body)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no signatures read")
	}
	return out
}

// TestParseV4FastReadsAsGoCrypto: on generated pool keys and on Debian's
// keyrings, every signature the fast parse takes, go-crypto reads the
// same, and the fast parse takes the generated keys' signatures (the
// common case it exists for).
func TestParseV4FastReadsAsGoCrypto(t *testing.T) {
	typical, err := keygen.TypicalKeys(300, 7)
	if err != nil {
		t.Fatal(err)
	}
	sigs := signatureBodies(t, bytes.Join(typical, nil))
	fast := 0
	for i, body := range sigs {
		if checkFastParse(t, "generated key", body) {
			fast++
		} else if gc, err := goCryptoSignature(body); err == nil && gc.Version == 4 && gc.Hash.Available() {
			t.Errorf("signature %d of the generated keys left to go-crypto: %x", i, body)
		}
	}
	t.Logf("generated keys: %d of %d signatures parsed in place", fast, len(sigs))
	for _, path := range debianKeyrings {
		sigs := signatureBodies(t, testkit.File(t, path))
		fast := 0
		for _, body := range sigs {
			if checkFastParse(t, path, body) {
				fast++
			}
		}
		t.Logf("%s: %d of %d signatures parsed in place", path, fast, len(sigs))
	}
}

// TestParseV4FastRefusesWhatGoCryptoRefuses tries the fast parse on
// broken signatures: every prefix and every single-octet change of real
// ones (an Ed25519 self-signature, a subkey binding with its embedded
// back-signature, an RSA one), and subpackets go-crypto refuses. Whatever
// the fast parse takes, go-crypto must read the same.
func TestParseV4FastRefusesWhatGoCryptoRefuses(t *testing.T) {
	typical, err := keygen.TypicalKeys(40, 3)
	if err != nil {
		t.Fatal(err)
	}
	var seeds [][]byte
	kinds := map[string]bool{}
	for _, body := range signatureBodies(t, bytes.Join(typical, nil)) {
		gs, ok := parseV4Fast(body)
		if !ok {
			continue
		}
		kind := fmt.Sprint(int(gs.PubKeyAlgo))
		if gs.EmbeddedSignature != nil {
			kind += "+embedded"
		}
		if !kinds[kind] {
			kinds[kind] = true
			seeds = append(seeds, body)
		}
	}
	if len(seeds) < 3 {
		t.Fatalf("want an RSA, an Ed25519 and an embedding signature among the generated keys, have %v", kinds)
	}
	for _, seed := range seeds {
		for n := range seed {
			checkFastParse(t, "prefix", seed[:n])
		}
		for i := range seed {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				b := bytes.Clone(seed)
				b[i] ^= x
				checkFastParse(t, "changed octet", b)
			}
		}
	}

	// A hashed subpacket inserted into the hashed area of a seed that
	// embeds no signature.
	var plain []byte
	for _, seed := range seeds {
		if gs, _ := parseV4Fast(seed); gs.EmbeddedSignature == nil {
			plain = seed
			break
		}
	}
	withHashed := func(sub []byte) []byte {
		n := int(binary.BigEndian.Uint16(plain[4:6]))
		b := append(bytes.Clone(plain[:6+n]), sub...)
		binary.BigEndian.PutUint16(b[4:6], uint16(n+len(sub)))
		return append(b, plain[6+n:]...)
	}
	for name, sub := range map[string][]byte{
		"critical unknown subpacket":      {2, 0x80 | 100, 0},
		"creation time of three octets":   {4, 2, 0, 0, 0},
		"non-exportable certification":    {2, 4, 0},
		"issuer of seven octets":          {8, 16, 1, 2, 3, 4, 5, 6, 7},
		"empty reason for revocation":     {1, 29},
		"v6 issuer fingerprint in v4":     append([]byte{34, 33, 6}, make([]byte, 32)...),
		"subpacket longer than its area":  {9, 2, 0, 0, 0, 0},
		"zero-length subpacket":           {0},
		"five-octet length past the area": {255, 0, 0, 1, 0, 2},
		"primary user ID of two octets":   {3, 25, 1, 1},
		"notation longer than it says":    {11, 20, 0x80, 0, 0, 0, 0, 1, 0, 0, 'a', 'b'},
	} {
		b := withHashed(sub)
		if _, ok := parseV4Fast(b); ok {
			t.Errorf("%s: the fast parse took it", name)
		}
		checkFastParse(t, name, b)
	}
	// An embedded signature that is not a primary key binding: go-crypto
	// refuses the whole signature.
	emb := bytes.Clone(plain)
	emb[1] = 0x13
	if _, ok := parseV4Fast(withHashed(subpacket(32, emb...))); ok {
		t.Error("embedded signature of the wrong type: the fast parse took it")
	}
	checkFastParse(t, "embedded signature of the wrong type", withHashed(subpacket(32, emb...)))
	emb[1] = 0x19
	if !checkFastParse(t, "embedded back-signature", withHashed(subpacket(32, emb...))) {
		t.Error("an embedded back-signature: the fast parse left it to go-crypto")
	}
	// Unknown subpackets that are not critical are skipped, as go-crypto
	// skips them.
	if !checkFastParse(t, "unknown subpacket", withHashed([]byte{3, 100, 1, 2})) {
		t.Error("a non-critical unknown subpacket: the fast parse left it to go-crypto")
	}
}

// FuzzParseV4Fast: whatever the fast parse takes, go-crypto reads the same.
func FuzzParseV4Fast(f *testing.F) {
	typical, err := keygen.TypicalKeys(10, 5)
	if err != nil {
		f.Fatal(err)
	}
	for _, body := range signatureBodies(f, bytes.Join(typical, nil)) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastParse(t, "fuzzed", body)
	})
}
