// checkpoint.go: C2SP tlog-checkpoint bodies, and the Ed25519 signed-note
// key that signs them.

package tlog

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"
)

// SeedSize is the size of the secret a log key is made from.
const SeedSize = ed25519.SeedSize

// Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin, the
// tree size and the root hash.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   xtlog.Hash
}

// Marshal returns the checkpoint body: the origin line, the decimal tree
// size and the standard base64 root hash, each ending in a newline.
func (c Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseCheckpoint parses a checkpoint body (extension lines after the
// root hash are allowed and ignored).
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.SplitAfter(string(text), "\n")
	if len(lines) < 4 || !strings.HasSuffix(string(text), "\n") {
		return c, errors.New("tlog: checkpoint: want origin, size and root hash lines")
	}
	c.Origin = strings.TrimSuffix(lines[0], "\n")
	if c.Origin == "" {
		return c, errors.New("tlog: checkpoint: empty origin")
	}
	size := strings.TrimSuffix(lines[1], "\n")
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != size {
		return c, fmt.Errorf("tlog: checkpoint: bad tree size %q", size)
	}
	c.Size = n
	root, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(root) != xtlog.HashSize {
		return c, errors.New("tlog: checkpoint: bad root hash")
	}
	copy(c.Root[:], root)
	return c, nil
}

// Key is the log's Ed25519 signing key, named by the log's origin.
type Key struct {
	name string
	priv ed25519.PrivateKey
	hash uint32
}

var _ note.Signer = (*Key)(nil)

// NewKey returns the key made from seed (SeedSize secret bytes), named
// origin.
func NewKey(origin string, seed []byte) (*Key, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("tlog: log key: %d bytes, want %d", len(seed), SeedSize)
	}
	if origin == "" || strings.ContainsAny(origin, " +\n\t") {
		return nil, fmt.Errorf("tlog: log key: origin %q must be non-empty, without spaces or '+'", origin)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &Key{name: origin, priv: priv, hash: keyHash(origin, priv.Public().(ed25519.PublicKey))}, nil
}

// keyHash is the C2SP signed-note key ID of an Ed25519 key: the first four
// bytes of SHA-256(name, newline, 0x01, public key).
func keyHash(name string, pub ed25519.PublicKey) uint32 {
	return keyHashOf(name, 0x01, pub)
}

// keyHashBytes is the first four bytes of SHA-256(name, newline, key),
// key being the signature type and the public key.
func keyHashBytes(name string, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n'})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Name returns the key's name, the log's origin.
func (k *Key) Name() string { return k.name }

// KeyHash returns the key ID signatures carry.
func (k *Key) KeyHash() uint32 { return k.hash }

// Sign signs msg.
func (k *Key) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.priv, msg), nil }

// VerifierKey returns the verifier key in note format,
// "<name>+<hash>+<base64 of 0x01 and the public key>".
func (k *Key) VerifierKey() string {
	vkey, err := note.NewEd25519VerifierKey(k.name, k.priv.Public().(ed25519.PublicKey))
	if err != nil {
		// The name was checked in NewKey.
		panic(err)
	}
	return vkey
}

// CheckVerifierKey reports whether vkey is a verifier key in note
// format.
func CheckVerifierKey(vkey string) error {
	if _, err := note.NewVerifier(vkey); err != nil {
		return fmt.Errorf("tlog: log key %q: %w", vkey, err)
	}
	return nil
}

// SignCheckpoint returns c as a signed note.
func (k *Key) SignCheckpoint(c Checkpoint) ([]byte, error) {
	if c.Origin != k.name {
		return nil, fmt.Errorf("tlog: checkpoint for origin %q signed by key %q", c.Origin, k.name)
	}
	msg, err := note.Sign(&note.Note{Text: string(c.Marshal())}, k)
	if err != nil {
		return nil, fmt.Errorf("tlog: sign checkpoint: %w", err)
	}
	return msg, nil
}

// OpenCheckpoint verifies a signed checkpoint with the verifier key vkey
// and returns its body. The checkpoint's origin must be the key's name.
func OpenCheckpoint(signed []byte, vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("tlog: log key: %w", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("tlog: checkpoint signature: %w", err)
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return c, err
	}
	if c.Origin != v.Name() {
		return c, fmt.Errorf("tlog: checkpoint of origin %q, the key is %q's", c.Origin, v.Name())
	}
	return c, nil
}
