// Package keygen generates realistic, validly self-signed OpenPGP public
// keys quickly, for tests and load benchmarks of the key pipeline.
//
// A "typical" pool key has an Ed25519 (about 80%), RSA-2048 (about 17%) or
// RSA-4096 primary key, one to three user IDs, one or two subkeys (an
// encryption subkey, sometimes a signing subkey with its back-signature) and
// zero to four third-party certifications from a small set of certifier
// keys. Everything but the RSA key material is derived from the seed, so the
// same (n, seed) gives the same Ed25519 keys; RSA numbers come from a small
// pool generated once per Generator (the standard library no longer lets a
// seed drive RSA generation), and every key still gets its own creation
// time, hence its own fingerprint.
//
// The package does not import Kith's pgp package: it writes bytes with
// go-crypto, so tests of pgp can use it.
package keygen

import (
	"bytes"
	"crypto"
	crand "crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// baseTime is the earliest creation time of generated keys.
var baseTime = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)

// Generator makes typical keys. It is safe for concurrent use.
type Generator struct {
	seed       int64
	once       sync.Once
	poolErr    error
	rsa2048    []*rsa.PrivateKey
	rsa4096    []*rsa.PrivateKey
	certifiers []*openpgp.Entity
}

// New returns a Generator for seed.
func New(seed int64) *Generator { return &Generator{seed: seed} }

// pool builds the RSA material and the certifier keys once.
func (g *Generator) pool() error {
	g.once.Do(func() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		gen := func(bits int, dst *[]*rsa.PrivateKey) {
			defer wg.Done()
			k, err := rsa.GenerateKey(crand.Reader, bits)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				g.poolErr = err
				return
			}
			*dst = append(*dst, k)
		}
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go gen(2048, &g.rsa2048)
		}
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go gen(4096, &g.rsa4096)
		}
		wg.Wait()
		for i := 0; i < 8 && g.poolErr == nil; i++ {
			e, err := NewEd25519(fmt.Sprintf("Certifier %d", i), fmt.Sprintf("certifier%d@example.org", i), baseTime, g.seed^int64(0x5eed0000+i))
			if err != nil {
				g.poolErr = err
			}
			g.certifiers = append(g.certifiers, e)
		}
	})
	return g.poolErr
}

// config returns a go-crypto config that signs at time t with randomness
// from rng.
func config(rng io.Reader, t time.Time) *packet.Config {
	return &packet.Config{
		Rand:        rng,
		Time:        func() time.Time { return t },
		DefaultHash: crypto.SHA256,
		Algorithm:   packet.PubKeyAlgoEdDSA,
		Curve:       packet.Curve25519,
	}
}

// seededReader returns a deterministic random stream for (seed, i).
func seededReader(seed int64, i uint64) io.Reader {
	var s [32]byte
	binary.BigEndian.PutUint64(s[:], uint64(seed))
	binary.BigEndian.PutUint64(s[8:], i)
	copy(s[16:], "kith-keygen-seed")
	return rand.NewChaCha8(s)
}

// NewEd25519 returns a v4 key (EdDSA primary, cv25519 encryption subkey) for
// "name <email>" created at created, deterministic in seed.
func NewEd25519(name, email string, created time.Time, seed int64) (*openpgp.Entity, error) {
	e, err := openpgp.NewEntity(name, "", email, config(seededReader(seed, 0), created))
	if err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	return e, nil
}

// PublicEd25519 returns the public key of NewEd25519(name, email,
// created, seed), as Serialize writes it.
func PublicEd25519(name, email string, created time.Time, seed int64) ([]byte, error) {
	e, err := NewEd25519(name, email, created, seed)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := Serialize(&b, e); err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	return b.Bytes(), nil
}

// Serialize writes e's public key in a deterministic order: primary key,
// direct signatures, user IDs sorted by name (each with self-signature and
// other signatures), subkeys in order.
func Serialize(w io.Writer, e *openpgp.Entity) error {
	if err := e.PrimaryKey.Serialize(w); err != nil {
		return err
	}
	for _, s := range e.Signatures {
		if s.SigType == packet.SigTypeDirectSignature || s.SigType == packet.SigTypeKeyRevocation {
			if err := s.Serialize(w); err != nil {
				return err
			}
		}
	}
	for _, s := range e.Revocations {
		if err := s.Serialize(w); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(e.Identities))
	for n := range e.Identities {
		names = append(names, n)
	}
	sortStrings(names)
	for _, n := range names {
		id := e.Identities[n]
		if err := id.UserId.Serialize(w); err != nil {
			return err
		}
		sigs := append([]*packet.Signature{id.SelfSignature}, id.Revocations...)
		for _, s := range id.Signatures {
			if s != id.SelfSignature {
				sigs = append(sigs, s)
			}
		}
		for _, s := range sigs {
			if s == nil {
				continue
			}
			if err := s.Serialize(w); err != nil {
				return err
			}
		}
	}
	for _, sk := range e.Subkeys {
		if err := sk.PublicKey.Serialize(w); err != nil {
			return err
		}
		if err := sk.Sig.Serialize(w); err != nil {
			return err
		}
		for _, s := range sk.Revocations {
			if err := s.Serialize(w); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Key returns the i-th typical key of this Generator's sequence as binary
// packets.
func (g *Generator) Key(i int) ([]byte, error) {
	if err := g.pool(); err != nil {
		return nil, fmt.Errorf("keygen: pool: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(g.seed), uint64(i)))
	stream := seededReader(g.seed, uint64(i)+1)
	// Creation times spread over ten years, distinct per index.
	created := baseTime.Add(time.Duration(i)*time.Second + time.Duration(rng.IntN(3650*24))*time.Hour)
	at := func(d int) time.Time { return created.Add(time.Duration(d) * time.Minute) }
	nUIDs := 1 + rng.IntN(3)
	name := fmt.Sprintf("%s %s", firstNames[rng.IntN(len(firstNames))], lastNames[rng.IntN(len(lastNames))])
	email := func(j int) string {
		return fmt.Sprintf("user%d.%d@%s", i, j, domains[rng.IntN(len(domains))])
	}

	var e *openpgp.Entity
	kind := rng.IntN(100)
	switch {
	case kind < 80:
		var err error
		if e, err = openpgp.NewEntity(name, "", email(0), config(stream, created)); err != nil {
			return nil, fmt.Errorf("keygen: %w", err)
		}
		if rng.IntN(3) == 0 {
			if err := e.AddSigningSubkey(config(stream, at(2))); err != nil {
				return nil, fmt.Errorf("keygen: %w", err)
			}
		}
	default:
		pool := g.rsa2048
		if kind >= 97 {
			pool = g.rsa4096
		}
		a := rng.IntN(len(pool))
		b := (a + 1 + rng.IntN(len(pool)-1)) % len(pool)
		priv := packet.NewRSAPrivateKey(created, pool[a])
		e = &openpgp.Entity{PrimaryKey: &priv.PublicKey, PrivateKey: priv, Identities: map[string]*openpgp.Identity{}}
		if err := e.AddUserId(name, "", email(0), config(stream, created)); err != nil {
			return nil, fmt.Errorf("keygen: %w", err)
		}
		sub := packet.NewRSAPrivateKey(at(1), pool[b])
		sub.IsSubkey, sub.PublicKey.IsSubkey = true, true
		sig := &packet.Signature{
			Version: 4, SigType: packet.SigTypeSubkeyBinding, PubKeyAlgo: priv.PubKeyAlgo,
			Hash: crypto.SHA256, CreationTime: at(1), IssuerKeyId: &priv.KeyId,
			IssuerFingerprint: priv.Fingerprint, FlagsValid: true,
			FlagEncryptCommunications: true, FlagEncryptStorage: true,
		}
		if err := sig.SignKey(&sub.PublicKey, priv, config(stream, at(1))); err != nil {
			return nil, fmt.Errorf("keygen: %w", err)
		}
		e.Subkeys = append(e.Subkeys, openpgp.Subkey{PublicKey: &sub.PublicKey, PrivateKey: sub, Sig: sig})
	}
	for j := 1; j < nUIDs; j++ {
		if err := e.AddUserId(name, "", email(j), config(stream, at(10+j))); err != nil {
			return nil, fmt.Errorf("keygen: %w", err)
		}
	}
	names := make([]string, 0, len(e.Identities))
	for n := range e.Identities {
		names = append(names, n)
	}
	sortStrings(names) // map order would make the random stream differ
	for _, idName := range names {
		for c := rng.IntN(5); c > 0; c-- {
			signer := g.certifiers[rng.IntN(len(g.certifiers))]
			if err := e.SignIdentity(idName, signer, config(stream, at(100+rng.IntN(100000)))); err != nil {
				return nil, fmt.Errorf("keygen: certify: %w", err)
			}
		}
	}
	var buf bytes.Buffer
	if err := Serialize(&buf, e); err != nil {
		return nil, fmt.Errorf("keygen: serialize: %w", err)
	}
	return buf.Bytes(), nil
}

// TypicalKeys returns n typical keys (binary packets, one slice per key),
// generated on GOMAXPROCS goroutines.
func TypicalKeys(n int, seed int64) ([][]byte, error) {
	return New(seed).Range(0, n)
}

// Range returns keys from to to-1 of the sequence, generated on GOMAXPROCS
// goroutines.
func (g *Generator) Range(from, to int) ([][]byte, error) {
	if err := g.pool(); err != nil {
		return nil, fmt.Errorf("keygen: pool: %w", err)
	}
	n := max(0, to-from)
	out := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				out[i], errs[i] = g.Key(from + i)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WriteTypicalKeys writes n typical keys, concatenated, to w (the layout of
// an SKS dump file), holding at most a batch of keys in memory.
func WriteTypicalKeys(w io.Writer, n int, seed int64) error {
	const batch = 1024
	g := New(seed)
	for start := 0; start < n; start += batch {
		keys, err := g.Range(start, min(n, start+batch))
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := w.Write(k); err != nil {
				return fmt.Errorf("keygen: write: %w", err)
			}
		}
	}
	return nil
}

var (
	firstNames = []string{"Ada", "Alan", "Grace", "Linus", "Ken", "Dennis", "Barbara", "Radia", "Whitfield", "Martin", "Hal", "Phil", "Werner", "Ian", "Daniel", "Yolanda", "Zhang", "Ngozi", "Aiko", "Olga"}
	lastNames  = []string{"Lovelace", "Turing", "Hopper", "Torvalds", "Thompson", "Ritchie", "Liskov", "Perlman", "Diffie", "Hellman", "Finney", "Zimmermann", "Koch", "Jackson", "Kahn-Gillmor", "Wei", "Okafor", "Sato", "Ivanova", "Müller"}
	domains    = []string{"example.org", "example.com", "example.net", "mail.example", "uni.example.edu"}
)
