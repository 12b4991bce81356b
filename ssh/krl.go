// krl.go: OpenSSH key revocation lists (KRLs), the binary format sshd's
// RevokedKeys reads and `ssh-keygen -k` writes, as OpenSSH's
// PROTOCOL.krl describes it. Kith writes certificate sections that revoke
// by serial number; it reads every section OpenSSH defines, so that a
// client can check a list before it installs it.
//
// A KRL is a header and sections:
//
//	uint64 KRL_MAGIC ("SSHKRL\n\0")   uint32 format version (1)
//	uint64 krl_version   uint64 generated_date   uint64 flags
//	string reserved      string comment
//	then, repeatedly: byte section_type, string section_data
//
// Kith does not sign its lists: OpenSSH never checked KRL signatures and
// from 9.4 refuses to load a list that carries one. A list is fetched
// over the server's own channel and names the CA it revokes for, which
// the client checks against the CA key it trusts.

package ssh

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"
)

// The KRL format's constants (PROTOCOL.krl).
const (
	krlMagic         = 0x5353484b524c0a00
	krlFormatVersion = 1

	krlSectionCertificates      = 1
	krlSectionExplicitKey       = 2
	krlSectionFingerprintSHA1   = 3
	krlSectionSignature         = 4
	krlSectionFingerprintSHA256 = 5
	krlSectionExtension         = 255

	krlCertSerialList   = 0x20
	krlCertSerialRange  = 0x21
	krlCertSerialBitmap = 0x22
	krlCertKeyID        = 0x23
	krlCertExtension    = 0x39
)

// MaxKRLSize bounds a KRL that ParseKRL reads: a serial list of a million
// certificates is 8 MiB.
const MaxKRLSize = 16 << 20

// maxBitmapSerials bounds the serials one bitmap section may expand to.
const maxBitmapSerials = 1 << 20

// ErrMalformedKRL means bytes are not a KRL OpenSSH would load.
var ErrMalformedKRL = errors.New("malformed KRL")

// KRL is a key revocation list.
type KRL struct {
	// Version increases each time the list changes.
	Version uint64
	// Generated is when the list was made (whole seconds).
	Generated time.Time
	Comment   string
	// Certificates revoke certificates, per CA.
	Certificates []RevokedCertificates
	// Keys are revoked plain keys' blobs (explicit key sections); SHA1
	// and SHA256 are revoked keys' hashes (fingerprint sections). Kith
	// writes none of these; they are read so that a list from elsewhere
	// can be described.
	Keys         [][]byte
	SHA1, SHA256 [][]byte
}

// RevokedCertificates revokes certificates of one CA.
type RevokedCertificates struct {
	// CA is the CA's public key blob; empty means every CA.
	CA []byte
	// Serials are revoked serial numbers, and Ranges revoked ranges of
	// them (both ends included).
	Serials []uint64
	Ranges  [][2]uint64
	// KeyIDs are revoked certificate key IDs.
	KeyIDs []string
}

// Revoked reports whether the list revokes the certificate with serial
// and key ID, issued by the CA with blob ca.
func (k *KRL) Revoked(ca []byte, serial uint64, keyID string) bool {
	for _, s := range k.Certificates {
		if len(s.CA) > 0 && !bytes.Equal(s.CA, ca) {
			continue
		}
		if slices.Contains(s.Serials, serial) || slices.Contains(s.KeyIDs, keyID) {
			return true
		}
		for _, r := range s.Ranges {
			if serial >= r[0] && serial <= r[1] {
				return true
			}
		}
	}
	return false
}

// NamesCA reports whether the list has a certificate section for the CA
// with blob ca.
func (k *KRL) NamesCA(ca []byte) bool {
	return slices.ContainsFunc(k.Certificates, func(s RevokedCertificates) bool { return bytes.Equal(s.CA, ca) })
}

// Marshal returns the list in the binary KRL format. Serials are written
// sorted and without duplicates; a CA with nothing revoked still gets its
// (empty) section, so that the list names the CA it is for.
func (k *KRL) Marshal() []byte {
	var b []byte
	b = binary.BigEndian.AppendUint64(b, krlMagic)
	b = binary.BigEndian.AppendUint32(b, krlFormatVersion)
	b = binary.BigEndian.AppendUint64(b, k.Version)
	b = binary.BigEndian.AppendUint64(b, uint64(max(k.Generated.Unix(), 0)))
	b = binary.BigEndian.AppendUint64(b, 0) // flags
	b = appendString(b, nil)                // reserved
	b = appendString(b, []byte(k.Comment))
	for _, s := range k.Certificates {
		var sec []byte
		sec = appendString(sec, s.CA)
		sec = appendString(sec, nil) // reserved
		serials := slices.Clone(s.Serials)
		slices.Sort(serials)
		serials = slices.Compact(serials)
		if len(serials) > 0 {
			var list []byte
			for _, n := range serials {
				list = binary.BigEndian.AppendUint64(list, n)
			}
			sec = append(sec, krlCertSerialList)
			sec = appendString(sec, list)
		}
		for _, r := range s.Ranges {
			var rb []byte
			rb = binary.BigEndian.AppendUint64(rb, r[0])
			rb = binary.BigEndian.AppendUint64(rb, r[1])
			sec = append(sec, krlCertSerialRange)
			sec = appendString(sec, rb)
		}
		if len(s.KeyIDs) > 0 {
			var ids []byte
			for _, id := range s.KeyIDs {
				ids = appendString(ids, []byte(id))
			}
			sec = append(sec, krlCertKeyID)
			sec = appendString(sec, ids)
		}
		b = append(b, krlSectionCertificates)
		b = appendString(b, sec)
	}
	if len(k.Keys) > 0 {
		var sec []byte
		for _, key := range k.Keys {
			sec = appendString(sec, key)
		}
		b = append(b, krlSectionExplicitKey)
		b = appendString(b, sec)
	}
	for _, h := range []struct {
		typ    byte
		hashes [][]byte
	}{{krlSectionFingerprintSHA1, k.SHA1}, {krlSectionFingerprintSHA256, k.SHA256}} {
		if len(h.hashes) == 0 {
			continue
		}
		sorted := slices.Clone(h.hashes)
		slices.SortFunc(sorted, bytes.Compare)
		var sec []byte
		for _, x := range sorted {
			sec = appendString(sec, x)
		}
		b = append(b, h.typ)
		b = appendString(b, sec)
	}
	return b
}

func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// krlReader reads the KRL's wire types.
type krlReader struct {
	b   []byte
	err error
}

func (r *krlReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformedKRL, fmt.Sprintf(format, args...))
	}
}

// take consumes the next n bytes, or fails with what was cut short.
func (r *krlReader) take(what string, n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.fail("%s is cut short", what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *krlReader) u64(what string) uint64 {
	if v := r.take(what, 8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *krlReader) u32(what string) uint32 {
	if v := r.take(what, 4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *krlReader) byte1(what string) byte {
	if v := r.take(what, 1); v != nil {
		return v[0]
	}
	return 0
}

func (r *krlReader) str(what string) []byte {
	n := r.u32(what + " length")
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail("%s of %d bytes runs past the end", what, n)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// ParseKRL reads a KRL and checks it as OpenSSH's loader does: the magic
// and format version, every section's framing, keys that parse, serials
// that are not 0, fingerprints in order. It refuses a signed list (which
// OpenSSH 9.4 and later refuse to load) and any critical extension.
func ParseKRL(data []byte) (*KRL, error) {
	if len(data) > MaxKRLSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedKRL, len(data), MaxKRLSize)
	}
	r := &krlReader{b: data}
	if r.u64("magic") != krlMagic {
		r.fail("it does not start with the KRL magic")
	}
	if v := r.u32("format version"); r.err == nil && v != krlFormatVersion {
		r.fail("format version %d, want %d", v, krlFormatVersion)
	}
	k := &KRL{Version: r.u64("krl_version")}
	k.Generated = certTime(r.u64("generated_date"))
	r.u64("flags")
	r.str("reserved")
	k.Comment = string(r.str("comment"))
	for r.err == nil && len(r.b) > 0 {
		typ := r.byte1("section type")
		if typ == krlSectionSignature {
			r.fail("the list is signed, which OpenSSH 9.4 and later refuse to load")
			break
		}
		sec := &krlReader{b: r.str("section")}
		switch typ {
		case krlSectionCertificates:
			k.Certificates = append(k.Certificates, parseCertSection(sec))
		case krlSectionExplicitKey:
			for sec.err == nil && len(sec.b) > 0 {
				blob := sec.str("revoked key")
				if sec.err == nil {
					if _, err := ParsePublicKey(blob); err != nil {
						sec.fail("revoked key: %v", err)
					}
				}
				k.Keys = append(k.Keys, blob)
			}
		case krlSectionFingerprintSHA1, krlSectionFingerprintSHA256:
			size, dst := 20, &k.SHA1
			if typ == krlSectionFingerprintSHA256 {
				size, dst = 32, &k.SHA256
			}
			var last []byte
			for sec.err == nil && len(sec.b) > 0 {
				h := sec.str("key hash")
				switch {
				case sec.err != nil:
				case len(h) != size:
					sec.fail("key hash of %d bytes, want %d", len(h), size)
				case last != nil && bytes.Compare(h, last) <= 0:
					sec.fail("key hashes out of order")
				}
				last = h
				*dst = append(*dst, h)
			}
		case krlSectionExtension:
			parseExtension(sec, "extension")
		default:
			sec.fail("unknown section type %d", typ)
		}
		if sec.err != nil {
			r.err = sec.err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return k, nil
}

// parseCertSection reads a certificate section.
func parseCertSection(r *krlReader) RevokedCertificates {
	var s RevokedCertificates
	s.CA = bytes.Clone(r.str("CA key"))
	if r.err == nil && len(s.CA) > 0 {
		pub, err := ssh.ParsePublicKey(s.CA)
		switch {
		case err != nil:
			r.fail("CA key: %v", err)
		case pub.Type() != ssh.KeyAlgoED25519 && pub.Type() != ssh.KeyAlgoRSA && pub.Type() != ssh.KeyAlgoECDSA256 &&
			pub.Type() != ssh.KeyAlgoECDSA384 && pub.Type() != ssh.KeyAlgoECDSA521 &&
			pub.Type() != ssh.KeyAlgoSKED25519 && pub.Type() != ssh.KeyAlgoSKECDSA256:
			r.fail("CA key of type %s", pub.Type())
		}
	}
	r.str("reserved")
	for r.err == nil && len(r.b) > 0 {
		typ := r.byte1("certificate section type")
		sub := &krlReader{b: r.str("certificate section")}
		switch typ {
		case krlCertSerialList:
			for sub.err == nil && len(sub.b) > 0 {
				n := sub.u64("serial")
				if sub.err == nil && n == 0 {
					sub.fail("serial 0 in a serial list")
				}
				s.Serials = append(s.Serials, n)
			}
		case krlCertSerialRange:
			lo, hi := sub.u64("range start"), sub.u64("range end")
			if sub.err == nil && (lo == 0 || lo > hi) {
				sub.fail("serial range %d-%d", lo, hi)
			}
			s.Ranges = append(s.Ranges, [2]uint64{lo, hi})
			if sub.err == nil && len(sub.b) > 0 {
				sub.fail("%d bytes after a serial range", len(sub.b))
			}
		case krlCertSerialBitmap:
			offset := sub.u64("bitmap offset")
			bits := sub.str("bitmap")
			if sub.err == nil && len(bits) > 0 && bits[0]&0x80 != 0 {
				sub.fail("negative bitmap")
			}
			if sub.err == nil && len(bits)*8 > maxBitmapSerials {
				sub.fail("bitmap of %d bits, more than %d", len(bits)*8, maxBitmapSerials)
			}
			if sub.err == nil {
				n := new(big.Int).SetBytes(bits)
				for i := 0; i < n.BitLen(); i++ {
					if n.Bit(i) == 1 {
						s.Serials = append(s.Serials, offset+uint64(i))
					}
				}
			}
			if sub.err == nil && len(sub.b) > 0 {
				sub.fail("%d bytes after a serial bitmap", len(sub.b))
			}
		case krlCertKeyID:
			for sub.err == nil && len(sub.b) > 0 {
				id := sub.str("key ID")
				s.KeyIDs = append(s.KeyIDs, string(id))
			}
		case krlCertExtension:
			parseExtension(sub, "certificate extension")
		default:
			sub.fail("unknown certificate section type %#x", typ)
		}
		if sub.err != nil {
			r.err = sub.err
		}
	}
	return s
}

// parseExtension reads an extension section, refusing a critical one.
func parseExtension(r *krlReader, what string) {
	name := r.str(what + " name")
	critical := r.byte1(what + " criticality")
	r.str(what + " contents")
	if r.err == nil && critical != 0 {
		r.fail("critical %s %q", what, name)
	}
}
