package pgp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// sigBody builds a v4 (or v6) generic certification with the given
// subpacket areas, algorithm and signature fields.
func sigBody(version, algo byte, hashed, unhashed, value []byte) []byte {
	b := []byte{version, sigTypeGenericCert, algo, 8}
	area := func(a []byte) {
		if version == 4 {
			b = binary.BigEndian.AppendUint16(b, uint16(len(a)))
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(len(a)))
		}
		b = append(b, a...)
	}
	area(hashed)
	area(unhashed)
	b = append(b, 0xab, 0xcd)
	if version == 6 {
		b = append(b, 16)
		b = append(b, bytes.Repeat([]byte{7}, 16)...)
	}
	return append(b, value...)
}

// mpiOf is a well-formed MPI of n bytes with its top bit set.
func mpiOf(n int) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(n*8))
	return append(append(b, 0x80), bytes.Repeat([]byte{1}, n-1)...)
}

var (
	created = []byte{5, subpacketCreationTime, 0x5e, 0x0b, 0xe1, 0x00}
	issuer  = []byte{9, subpacketIssuer, 1, 2, 3, 4, 5, 6, 7, 8}
)

// keyBody builds a v4 (or v6) public-key body.
func keyBody(version, algo byte, material []byte) []byte {
	b := []byte{version, 0x5e, 0x0b, 0xe1, 0x00, algo}
	if version == 6 {
		b = binary.BigEndian.AppendUint32(b, uint32(len(material)))
	}
	return append(b, material...)
}

var p256 = []byte{8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}

// wellFormedCases are packets and what CheckPacket must say of them (nil:
// well formed). gpgReads says whether gpg 2.2 reads a v4 key carrying the
// packet (checked by TestWellFormedAgreesWithGPG).
var wellFormedCases = []struct {
	name     string
	p        Packet
	want     error
	gpgReads bool
}{
	{"RSA certification", Packet{TagSignature, sigBody(4, algoRSA, created, issuer, mpiOf(256))}, nil, true},
	{"MPI claims 48410 bits, carries 64 bytes", Packet{TagSignature, sigBody(4, algoRSA, created, issuer, append([]byte{0xbd, 0x1a}, bytes.Repeat([]byte{1}, 64)...))}, ErrMalformedSignature, false},
	{"MPI claims fewer bits than it holds", Packet{TagSignature, sigBody(4, algoRSA, created, issuer, []byte{0, 9, 0x80, 1})}, ErrMalformedSignature, true},
	{"MPI with leading zero bits", Packet{TagSignature, sigBody(4, algoRSA, created, issuer, []byte{0, 16, 0x01, 1})}, nil, true},
	{"bytes after the RSA MPI", Packet{TagSignature, sigBody(4, algoRSA, created, issuer, append(mpiOf(256), 1))}, ErrMalformedSignature, true},
	{"DSA signature with one MPI", Packet{TagSignature, sigBody(4, algoDSA, created, issuer, mpiOf(20))}, ErrMalformedSignature, false},
	{"Ed25519 signature of 63 bytes", Packet{TagSignature, sigBody(4, algoEd25519, created, issuer, make([]byte, 63))}, ErrMalformedSignature, true},
	{"Ed25519 signature", Packet{TagSignature, sigBody(4, algoEd25519, created, issuer, make([]byte, 64))}, nil, true},
	{"signature by ECDH", Packet{TagSignature, sigBody(4, algoECDH, created, issuer, mpiOf(32))}, ErrMalformedSignature, true},
	{"signature by unknown algorithm 100", Packet{TagSignature, sigBody(4, 100, created, issuer, mpiOf(32))}, ErrUnknownAlgorithm, true},
	{"subpacket overruns its area", Packet{TagSignature, sigBody(4, algoRSA, []byte{9, subpacketCreationTime, 1, 2, 3, 4}, issuer, mpiOf(256))}, ErrMalformedSignature, true},
	{"creation time of 3 bytes", Packet{TagSignature, sigBody(4, algoRSA, []byte{4, subpacketCreationTime, 1, 2, 3}, issuer, mpiOf(256))}, ErrMalformedSignature, false},
	{"notation lengths lie", Packet{TagSignature, sigBody(4, algoRSA, append(bytes.Clone(created), 10, subpacketNotation, 0x80, 0, 0, 0, 0, 9, 0, 0, 'x'), issuer, mpiOf(256))}, ErrMalformedSignature, false},
	{"unknown subpacket type", Packet{TagSignature, sigBody(4, algoRSA, append(bytes.Clone(created), 3, 100, 1, 2), issuer, mpiOf(256))}, nil, true},
	{"embedded signature that lies", Packet{TagSignature, sigBody(4, algoRSA, created, append(bytes.Clone(issuer), 30, subpacketEmbeddedSig, 4, 0x19, 1, 8, 0, 0, 0, 0, 0xab, 0xcd, 0xff, 0xff, 1)[:29], mpiOf(256))}, ErrMalformedSignature, true},
	{"v6 certification", Packet{TagSignature, sigBody(6, algoEd25519, created, issuer, make([]byte, 64))}, nil, false},
	{"v5 signature", Packet{TagSignature, append([]byte{5}, sigBody(4, algoRSA, created, issuer, mpiOf(256))[1:]...)}, ErrUnknownVersion, false},
	{"v3 signature", Packet{TagSignature, append([]byte{3, 5, sigTypeGenericCert, 0x5e, 0x0b, 0xe1, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, algoRSA, 8, 0xab, 0xcd}, mpiOf(128)...)}, nil, true},
	{"P-256 ECDH subkey", Packet{TagPublicSubkey, keyBody(4, algoECDH, slices2(p256, mpiOf(65), []byte{3, 1, 8, 7}))}, nil, true},
	{"P-256 point of 64 bytes", Packet{TagPublicSubkey, keyBody(4, algoECDH, slices2(p256, mpiOf(64), []byte{3, 1, 8, 7}))}, ErrMalformedKey, true},
	{"curve OID of length 0", Packet{TagPublicSubkey, keyBody(4, algoECDH, slices2([]byte{0}, mpiOf(33), []byte{3, 1, 8, 7}))}, ErrMalformedKey, false},
	{"unknown curve", Packet{TagPublicSubkey, keyBody(4, algoECDSA, slices2([]byte{3, 1, 2, 3}, mpiOf(40)))}, nil, true},
	{"X25519 subkey of 31 bytes", Packet{TagPublicSubkey, keyBody(4, algoX25519, make([]byte, 31))}, ErrMalformedKey, true},
	{"RSA subkey with trailing byte", Packet{TagPublicSubkey, keyBody(4, algoRSA, slices2(mpiOf(256), mpiOf(3), []byte{9}))}, ErrMalformedKey, true},
	{"subkey of unknown algorithm 100", Packet{TagPublicSubkey, keyBody(4, 100, []byte{1, 2, 3, 4, 5})}, ErrUnknownAlgorithm, false},
	{"v6 subkey", Packet{TagPublicSubkey, keyBody(6, algoX25519, make([]byte, 32))}, nil, false},
	{"v6 key material length lies", Packet{TagPublicSubkey, keyBody(6, algoX25519, make([]byte, 32))[:37]}, ErrMalformedKey, false},
	{"image attribute", Packet{TagUserAttribute, slices2([]byte{20, 1, 16, 0, 1, 1}, make([]byte, 15))}, nil, true},
	{"image header longer than the image", Packet{TagUserAttribute, slices2([]byte{20, 1, 0xff, 0, 1, 1}, make([]byte, 15))}, ErrMalformedPacket, true},
	{"unknown attribute subpacket", Packet{TagUserAttribute, []byte{3, 100, 1, 2}}, nil, true},
	{"attribute subpacket overruns", Packet{TagUserAttribute, []byte{9, 100, 1, 2}}, ErrMalformedPacket, true},
}

func TestCheckPacket(t *testing.T) {
	for _, tc := range wellFormedCases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPacket(tc.p)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("CheckPacket = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestWellFormedAgreesWithGPG checks the cases' gpgReads claims against
// the installed gpg, and that the policy leaves gpg a key it reads either
// way: the README's list of what is kept rests on these.
func TestWellFormedAgreesWithGPG(t *testing.T) {
	gpg := testkit.Tool(t, "gpg")
	k := debianSample(t, 1)[0]
	for _, tc := range wellFormedCases {
		t.Run(tc.name, func(t *testing.T) {
			ps := k.Packets()
			if tc.p.Tag == TagSignature {
				ps = insertAfter(ps, isTag(TagUserID), tc.p)
			} else {
				ps = append(append([]Packet{}, ps...), tc.p, Packet{TagSignature, sigBody(4, algoRSA, created, issuer, mpiOf(256))})
			}
			raw := NewKey(ps)
			if _, _, err := gpgShow(t, gpg, raw.Bytes()); (err == nil) != tc.gpgReads {
				t.Errorf("gpg reads it: %v, want %v", err == nil, tc.gpgReads)
			}
			out, _, err := Policy{}.Apply(raw)
			if err != nil {
				t.Fatal(err)
			}
			if fprs, stderr, err := gpgShow(t, gpg, out.Bytes()); err != nil || len(fprs) != 1 {
				t.Errorf("gpg cannot read the policy's output: %v\n%s", err, stderr)
			}
		})
	}
}
