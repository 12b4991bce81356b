package pgp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestGroupFingerprint(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"AB", "AB"},
		{"ABCD", "ABCD"},
		{"0123456789ABCDEF", "0123 4567 89AB CDEF"},
		{"0123456789abcdef0", "0123 4567 89ab cdef 0"},
		{"EB85BB5FA33A75E15E944E63F231550C4F47E38E", "EB85 BB5F A33A 75E1 5E94 4E63 F231 550C 4F47 E38E"},
	} {
		if got := GroupFingerprint(tc.in); got != tc.want {
			t.Errorf("GroupFingerprint(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAlgorithmNames(t *testing.T) {
	for _, tc := range []struct {
		algo, bits  int
		curve       string
		people, gpg string
	}{
		{1, 4096, "", "RSA 4096", "rsa4096"},
		{3, 2048, "", "RSA 2048", "rsa2048"},
		{16, 2048, "", "ElGamal 2048", "elg2048"},
		{20, 1024, "", "ElGamal 1024", "elg1024"},
		{17, 1024, "", "DSA 1024", "dsa1024"},
		{22, 255, "ed25519", "EdDSA ed25519", "ed25519"},
		{18, 255, "cv25519", "ECDH cv25519", "cv25519"},
		{19, 256, "nistp256", "ECDSA nistp256", "nistp256"},
		{27, 255, "", "Ed25519 255", "ed25519"},
		{27, 0, "", "Ed25519", "ed25519"},
		{25, 255, "cv25519", "X25519", "cv25519"},
		{28, 0, "", "Ed448", "ed448"},
		{1, 0, "", "RSA", "rsa"},
		{99, 0, "", "algorithm 99", "algo99-"},
		{99, 512, "", "algorithm 99 512", "algo99-512"},
		{99, 0, "brainpoolP256r1", "algorithm 99 brainpoolP256r1", "brainpoolP256r1"},
	} {
		if got := AlgorithmName(tc.algo, tc.bits, tc.curve); got != tc.people {
			t.Errorf("AlgorithmName(%d, %d, %q) = %q, want %q", tc.algo, tc.bits, tc.curve, got, tc.people)
		}
		if got := GPGAlgorithmName(tc.algo, tc.bits, tc.curve); got != tc.gpg {
			t.Errorf("GPGAlgorithmName(%d, %d, %q) = %q, want %q", tc.algo, tc.bits, tc.curve, got, tc.gpg)
		}
	}
}

// subpacket encodes one signature subpacket (RFC 9580 section 5.2.3.7: a
// one- or two-octet length, then the type and the data).
func subpacket(typ byte, data ...byte) []byte {
	n := len(data) + 1
	if n < 192 {
		return append([]byte{byte(n), typ}, data...)
	}
	n -= 192
	return append([]byte{byte(n>>8) + 192, byte(n), typ}, data...)
}

// sigOfType is a signature body (sigBody's, with an EdDSA algorithm and
// no signature value) of type t.
func sigOfType(version, t byte, hashed, unhashed []byte) []byte {
	b := sigBody(version, 22, hashed, unhashed, nil)
	b[1] = t
	return b
}

func TestReadSignature(t *testing.T) {
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	created := subpacket(subpacketCreationTime, binary.BigEndian.AppendUint32(nil, uint32(when.Unix()))...)
	keyID := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	issuer := subpacket(subpacketIssuer, keyID...)
	otherIssuer := subpacket(subpacketIssuer, 9, 9, 9, 9, 9, 9, 9, 9)
	fpr4 := subpacket(subpacketIssuerFpr, slices.Concat([]byte{4}, bytes.Repeat([]byte{0xee}, 12), keyID)...)
	fpr6 := subpacket(subpacketIssuerFpr, slices.Concat([]byte{6}, keyID, bytes.Repeat([]byte{0xee}, 24))...)
	v3 := slices.Concat([]byte{3, 5, 0x10}, binary.BigEndian.AppendUint32(nil, uint32(when.Unix())), keyID, []byte{17, 2, 0xab, 0xcd})
	const id = 0x0102030405060708

	for _, tc := range []struct {
		name string
		body []byte
		want SignatureSummary
	}{
		{"v3", v3, SignatureSummary{Version: 3, Type: 0x10, Created: when, Issuer: id}},
		{"v4 issuer in the unhashed area", sigOfType(4, 0x13, created, issuer),
			SignatureSummary{Version: 4, Type: 0x13, Created: when, Issuer: id}},
		{"v4 issuer fingerprint", sigOfType(4, 0x18, slices.Concat(created, fpr4), nil),
			SignatureSummary{Version: 4, Type: 0x18, Created: when, Issuer: id}},
		{"issuer fingerprint wins over issuer key ID", sigOfType(4, 0x10, slices.Concat(created, fpr4), otherIssuer),
			SignatureSummary{Version: 4, Type: 0x10, Created: when, Issuer: id}},
		{"v6 issuer fingerprint", sigOfType(6, 0x1f, slices.Concat(created, fpr6), nil),
			SignatureSummary{Version: 6, Type: 0x1f, Created: when, Issuer: id}},
		{"creation time counts only when hashed", sigOfType(4, 0x30, nil, slices.Concat(created, issuer)),
			SignatureSummary{Version: 4, Type: 0x30, Issuer: id}},
		{"no issuer", sigOfType(4, 0x20, created, nil),
			SignatureSummary{Version: 4, Type: 0x20, Created: when}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadSignature(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}

	good := sigOfType(4, 0x10, created, nil)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"unknown version", []byte{7, 0x10, 22, 8, 0, 0, 0, 0, 0xab, 0xcd}},
		{"short v3", v3[:10]},
		{"subpacket area overruns the packet", good[:8]},
		{"subpacket overruns its area", sigOfType(4, 0x10, []byte{9, subpacketIssuer, 1, 2}, nil)},
		{"no hash prefix", good[:len(good)-2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := ReadSignature(tc.body); !errors.Is(err, ErrMalformedSignature) {
				t.Errorf("got %+v, %v; want ErrMalformedSignature", s, err)
			}
		})
	}
}
