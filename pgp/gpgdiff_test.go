package pgp

// Differential tests against gpg (and sq): real Debian keys, mutated the
// ways an attacker or a damaged peer would, go through Policy.Apply and
// Policy.Merge, and whatever Kith would serve must be read by gpg without
// error and with the same primary fingerprint.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// mutation is one way of damaging a key.
type mutation struct {
	name string
	// apply returns the mutated key bytes (nil when the mutation does not
	// apply to this key). other is a second key to graft from.
	apply func(r *rand.Rand, k, other *Key) []byte
}

// mutations are the damages the differential tests apply.
var mutations = []mutation{
	{"bit-flip", func(r *rand.Rand, k, _ *Key) []byte {
		ps := clonePackets(k.Packets())
		p := &ps[1+r.IntN(len(ps)-1)]
		if len(p.Body) == 0 {
			return nil
		}
		i := r.IntN(len(p.Body))
		p.Body[i] ^= 1 << r.IntN(8)
		return NewKey(ps).Bytes()
	}},
	{"truncated-packet", func(r *rand.Rand, k, _ *Key) []byte {
		ps := clonePackets(k.Packets())
		p := &ps[1+r.IntN(len(ps)-1)]
		p.Body = p.Body[:r.IntN(len(p.Body)+1)]
		return NewKey(ps).Bytes()
	}},
	{"truncated-key", func(r *rand.Rand, k, _ *Key) []byte {
		b := k.Bytes()
		return b[:len(k.Packets()[0].Body)+3+r.IntN(len(b)-len(k.Packets()[0].Body)-3)]
	}},
	{"junk-packet", func(r *rand.Rand, k, _ *Key) []byte {
		tags := []Tag{TagSignature, TagSignature, TagUserAttribute, TagPublicSubkey, TagUserID, 60}
		junk := make([]byte, 1+r.IntN(120))
		for i := range junk {
			junk[i] = byte(r.UintN(256))
		}
		if r.IntN(2) == 0 { // a plausible version and algorithm
			junk[0] = []byte{3, 4, 6}[r.IntN(3)]
		}
		ps := k.Packets()
		at := 1 + r.IntN(len(ps))
		return NewKey(slices.Concat(ps[:at], []Packet{{Tag: tags[r.IntN(len(tags))], Body: junk}}, ps[at:])).Bytes()
	}},
	{"mpi-length-lie", func(r *rand.Rand, k, _ *Key) []byte {
		ps := clonePackets(k.Packets())
		idx := packetIndexes(ps, TagSignature)
		if len(idx) == 0 {
			return nil
		}
		p := &ps[idx[r.IntN(len(idx))]]
		off := sigValueOffset(p.Body)
		if off < 0 || off+2 > len(p.Body) {
			return nil
		}
		lies := []uint16{48410, 0xffff, 0, binary.BigEndian.Uint16(p.Body[off:]) + uint16(1+r.IntN(64)),
			binary.BigEndian.Uint16(p.Body[off:]) - uint16(1+r.IntN(64))}
		binary.BigEndian.PutUint16(p.Body[off:], lies[r.IntN(len(lies))])
		return NewKey(ps).Bytes()
	}},
	{"subpacket-length-lie", func(r *rand.Rand, k, _ *Key) []byte {
		ps := clonePackets(k.Packets())
		idx := packetIndexes(ps, TagSignature)
		if len(idx) == 0 {
			return nil
		}
		p := &ps[idx[r.IntN(len(idx))]]
		b := p.Body
		if len(b) < 8 || b[0] != 4 {
			return nil
		}
		hashed := int(binary.BigEndian.Uint16(b[4:]))
		switch {
		case r.IntN(3) == 0: // the hashed area's length
			binary.BigEndian.PutUint16(b[4:], uint16(hashed+r.IntN(9)-4))
		case hashed > 0: // the first hashed subpacket's length
			b[6] = byte(r.UintN(256))
		default:
			return nil
		}
		return NewKey(ps).Bytes()
	}},
	{"grafted-lie", func(r *rand.Rand, k, other *Key) []byte {
		// A certification from another key, with its MPI claiming far more
		// than it carries: the attack of issue 17, on a random user ID.
		src := packetIndexes(other.Packets(), TagSignature)
		dst := packetIndexes(k.Packets(), TagUserID)
		if len(src) == 0 || len(dst) == 0 {
			return nil
		}
		sig := bytes.Clone(other.Packets()[src[r.IntN(len(src))]].Body)
		off := sigValueOffset(sig)
		if off < 0 || off+2 > len(sig) {
			return nil
		}
		binary.BigEndian.PutUint16(sig[off:], 48410)
		ps := k.Packets()
		at := dst[r.IntN(len(dst))] + 1
		return NewKey(slices.Concat(ps[:at], []Packet{{Tag: TagSignature, Body: sig}}, ps[at:])).Bytes()
	}},
}

func clonePackets(ps []Packet) []Packet {
	out := make([]Packet, len(ps))
	for i, p := range ps {
		out[i] = Packet{Tag: p.Tag, Body: bytes.Clone(p.Body)}
	}
	return out
}

func packetIndexes(ps []Packet, tag Tag) []int {
	var idx []int
	for i, p := range ps {
		if p.Tag == tag {
			idx = append(idx, i)
		}
	}
	return idx
}

// sigValueOffset returns where a v3 or v4 signature's first MPI starts, or
// -1.
func sigValueOffset(b []byte) int {
	switch {
	case len(b) >= 19 && b[0] == 3:
		return 19
	case len(b) >= 6 && b[0] == 4:
		off := 4 + 2 + int(binary.BigEndian.Uint16(b[4:]))
		if off+2 > len(b) {
			return -1
		}
		return off + 2 + int(binary.BigEndian.Uint16(b[off:])) + 2
	}
	return -1
}

// served is one key Kith would serve, and where it came from.
type served struct {
	from string
	key  *Key
}

// mutationRun puts every key through every mutation, then Policy.Apply and
// Policy.Merge with the stored (clean) copy, and returns what Kith would
// serve, with Apply's drops and rejections counted.
func mutationRun(t *testing.T, keys []*Key, perKey int, seed uint64) (out []served, drops Report, rejected map[string]int, uploads int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 17))
	rejected = map[string]int{}
	for i, stored := range keys {
		other := keys[(i+1)%len(keys)]
		for j := 0; j < perKey; j++ {
			m := mutations[(i*perKey+j)%len(mutations)]
			b := m.apply(r, stored, other)
			if b == nil {
				continue
			}
			uploads++
			from := m.name + " of " + strings.ToUpper(hex.EncodeToString(stored.Fingerprint()))
			ups, _ := ReadKeys(bytes.NewReader(b))
			if len(ups) == 0 {
				rejected["unreadable upload"]++
			}
			for _, up := range ups {
				if a, rep, err := (Policy{}).Apply(up); err != nil {
					rejected[rejectionKind(err)]++
				} else {
					drops.Add(rep)
					out = append(out, served{"Apply: " + from, a})
				}
				// The upload merged into the stored copy, and a store that
				// somehow holds the upload merged with a clean one.
				if m, _, err := (Policy{}).Merge(stored, up); err == nil {
					out = append(out, served{"Merge: " + from, m})
				}
				if m, _, err := (Policy{}).Merge(up, stored); err == nil {
					out = append(out, served{"Merge (poisoned store): " + from, m})
				}
			}
		}
	}
	return out, drops, rejected, uploads
}

// rejectionKind names the sentinel a rejection wraps.
func rejectionKind(err error) string {
	for _, e := range []error{ErrNoSelfSignature, ErrUnsupportedKey, ErrMalformedKey, ErrKeyTooLarge, ErrPacketTooLarge, ErrNotPublicKey} {
		if strings.Contains(err.Error(), e.Error()) {
			return e.Error()
		}
	}
	return "other"
}

// gpgUnreadable returns the indexes of the keys gpg cannot read: where gpg
// --show-keys fails or lists other fingerprints. It asks gpg about all keys
// at once and bisects only where that fails.
func gpgUnreadable(t *testing.T, gpg string, keys []*Key) []int {
	t.Helper()
	var bad []int
	var check func(lo, hi int)
	check = func(lo, hi int) {
		var data bytes.Buffer
		var want []string
		for _, k := range keys[lo:hi] {
			data.Write(k.Bytes())
			want = append(want, strings.ToUpper(hex.EncodeToString(k.Fingerprint())))
		}
		fprs, _, err := gpgShow(t, gpg, data.Bytes())
		if err == nil && slices.Equal(fprs, want) {
			return
		}
		if hi-lo == 1 {
			bad = append(bad, lo)
			return
		}
		mid := (lo + hi) / 2
		check(lo, mid)
		check(mid, hi)
	}
	if len(keys) > 0 {
		check(0, len(keys))
	}
	return bad
}

// gpgImportAll imports the concatenation of keys into a fresh GNUPGHOME and
// checks that gpg succeeds and then lists every distinct fingerprint.
func gpgImportAll(t *testing.T, gpg string, keys []*Key) {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "all.pgp")
	var data bytes.Buffer
	want := map[string]bool{}
	for _, k := range keys {
		data.Write(k.Bytes())
		want[strings.ToUpper(hex.EncodeToString(k.Fingerprint()))] = true
	}
	if err := os.WriteFile(file, data.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	gpgArgs := []string{"--homedir", home, "--batch", "--no-auto-check-trustdb"}
	if out, err := exec.Command(gpg, append(gpgArgs, "--import", file)...).CombinedOutput(); err != nil {
		t.Fatalf("gpg --import of all %d served keys: %v\n%s", len(keys), err, out)
	}
	list, err := exec.Command(gpg, append(gpgArgs, "--with-colons", "--list-keys")...).Output()
	if err != nil {
		t.Fatalf("gpg --list-keys: %v", err)
	}
	got := map[string]bool{}
	lines := strings.Split(string(list), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pub:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "fpr:") {
			got[strings.Split(lines[i+1], ":")[9]] = true
		}
	}
	for fpr := range want {
		if !got[fpr] {
			t.Errorf("gpg --import of all served keys: %s missing", fpr)
		}
	}
	t.Logf("gpg imported the concatenation of all %d served keys: %d distinct keys", len(keys), len(got))
}

// sqFingerprints returns the primary fingerprints `sq inspect` lists for
// data, and whether sq succeeded.
func sqFingerprints(t *testing.T, sq string, data []byte) ([]string, string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "keys.pgp")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sq, "inspect", file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var fprs []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(l), "Fingerprint: "); ok {
			fprs = append(fprs, f)
		}
	}
	return fprs, errb.String(), err
}

// mutationKeys is how many Debian keys the mutation test uses:
// KITH_MUTATION_KEYS, or 150.
func mutationKeys(t *testing.T) int {
	if s := os.Getenv("KITH_MUTATION_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("KITH_MUTATION_KEYS=%q: want a number of keys, at least 2", s)
		}
		return n
	}
	if testing.Short() {
		return 20
	}
	return 150
}

// TestMutatedDebianKeysStayReadableByGPG: 150 Debian keys, 6 mutations
// each, through Apply and Merge; every key Kith would serve is read by gpg
// (and sq) with its fingerprint, and so is their concatenation.
func TestMutatedDebianKeysStayReadableByGPG(t *testing.T) {
	gpg := testkit.Tool(t, "gpg")
	all := debianSample(t, mutationKeys(t))
	out, drops, rejected, uploads := mutationRun(t, all, 6, 1)
	t.Logf("%d keys, %d mutated uploads: %d keys Kith would serve", len(all), uploads, len(out))
	t.Logf("packets Apply dropped: %v", drops)
	for _, r := range DropReasons() {
		if n := drops.Count(r); n > 0 {
			t.Logf("  %-24s %d", r, n)
		}
	}
	for kind, n := range rejected {
		t.Logf("  rejected, %s: %d", kind, n)
	}
	if drops.Count(DropMalformedSignature) == 0 || len(out) == 0 {
		t.Fatalf("the mutations exercised nothing: %d served, report %v", len(out), drops)
	}
	// Many outputs are the same key (a merge that changed nothing): gpg
	// sees each distinct one once.
	var keys []*Key
	var from []string
	seen := map[[16]byte]bool{}
	for _, s := range out {
		if err := CheckKey(s.key); err != nil {
			t.Errorf("%s: CheckKey: %v", s.from, err)
		}
		if !seen[s.key.Digest()] {
			seen[s.key.Digest()] = true
			keys, from = append(keys, s.key), append(from, s.from)
		}
	}
	bad := gpgUnreadable(t, gpg, keys)
	for _, i := range bad {
		_, stderr, _ := gpgShow(t, gpg, keys[i].Bytes())
		t.Errorf("gpg cannot read %s:\n%s", from[i], stderr)
	}
	t.Logf("gpg reads %d of %d distinct served keys", len(keys)-len(bad), len(keys))
	gpgImportAll(t, gpg, keys)

	if sq, err := exec.LookPath("sq"); err == nil {
		var data bytes.Buffer
		var want []string
		for _, k := range keys {
			data.Write(k.Bytes())
			want = append(want, strings.ToUpper(hex.EncodeToString(k.Fingerprint())))
		}
		fprs, stderr, err := sqFingerprints(t, sq, data.Bytes())
		if err != nil || !slices.Equal(fprs, want) {
			t.Errorf("sq inspect: %d of %d fingerprints, err %v:\n%s", len(fprs), len(want), err, stderr)
		}
	}
}

// FuzzPolicyGPG: whatever the input, a key the policy keeps (alone, or
// merged into the stored Debian key with its fingerprint) passes CheckKey
// and gpg reads it with its fingerprint. The seeds are Debian keys and
// mutations of them.
func FuzzPolicyGPG(f *testing.F) {
	raw, err := os.ReadFile(testkit.DebianKeyring)
	if err != nil {
		f.Skipf("%s missing: %v", testkit.DebianKeyring, err)
	}
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		f.Skip("gpg missing")
	}
	stored := map[string]*Key{}
	r := NewReader(bytes.NewReader(raw))
	var seeds []*Key
	for len(seeds) < 8 {
		k, err := r.Next()
		if err != nil {
			break
		}
		if a, _, err := (Policy{}).Apply(k); err == nil {
			seeds = append(seeds, a)
		}
	}
	rng := rand.New(rand.NewPCG(2, 17))
	for i, k := range seeds {
		stored[string(k.Fingerprint())] = k
		f.Add(k.Bytes())
		m := mutations[i%len(mutations)]
		if b := m.apply(rng, k, seeds[(i+1)%len(seeds)]); b != nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ups, _ := ReadKeys(bytes.NewReader(data))
		var keep []*Key
		for _, up := range ups {
			if a, _, err := (Policy{}).Apply(up); err == nil {
				keep = append(keep, a)
			}
			if st := stored[string(up.Fingerprint())]; st != nil {
				if m, _, err := (Policy{}).Merge(st, up); err == nil {
					keep = append(keep, m)
				}
			}
		}
		for _, k := range keep {
			if k.Describe().Version != 4 {
				continue // gpg 2.2 reads no v6 key; CheckKey says so
			}
			if err := CheckKey(k); err != nil {
				t.Errorf("policy output fails CheckKey: %v", err)
			}
			want := strings.ToUpper(hex.EncodeToString(k.Fingerprint()))
			if fprs, stderr, err := gpgShow(t, gpg, k.Bytes()); err != nil || !slices.Equal(fprs, []string{want}) {
				t.Errorf("gpg cannot read policy output %s: %v\n%s", want, err, stderr)
			}
		}
	})
}
