// cosignature.go: C2SP tlog-cosignature, Ed25519 cosignature/v1: the
// timestamped note signature a witness adds to a checkpoint it verified
// as consistent with every one it cosigned before, and its verifier key.

package tlog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// cosignatureV1 is the vkey signature type of Ed25519 cosignature/v1
// keys (signed-note's 0x01 is a plain Ed25519 note signature).
const cosignatureV1 = 0x04

// timestampSize is the size of a cosignature's timestamp prefix.
const timestampSize = 8

// cosignedMessage is what an Ed25519 cosignature/v1 signs: the header
// line, the timestamp line and the checkpoint's note text.
func cosignedMessage(text []byte, t uint64) []byte {
	msg := fmt.Appendf(nil, "cosignature/v1\ntime %d\n", t)
	return append(msg, text...)
}

// Cosigner makes Ed25519 cosignature/v1 signatures: a note.Signer whose
// signatures carry the time they were made.
type Cosigner struct {
	name string
	priv ed25519.PrivateKey
	hash uint32
	// now returns the time a signature states; time.Now by default.
	now func() time.Time
}

var _ note.Signer = (*Cosigner)(nil)

// NewCosigner returns the cosigner named name (a schema-less URL, say
// "example.com/witness") made from seed (SeedSize secret bytes).
func NewCosigner(name string, seed []byte) (*Cosigner, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("tlog: cosigner key: %d bytes, want %d", len(seed), SeedSize)
	}
	if !validKeyName(name) {
		return nil, fmt.Errorf("tlog: cosigner name %q must be non-empty, without spaces or '+'", name)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &Cosigner{name: name, priv: priv, hash: cosignerKeyHash(name, priv.Public().(ed25519.PublicKey)), now: time.Now}, nil
}

// validKeyName reports whether name may name a note key.
func validKeyName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " +\n\t")
}

// cosignerKeyHash is the key ID of an Ed25519 cosignature/v1 key.
func cosignerKeyHash(name string, pub ed25519.PublicKey) uint32 {
	return keyHashOf(name, cosignatureV1, pub)
}

// Name returns the cosigner's name.
func (c *Cosigner) Name() string { return c.name }

// KeyHash returns the key ID its signatures carry.
func (c *Cosigner) KeyHash() uint32 { return c.hash }

// Sign returns the timestamp (now, in seconds) and the Ed25519 signature
// of the cosigned message over msg, the checkpoint's note text.
func (c *Cosigner) Sign(msg []byte) ([]byte, error) {
	t := uint64(c.now().Unix())
	sig := binary.BigEndian.AppendUint64(make([]byte, 0, timestampSize+ed25519.SignatureSize), t)
	return append(sig, ed25519.Sign(c.priv, cosignedMessage(msg, t))...), nil
}

// VerifierKey returns the cosigner's vkey,
// "<name>+<hex key ID>+<base64 of 0x04 and the public key>".
func (c *Cosigner) VerifierKey() string {
	return formatVerifierKey(c.name, c.hash, cosignatureV1, c.priv.Public().(ed25519.PublicKey))
}

// Cosign returns signed (a signed note) with a cosignature of its text
// appended; it does not check signed's signatures.
func (c *Cosigner) Cosign(signed []byte) ([]byte, error) {
	text, _, ok := SplitNote(signed)
	if !ok {
		return nil, errors.New("tlog: cosign: not a signed note")
	}
	sig, err := c.Sign(text)
	if err != nil {
		return nil, err
	}
	// The key ID and the signature are one base64 string.
	line := fmt.Appendf(nil, "— %s %s\n", c.name, base64.StdEncoding.EncodeToString(append(binary.BigEndian.AppendUint32(nil, c.hash), sig...)))
	return append(append([]byte(nil), signed...), line...), nil
}

// CosignatureVerifier verifies Ed25519 cosignature/v1 signatures: a
// note.Verifier that also reports when a signature says it was made.
type CosignatureVerifier struct {
	name string
	pub  ed25519.PublicKey
	hash uint32
}

var _ note.Verifier = (*CosignatureVerifier)(nil)

// NewCosignatureVerifier parses an Ed25519 cosignature/v1 vkey
// (signature type 0x04). Other signature types are errors, ML-DSA-44
// cosignatures (0x06) included: Kith does not verify them yet.
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, hash, typ, pub, err := parseVerifierKey(vkey)
	if err != nil {
		return nil, err
	}
	if typ != cosignatureV1 {
		return nil, fmt.Errorf("tlog: vkey %q: signature type 0x%02x, want 0x%02x (Ed25519 cosignature/v1)", vkey, typ, cosignatureV1)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("tlog: vkey %q: Ed25519 key of %d bytes", vkey, len(pub))
	}
	if cosignerKeyHash(name, pub) != hash {
		return nil, fmt.Errorf("tlog: vkey %q: wrong key ID", vkey)
	}
	return &CosignatureVerifier{name: name, pub: ed25519.PublicKey(pub), hash: hash}, nil
}

// Name returns the cosigner's name.
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash returns the key ID its signatures carry.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// PublicKey returns the Ed25519 public key.
func (v *CosignatureVerifier) PublicKey() ed25519.PublicKey { return v.pub }

// Verify reports whether sig (timestamp and signature) cosigns msg.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	_, ok := v.verify(msg, sig)
	return ok
}

// verify returns the time a valid signature states.
func (v *CosignatureVerifier) verify(msg, sig []byte) (time.Time, bool) {
	if len(sig) != timestampSize+ed25519.SignatureSize {
		return time.Time{}, false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > 1<<63-1 {
		return time.Time{}, false
	}
	if !ed25519.Verify(v.pub, cosignedMessage(msg, t), sig[timestampSize:]) {
		return time.Time{}, false
	}
	return time.Unix(int64(t), 0), true
}

// CosignedAt returns when the cosignature by v in the signed note says it
// was made; false when the note holds no valid cosignature by v.
func (v *CosignatureVerifier) CosignedAt(signed []byte) (time.Time, bool) {
	text, sigs, ok := SplitNote(signed)
	if !ok {
		return time.Time{}, false
	}
	for _, line := range sigs {
		name, hash, sig, ok := parseSignatureLine(line)
		if !ok || name != v.name || hash != v.hash {
			continue
		}
		if t, ok := v.verify(text, sig); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// SplitNote splits a signed note into its text (with its final newline)
// and its signature lines (without theirs); false if it is not one.
func SplitNote(signed []byte) (text []byte, sigs [][]byte, ok bool) {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 || !bytes.HasSuffix(signed, []byte("\n")) || i+2 == len(signed) {
		return nil, nil, false
	}
	text = signed[:i+1]
	for _, line := range bytes.SplitAfter(signed[i+2:], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if !bytes.HasPrefix(line, []byte("— ")) {
			return nil, nil, false
		}
		sigs = append(sigs, line)
	}
	return text, sigs, true
}

// parseSignatureLine parses "— <name> <base64 of key ID and signature>".
func parseSignatureLine(line []byte) (name string, hash uint32, sig []byte, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte("— "))
	if !ok {
		return "", 0, nil, false
	}
	n, b64, ok := strings.Cut(string(rest), " ")
	if !ok {
		return "", 0, nil, false
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) < 5 {
		return "", 0, nil, false
	}
	return n, binary.BigEndian.Uint32(b), b[4:], true
}

// MergeSignatures returns signed with the signature lines of extra (a
// witness's answer: signature lines only) that are by one of keep and
// valid over signed's text; a line by a cosigner signed already holds is
// replaced. Lines by other keys, or that do not verify, are dropped.
func MergeSignatures(signed, extra []byte, keep ...note.Verifier) ([]byte, error) {
	text, sigs, ok := SplitNote(signed)
	if !ok {
		return nil, errors.New("tlog: merge signatures: not a signed note")
	}
	type key struct {
		name string
		hash uint32
	}
	added := map[key][]byte{}
	var order []key
	for _, line := range bytes.Split(extra, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		name, hash, sig, ok := parseSignatureLine(line)
		if !ok {
			return nil, fmt.Errorf("tlog: merge signatures: malformed signature line %q", line)
		}
		for _, v := range keep {
			if v.Name() != name || v.KeyHash() != hash || !v.Verify(text, sig) {
				continue
			}
			k := key{name, hash}
			if _, dup := added[k]; !dup {
				order = append(order, k)
			}
			added[k] = line
		}
	}
	out := append([]byte(nil), text...)
	out = append(out, '\n')
	for _, line := range sigs {
		name, hash, _, ok := parseSignatureLine(line)
		if _, replaced := added[key{name, hash}]; ok && replaced {
			continue
		}
		out = append(append(out, line...), '\n')
	}
	for _, k := range order {
		out = append(append(out, added[k]...), '\n')
	}
	return out, nil
}

// keyHashOf is the C2SP signed-note key ID: the first four bytes of
// SHA-256(name, newline, signature type, public key).
func keyHashOf(name string, typ byte, pub []byte) uint32 {
	return keyHashBytes(name, append([]byte{typ}, pub...))
}

// formatVerifierKey returns a vkey.
func formatVerifierKey(name string, hash uint32, typ byte, pub []byte) string {
	return fmt.Sprintf("%s+%08x+%s", name, hash, base64.StdEncoding.EncodeToString(append([]byte{typ}, pub...)))
}

// parseVerifierKey splits a vkey into its name, key ID, signature type
// and public key.
func parseVerifierKey(vkey string) (name string, hash uint32, typ byte, pub []byte, err error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hexHash, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validKeyName(name) || len(hexHash) != 8 {
		return "", 0, 0, nil, fmt.Errorf("tlog: malformed vkey %q", vkey)
	}
	h, err := strconv.ParseUint(hexHash, 16, 32)
	if err != nil {
		return "", 0, 0, nil, fmt.Errorf("tlog: malformed vkey %q: key ID", vkey)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 2 {
		return "", 0, 0, nil, fmt.Errorf("tlog: malformed vkey %q: key", vkey)
	}
	return name, uint32(h), key[0], key[1:], nil
}

// VerifierKeyPublicKey returns the signature type and public key a vkey
// wraps, which say whether two vkeys are the same key under two names.
func VerifierKeyPublicKey(vkey string) (typ byte, pub []byte, err error) {
	_, _, typ, pub, err = parseVerifierKey(vkey)
	return typ, pub, err
}
