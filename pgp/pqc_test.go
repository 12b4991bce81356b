package pgp

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/pgp/keygen"
)

// updatePQC regenerates testdata/pqc from pgp/keygen. SLH-DSA signing
// takes seconds a signature, so the keys are made once and kept.
var updatePQC = flag.Bool("update-pqc", false, "regenerate testdata/pqc with pgp/keygen")

// pqcFixtures are the version 6 and post-quantum keys of testdata/pqc.
var pqcFixtures = []struct {
	file string
	kind keygen.Kind
	algo packet.PublicKeyAlgorithm // the primary key's
	sub  []packet.PublicKeyAlgorithm
}{
	{"v6-mldsa65.pgp", keygen.V6MLDSA65, packet.PubKeyAlgoMldsa65Ed25519, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMlkem768X25519}},
	{"v6-mldsa87.pgp", keygen.V6MLDSA87, packet.PubKeyAlgoMldsa87Ed448, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMlkem1024X448}},
	{"v6-slhdsa128s.pgp", keygen.V6SLHDSA128s, packet.PubKeyAlgoSlhdsaShake128s, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMlkem768X25519}},
	{"v6-slhdsa128f.pgp", keygen.V6SLHDSA128f, packet.PubKeyAlgoSlhdsaShake128f, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMlkem768X25519}},
	{"v6-slhdsa256s.pgp", keygen.V6SLHDSA256s, packet.PubKeyAlgoSlhdsaShake256s, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoMlkem1024X448, packet.PubKeyAlgoSlhdsaShake256s}},
	{"v6-ed25519.pgp", keygen.V6Ed25519, packet.PubKeyAlgoEd25519, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoX25519}},
	{"v4-mlkem-subkey.pgp", keygen.V4MLKEMSubkey, packet.PubKeyAlgoEdDSA, []packet.PublicKeyAlgorithm{packet.PubKeyAlgoECDH, packet.PubKeyAlgoMlkem768X25519}},
}

// pqcTime is the fixtures' creation time.
var pqcTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pqcKey returns the binary key of a testdata/pqc fixture.
func pqcKey(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pqc", file))
	if err != nil {
		t.Fatalf("%v (regenerate with go test ./pgp -run TestPQCFixtures -update-pqc)", err)
	}
	return b
}

func TestPQCFixtures(t *testing.T) {
	if *updatePQC {
		if err := os.MkdirAll(filepath.Join("testdata", "pqc"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i, f := range pqcFixtures {
			b, err := keygen.PublicKey(f.kind, "Test "+f.kind.String(), "pqc"+string(rune('a'+i))+"@example.org", pqcTime, int64(100+i))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("testdata", "pqc", f.file), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range pqcFixtures {
		el, err := openpgp.ReadKeyRing(bytes.NewReader(pqcKey(t, f.file)))
		if err != nil || len(el) != 1 {
			t.Fatalf("%s: go-crypto reads %d keys: %v", f.file, len(el), err)
		}
		e := el[0]
		var subs []packet.PublicKeyAlgorithm
		for _, s := range e.Subkeys {
			subs = append(subs, s.PublicKey.PubKeyAlgo)
		}
		if e.PrimaryKey.PubKeyAlgo != f.algo || !slices.Equal(subs, f.sub) {
			t.Errorf("%s: algorithms %d %v, want %d %v", f.file, e.PrimaryKey.PubKeyAlgo, subs, f.algo, f.sub)
		}
	}
}

func TestPolicyKeepsPQCKeys(t *testing.T) {
	for _, f := range pqcFixtures {
		t.Run(f.file, func(t *testing.T) {
			in := mustParse(t, pqcKey(t, f.file))
			out, rep := mustApply(t, in)
			if rep.Total() != 0 || len(out.Packets()) != len(in.Packets()) {
				t.Fatalf("policy kept %d of %d packets: %v", len(out.Packets()), len(in.Packets()), rep)
			}
			d := out.Describe()
			wantVersion, wantFpr := 6, 32
			if f.kind == keygen.V4MLKEMSubkey {
				wantVersion, wantFpr = 4, 20
			}
			if d.Version != wantVersion || len(d.Fingerprint) != wantFpr || d.Algorithm != f.algo {
				t.Errorf("described as v%d, %d-byte fingerprint, algorithm %d", d.Version, len(d.Fingerprint), d.Algorithm)
			}
			if !d.Capabilities.Certify || !d.Capabilities.Sign {
				t.Errorf("primary key capabilities %+v", d.Capabilities)
			}
			var subs []packet.PublicKeyAlgorithm
			for _, s := range d.Subkeys {
				subs = append(subs, s.Algorithm)
			}
			slices.Sort(subs)
			want := slices.Sorted(slices.Values(f.sub))
			if !slices.Equal(subs, want) {
				t.Errorf("subkeys %v, want %v", subs, want)
			}
			for _, s := range d.Subkeys {
				if s.Algorithm == packet.PubKeyAlgoMlkem768X25519 || s.Algorithm == packet.PubKeyAlgoMlkem1024X448 {
					if !s.Capabilities.Encrypt || s.Capabilities.Sign {
						t.Errorf("ML-KEM subkey capabilities %+v", s.Capabilities)
					}
				}
			}
			again, rep2, err := Policy{}.Apply(out)
			if err != nil || !bytes.Equal(again.Bytes(), out.Bytes()) || rep2.Total() != 0 {
				t.Errorf("policy output is not a fixed point: err %v, report %v", err, rep2)
			}
			if err := CheckPacket(out.Packets()[0]); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestPolicyKeepsLargestPQCSignature: the binding of an SLH-DSA-SHAKE-256s
// signing subkey, two SLH-DSA signatures in one packet, is the largest
// signature any key makes, and fits MaxSignatureSize.
func TestPolicyKeepsLargestPQCSignature(t *testing.T) {
	k, _ := mustApply(t, mustParse(t, pqcKey(t, "v6-slhdsa256s.pgp")))
	largest := 0
	for _, p := range k.Packets() {
		if p.Tag == TagSignature {
			largest = max(largest, len(p.Body))
		}
	}
	if largest < 2*29792 || largest > DefaultMaxSignatureSize {
		t.Errorf("largest signature kept is %d bytes; want two SLH-DSA-SHAKE-256s values (%d) within %d", largest, 2*29792, DefaultMaxSignatureSize)
	}
	if !slices.ContainsFunc(k.Describe().Subkeys, func(s Subkey) bool { return s.Capabilities.Sign }) {
		t.Error("the SLH-DSA signing subkey (with its back-signature) was not kept")
	}
}

// withBody returns ps with packet i's body replaced.
func withBody(ps []Packet, i int, body []byte) []Packet {
	out := slices.Clone(ps)
	out[i].Body = body
	return out
}

// flipped returns b with the byte at i (counted from the end when
// negative) changed.
func flipped(b []byte, i int) []byte {
	b = bytes.Clone(b)
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0x5a
	return b
}

// v6KeyBody returns a v6 key packet body with its key material replaced,
// the material's length field kept true.
func v6KeyBody(body, material []byte) []byte {
	out := slices.Concat(body[:6], []byte{0, 0, 0, 0}, material)
	n := len(material)
	out[6], out[7], out[8], out[9] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return out
}

// asV4Key turns a v6 key packet body into a v4 one of the same algorithm
// and material.
func asV4Key(body []byte) []byte {
	return slices.Concat([]byte{4}, body[1:6], body[10:])
}

// withUnhashed appends an opaque unhashed subpacket of n data bytes (a
// private type) to a v6 signature.
func withUnhashed(sig []byte, n int) []byte {
	be := func(b []byte) int { return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3]) }
	hashed := be(sig[4:8])
	at := 8 + hashed
	unhashed := be(sig[at : at+4])
	sub := slices.Concat([]byte{255, 0, 0, 0, 0, 110}, bytes.Repeat([]byte{'x'}, n))
	l := n + 1
	sub[1], sub[2], sub[3], sub[4] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
	u := unhashed + len(sub)
	return slices.Concat(sig[:at], []byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)},
		sig[at+4:at+4+unhashed], sub, sig[at+4+unhashed:])
}

// indexOf returns the index of the n-th (from 0) packet with tag.
func indexOf(ps []Packet, tag Tag, n int) int {
	for i, p := range ps {
		if p.Tag == tag {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

func TestPolicyPQCAttacks(t *testing.T) {
	mldsa := mustParse(t, pqcKey(t, "v6-mldsa65.pgp")).Packets()
	mldsa87 := mustParse(t, pqcKey(t, "v6-mldsa87.pgp")).Packets()
	slh := mustParse(t, pqcKey(t, "v6-slhdsa128s.pgp")).Packets()
	big := mustParse(t, pqcKey(t, "v6-slhdsa256s.pgp")).Packets()
	v4 := mustParse(t, pqcKey(t, "v4-mlkem-subkey.pgp")).Packets()

	// In each fixture: the primary key, its direct-key signature, the
	// user ID and its self-signature, then subkeys with their bindings.
	direct, uidSig := 1, 3
	sub := indexOf(mldsa, TagPublicSubkey, 0)
	const mldsa65Sig = 64 + 3309 // Ed25519 then ML-DSA-65

	// The largest signature, the SLH-DSA signing subkey's binding, pushed
	// over MaxSignatureSize by an unhashed subpacket.
	bigBinding := indexOf(big, TagPublicSubkey, 1) + 1
	over := withUnhashed(big[bigBinding].Body, DefaultMaxSignatureSize-len(big[bigBinding].Body)+1)

	tests := []struct {
		name    string
		packets []Packet
		wantErr error
		want    map[DropReason]int
		uids    int
		subkeys int
	}{
		{
			name:    "forged ML-DSA half of a composite self-signature",
			packets: withBody(mldsa, uidSig, flipped(mldsa[uidSig].Body, -100)),
			want:    map[DropReason]int{DropBadSelfSignature: 1, DropUnboundUserID: 1},
			subkeys: 1,
		},
		{
			name:    "forged Ed25519 half of a composite self-signature",
			packets: withBody(mldsa, uidSig, flipped(mldsa[uidSig].Body, -mldsa65Sig+10)),
			want:    map[DropReason]int{DropBadSelfSignature: 1, DropUnboundUserID: 1},
			subkeys: 1,
		},
		{
			name:    "forged SLH-DSA direct-key signature",
			packets: withBody(slh, direct, flipped(slh[direct].Body, -1000)),
			want:    map[DropReason]int{DropBadSelfSignature: 1},
			uids:    1, subkeys: 1,
		},
		{
			name:    "forged ML-DSA-87 subkey binding",
			packets: withBody(mldsa87, sub+1, flipped(mldsa87[sub+1].Body, -7)),
			want:    map[DropReason]int{DropBadSelfSignature: 1, DropUnboundSubkey: 1},
			uids:    1,
		},
		{
			name:    "truncated ML-KEM subkey material",
			packets: withBody(mldsa, sub, v6KeyBody(mldsa[sub].Body, mldsa[sub].Body[10:len(mldsa[sub].Body)-1])),
			want:    map[DropReason]int{DropMalformedPacket: 1, DropOrphanSignature: 1},
			uids:    1,
		},
		{
			name:    "ML-KEM subkey material with a byte too many",
			packets: withBody(mldsa, sub, v6KeyBody(mldsa[sub].Body, append(bytes.Clone(mldsa[sub].Body[10:]), 0))),
			want:    map[DropReason]int{DropMalformedPacket: 1, DropOrphanSignature: 1},
			uids:    1,
		},
		{
			name:    "truncated ML-DSA signature value",
			packets: withBody(mldsa, uidSig, mldsa[uidSig].Body[:len(mldsa[uidSig].Body)-1]),
			want:    map[DropReason]int{DropMalformedSignature: 1, DropUnboundUserID: 1},
			subkeys: 1,
		},
		{
			name:    "signature over MaxSignatureSize",
			packets: withBody(big, bigBinding, over),
			want:    map[DropReason]int{DropPacketTooLarge: 1, DropUnboundSubkey: 1},
			uids:    1, subkeys: 1,
		},
		{
			name:    "ML-DSA subkey on a v4 key",
			packets: slices.Concat(v4, []Packet{{Tag: TagPublicSubkey, Body: asV4Key(mldsa[0].Body)}, v4[len(v4)-1]}),
			want:    map[DropReason]int{DropUnknownAlgorithm: 1, DropOrphanSignature: 1},
			uids:    1, subkeys: 2,
		},
		{
			name:    "ML-KEM-1024 subkey on a v4 key",
			packets: slices.Concat(v4, []Packet{{Tag: TagPublicSubkey, Body: asV4Key(mldsa87[sub].Body)}, v4[len(v4)-1]}),
			want:    map[DropReason]int{DropUnknownAlgorithm: 1, DropOrphanSignature: 1},
			uids:    1, subkeys: 2,
		},
		{
			name:    "truncated ML-DSA primary key",
			packets: withBody(mldsa, 0, v6KeyBody(mldsa[0].Body, mldsa[0].Body[10:len(mldsa[0].Body)-1])),
			wantErr: ErrUnsupportedKey,
		},
		{
			name:    "ML-DSA primary key as a v4 key",
			packets: withBody(mldsa, 0, asV4Key(mldsa[0].Body)),
			wantErr: ErrUnsupportedKey,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, rep, err := Policy{}.Apply(NewKey(tc.packets))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range DropReasons() {
				if got := rep.Count(r); got != tc.want[r] {
					t.Errorf("%v: dropped %d, want %d (report: %v)", r, got, tc.want[r], rep)
				}
			}
			if got := len(userIDs(out)); got != tc.uids {
				t.Errorf("%d user IDs, want %d", got, tc.uids)
			}
			if got := len(out.Describe().Subkeys); got != tc.subkeys {
				t.Errorf("%d subkeys, want %d", got, tc.subkeys)
			}
		})
	}
}

// TestPolicyDropsV6CertificationOfV4Key: RFC 9580 lets a v6 key certify a
// v4 key, but gpg (2.2 here) refuses a whole import that holds a v6
// signature, so Kith does not keep one on a v3 or v4 key.
func TestPolicyDropsV6CertificationOfV4Key(t *testing.T) {
	v4, err := keygen.NewKey(keygen.V4MLKEMSubkey, "Vier", "vier@example.org", pqcTime, 1)
	if err != nil {
		t.Fatal(err)
	}
	v6, err := keygen.NewKey(keygen.V6MLDSA65, "Sechs", "sechs@example.org", pqcTime, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := keygen.Certify(v4, v6, pqcTime.Add(time.Hour), 3)
	if err != nil {
		t.Fatal(err)
	}
	out, rep := mustApply(t, mustParse(t, b))
	if rep.Count(DropUnreadableVersion) != 1 || rep.Total() != 1 {
		t.Errorf("report %v, want the v6 certification dropped alone", rep)
	}
	if err := CheckKey(out); err != nil {
		t.Errorf("what the policy kept is not a key gpg reads: %v", err)
	}
}

// TestPQCVerificationIsPaidFromTheBudget: a flood of forged SLH-DSA-128f
// self-signatures, the dearest checks of RFC 9980's algorithms, costs at
// most MaxBadSelfSignatures checks beyond the genuine ones, each priced.
func TestPQCVerificationIsPaidFromTheBudget(t *testing.T) {
	ps := mustParse(t, pqcKey(t, "v6-slhdsa128f.pgp")).Packets()
	uidSig := indexOf(ps, TagUserID, 0) + 1
	var flood []Packet
	for i := range 40 {
		flood = append(flood, Packet{Tag: TagSignature, Body: flipped(ps[uidSig].Body, -1-i)})
	}
	k := NewKey(slices.Concat(ps[:uidSig+1], flood, ps[uidSig+1:]))
	pub, err := parseKeyMaterial(ps[0].Body, false)
	if err != nil || pub.pub == nil {
		t.Fatal(err)
	}
	price := verifyWork(pub.pub)
	if price != 72*128 {
		t.Fatalf("an SLH-DSA-SHAKE-128f check is priced %d units", price)
	}
	out, rep, work, err := workOf(Policy{}, k)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(DropBadSelfSignature) != DefaultMaxBadSelfSignatures || rep.Count(DropVerificationBudget) != 40-DefaultMaxBadSelfSignatures {
		t.Errorf("report %v", rep)
	}
	genuine := int64(3) // direct-key, user ID and subkey binding
	if max := (genuine + DefaultMaxBadSelfSignatures) * price; work > max {
		t.Errorf("spent %d units, at most %d expected", work, max)
	}
	if len(userIDs(out)) != 1 {
		t.Error("the genuine user ID was lost under the flood")
	}
	// A budget too small for one check leaves the key unchecked, refused.
	if _, _, err := (Policy{MaxVerifyWork: int(price) - 1}).Apply(k); !errors.Is(err, ErrVerifyBudget) {
		t.Errorf("with less budget than one check: err = %v, want ErrVerifyBudget", err)
	}
}

func TestPQCAlgorithmNames(t *testing.T) {
	for _, tc := range []struct {
		algo      int
		name, gpg string
	}{
		{30, "ML-DSA-65+Ed25519", "mldsa65ed25519"},
		{34, "SLH-DSA-SHAKE-256s", "slhdsa256s"},
		{35, "ML-KEM-768+X25519", "mlkem768x25519"},
	} {
		if got := AlgorithmName(tc.algo, 0, ""); got != tc.name {
			t.Errorf("AlgorithmName(%d) = %q, want %q", tc.algo, got, tc.name)
		}
		if got := GPGAlgorithmName(tc.algo, 0, ""); got != tc.gpg {
			t.Errorf("GPGAlgorithmName(%d) = %q, want %q", tc.algo, got, tc.gpg)
		}
	}
}

// TestMergePQCKeys: parts of a post-quantum key merge back into the whole,
// in either order, and a v6 key's certification of another v6 key's user
// ID merges into the stored key.
func TestMergePQCKeys(t *testing.T) {
	var p Policy
	rng := rand.New(rand.NewPCG(35, 6))
	checked := 0
	for _, f := range pqcFixtures {
		full, _ := mustApply(t, mustParse(t, pqcKey(t, f.file)))
		for round := 0; round < 4; round++ {
			a, b := randomPart(rng, full), randomPart(rng, full)
			ab, _, errAB := p.Merge(a, b)
			ba, _, errBA := p.Merge(b, a)
			if (errAB == nil) != (errBA == nil) {
				t.Fatalf("%s: merge errors differ: %v / %v", f.file, errAB, errBA)
			}
			if errAB != nil {
				continue
			}
			checked++
			if !bytes.Equal(ab.Bytes(), ba.Bytes()) {
				t.Errorf("%s: Merge(a,b) != Merge(b,a)", f.file)
			}
			if whole, _, err := p.Merge(ab, full); err != nil || !bytes.Equal(whole.Bytes(), full.Bytes()) {
				t.Errorf("%s: merging the whole key back does not give it (err %v)", f.file, err)
			}
		}
	}

	if checked < len(pqcFixtures) {
		t.Errorf("only %d merges had a self-signature on both sides", checked)
	}

	holder, err := keygen.NewKey(keygen.V6MLDSA65, "Holder", "holder@example.org", pqcTime, 7)
	if err != nil {
		t.Fatal(err)
	}
	certifier, err := keygen.NewKey(keygen.V6MLDSA87, "Certifier", "certifier@example.org", pqcTime, 8)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := mustApply(t, mustParse(t, entityBytes(t, holder)))
	certified, err := keygen.Certify(holder, certifier, pqcTime.Add(time.Hour), 9)
	if err != nil {
		t.Fatal(err)
	}
	merged, rep, err := p.Merge(stored, mustParse(t, certified))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total() != rep.Count(DropDuplicate) || len(merged.Packets()) != len(stored.Packets())+1 {
		t.Errorf("merge kept %d packets of %d+1 (report %v)", len(merged.Packets()), len(stored.Packets()), rep)
	}
}
