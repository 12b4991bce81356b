// attest.go: first-party attested third-party certifications. When the key
// holder has attested the certifications of a user ID (an attestation key
// signature, type 0x16, of the OpenPGP crypto-refresh drafts, as `sq key
// attest-certifications` makes it), only the certifications its newest
// attestation lists are kept: strangers can no longer attach
// certifications the holder did not ask for.

package pgp

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"slices"
)

// keepAttested applies a user ID's (or user attribute's) attestations to
// its verified signatures: without a valid attestation it returns sigs as
// they are; otherwise it keeps the self-signatures, the attestations made
// at the newest attestation time (older ones are superseded), third-party
// certification revocations, and only those third-party certifications
// whose digest the newest attestations list. Dropped certifications count
// as DropUnattestedCertification, superseded attestations as
// DropDuplicate.
func keepAttested(sigs []keptSig, rep *Report) []keptSig {
	var newest int64 = -1
	for _, s := range sigs {
		if isAttestation(s) && s.self.created.Unix() > newest {
			newest = s.self.created.Unix()
		}
	}
	if newest < 0 {
		return sigs
	}
	type digest struct {
		h crypto.Hash
		d string
	}
	attested := map[digest]bool{}
	var hashes []crypto.Hash
	for _, s := range sigs {
		if !isAttestation(s) || s.self.created.Unix() != newest {
			continue
		}
		h, ok := attestationHash(s.info.hashAlgo)
		if !ok || len(s.info.attested)%h.Size() != 0 {
			continue
		}
		if !slices.Contains(hashes, h) {
			hashes = append(hashes, h)
		}
		for d := s.info.attested; len(d) > 0; d = d[h.Size():] {
			attested[digest{h, string(d[:h.Size()])}] = true
		}
	}
	out := sigs[:0:0]
	for _, s := range sigs {
		switch {
		case isAttestation(s):
			if s.self.created.Unix() != newest {
				rep.add(DropDuplicate, 1)
				continue
			}
		case s.self == nil && s.info.sigType >= sigTypeGenericCert && s.info.sigType <= sigTypePositiveCert:
			ok := false
			for _, h := range hashes {
				for _, d := range certificationDigests(h, s.pkt.Body) {
					ok = ok || attested[digest{h, string(d)}]
				}
			}
			if !ok {
				rep.add(DropUnattestedCertification, 1)
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

func isAttestation(s keptSig) bool {
	return s.self != nil && s.info.sigType == sigTypeAttestation
}

// attestationHash maps the hash algorithms an attestation may use.
func attestationHash(id uint8) (crypto.Hash, bool) {
	switch id {
	case 8:
		return crypto.SHA256, true
	case 9:
		return crypto.SHA384, true
	case 10:
		return crypto.SHA512, true
	case 11:
		return crypto.SHA224, true
	case 12:
		return crypto.SHA3_256, true
	case 14:
		return crypto.SHA3_512, true
	}
	return 0, false
}

// certificationDigests returns the digests an attestation may list for a
// certification: the hash of the octet 0x88, the body's length as four
// octets and the body, as a signature over a signature is computed, both
// of the body as it is and with its unhashed subpacket area emptied
// (which anyone may change, so attesting implementations leave it out).
func certificationDigests(h crypto.Hash, body []byte) [][]byte {
	if !h.Available() {
		return nil
	}
	sum := func(b []byte) []byte {
		w := h.New()
		var hdr [5]byte
		hdr[0] = 0x88
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(b)))
		w.Write(hdr[:])
		w.Write(b)
		return w.Sum(nil)
	}
	out := [][]byte{sum(body)}
	if stripped := withoutUnhashed(body); stripped != nil && !bytes.Equal(stripped, body) {
		out = append(out, sum(stripped))
	}
	return out
}

// withoutUnhashed returns a v4 signature body with an empty unhashed
// subpacket area, or nil when body is not a well-formed v4 signature.
func withoutUnhashed(body []byte) []byte {
	if len(body) < 6 || body[0] != 4 {
		return nil
	}
	hl := int(binary.BigEndian.Uint16(body[4:6]))
	if len(body) < 8+hl {
		return nil
	}
	ul := int(binary.BigEndian.Uint16(body[6+hl : 8+hl]))
	if len(body) < 8+hl+ul {
		return nil
	}
	out := make([]byte, 0, len(body)-ul)
	out = append(out, body[:6+hl]...)
	out = append(out, 0, 0)
	return append(out, body[8+hl+ul:]...)
}
