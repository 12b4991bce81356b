package pgp

import (
	"bytes"
	"crypto"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// certify returns the body of a generic certification by signer of uid on
// target's primary key, made at at.
func certify(t testing.TB, signer *openpgp.Entity, target *packet.PublicKey, uid string, at time.Time) []byte {
	t.Helper()
	sig := &packet.Signature{
		Version: 4, SigType: packet.SigTypeGenericCert, PubKeyAlgo: signer.PrivateKey.PubKeyAlgo,
		Hash: crypto.SHA256, CreationTime: at,
		IssuerKeyId: &signer.PrimaryKey.KeyId, IssuerFingerprint: signer.PrimaryKey.Fingerprint,
	}
	if err := sig.SignUserId(uid, target, signer.PrivateKey, sigConfig(at)); err != nil {
		t.Fatal(err)
	}
	return serializeBody(t, sig)
}

// insertAfter returns ps with extra inserted after the first packet
// matching pred (or appended when none does).
func insertAfter(ps []Packet, pred func(Packet) bool, extra ...Packet) []Packet {
	for i, p := range ps {
		if pred(p) {
			return slices.Concat(ps[:i+1], extra, ps[i+1:])
		}
	}
	return slices.Concat(ps, extra)
}

func isTag(tag Tag) func(Packet) bool { return func(p Packet) bool { return p.Tag == tag } }

func TestPolicyAttacks(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	mallory := genEntity(t, "Mallory", "mallory@example.org", 2)
	base := mustParse(t, entityBytes(t, alice)).Packets()
	grafted := Packet{Tag: TagUserID, Body: []byte("Mallory <mallory@example.org>")}

	// The self-signature of Alice's user ID, forged by flipping one byte of
	// its signature value.
	selfSigIdx := slices.IndexFunc(base, isTag(TagSignature))
	forged := slices.Clone(base)
	fb := bytes.Clone(forged[selfSigIdx].Body)
	fb[len(fb)-3] ^= 0x40
	forged[selfSigIdx].Body = fb

	// Alice's user ID carrying Mallory's certification only.
	malloryCert := certify(t, mallory, alice.PrimaryKey, string(grafted.Body), testTime.Add(time.Hour))

	// Mallory's subkey with Mallory's binding, transplanted into Alice's key.
	mp := mustParse(t, entityBytes(t, mallory)).Packets()
	msub := slices.IndexFunc(mp, isTag(TagPublicSubkey))

	// Alice's self-signature copied onto a grafted user ID (SKS keeps this).
	copied := Packet{Tag: TagSignature, Body: base[selfSigIdx].Body}

	tests := []struct {
		name    string
		packets []Packet
		wantErr error
		want    map[DropReason]int
		uids    []string
		subkeys int
	}{
		{
			name:    "grafted unsigned user ID is dropped",
			packets: slices.Concat(base, []Packet{grafted}),
			want:    map[DropReason]int{DropUnboundUserID: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "user ID certified only by another key is dropped",
			packets: slices.Concat(base, []Packet{grafted, {Tag: TagSignature, Body: malloryCert}}),
			want:    map[DropReason]int{DropUnboundUserID: 1, DropOrphanSignature: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "self-signature copied from another user ID is dropped",
			packets: slices.Concat(base, []Packet{grafted, copied}),
			want:    map[DropReason]int{DropBadSelfSignature: 1, DropUnboundUserID: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "forged self-signature rejects a key with no other",
			packets: forged,
			wantErr: ErrNoSelfSignature,
		},
		{
			name:    "subkey bound by another key is dropped",
			packets: slices.Concat(base, mp[msub:msub+2]),
			want:    map[DropReason]int{DropMisplacedSignature: 1, DropUnboundSubkey: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "subkey without any binding is dropped",
			packets: slices.Concat(base, mp[msub:msub+1]),
			want:    map[DropReason]int{DropUnboundSubkey: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "trust packets, secret subkeys and stray packets are dropped",
			packets: slices.Concat(base[:1], []Packet{{Tag: TagTrust, Body: []byte{0, 1}}, {Tag: TagMarker, Body: []byte("PGP")}}, base[1:], []Packet{{Tag: TagSecretSubkey, Body: []byte{4, 1, 2, 3, 4, 22}}, {Tag: TagSignature, Body: malloryCert}}),
			want:    map[DropReason]int{DropTrustPacket: 1, DropMisplacedPacket: 1, DropSecretKey: 1, DropOrphanSignature: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "certification before any user ID is misplaced",
			packets: slices.Concat(base[:1], []Packet{{Tag: TagSignature, Body: malloryCert}}, base[1:]),
			want:    map[DropReason]int{DropMisplacedSignature: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "exact duplicates collapse",
			packets: slices.Concat(base, base[1:]),
			want:    map[DropReason]int{DropDuplicate: len(base) - 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "malformed signature is dropped",
			packets: slices.Concat(base, []Packet{{Tag: TagSignature, Body: []byte{4, 0x10, 22}}}),
			want:    map[DropReason]int{DropMalformedSignature: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "user ID over the packet limit is dropped",
			packets: slices.Concat(base, []Packet{{Tag: TagUserID, Body: bytes.Repeat([]byte("x"), DefaultMaxPacketSize+1)}}),
			want:    map[DropReason]int{DropPacketTooLarge: 1},
			uids:    []string{"Alice <alice@example.org>"}, subkeys: 1,
		},
		{
			name:    "key with no user IDs and no direct signature is rejected",
			packets: base[:1],
			wantErr: ErrNoSelfSignature,
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
			if got := userIDs(out); !slices.Equal(got, tc.uids) {
				t.Errorf("user IDs = %q, want %q", got, tc.uids)
			}
			if got := len(out.Describe().Subkeys); got != tc.subkeys {
				t.Errorf("%d subkeys, want %d", got, tc.subkeys)
			}
			again, rep2, err := Policy{}.Apply(out)
			if err != nil || !bytes.Equal(again.Bytes(), out.Bytes()) || rep2.Total() != 0 {
				t.Errorf("policy output is not a fixed point: err %v, report %v", err, rep2)
			}
		})
	}
}

func TestPolicyCapsCertificationFloodKeepingNewest(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	uid := "Alice <alice@example.org>"
	base := mustParse(t, entityBytes(t, alice)).Packets()
	signers := []*openpgp.Entity{genEntity(t, "S1", "s1@example.org", 11), genEntity(t, "S2", "s2@example.org", 12)}
	const n = 10000
	var flood []Packet
	for i := 0; i < n; i++ {
		at := testTime.Add(time.Duration(i) * time.Minute)
		flood = append(flood, Packet{Tag: TagSignature, Body: certify(t, signers[i%2], alice.PrimaryKey, uid, at)})
	}
	// Shuffle deterministically so order of arrival does not matter.
	for i := range flood {
		j := (i * 7919) % n
		flood[i], flood[j] = flood[j], flood[i]
	}
	ps := insertAfter(base, isTag(TagUserID), flood...)
	out, rep, err := Policy{}.Apply(NewKey(ps))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Count(DropCertificationFlood); got != n-DefaultMaxCertifications {
		t.Errorf("dropped %d certifications, want %d", got, n-DefaultMaxCertifications)
	}
	oldestKept := testTime.Add(time.Duration(n-DefaultMaxCertifications) * time.Minute).Unix()
	third := 0
	for _, p := range out.Packets() {
		if p.Tag != TagSignature {
			continue
		}
		info, _ := parseSigInfo(p.Body)
		if info.claimsIssuer(&keyMaterial{fpr: alice.PrimaryKey.Fingerprint, keyID: alice.PrimaryKey.KeyId}) {
			continue
		}
		third++
		if info.created < oldestKept {
			t.Fatalf("kept a certification from %v, older than the newest %d", time.Unix(info.created, 0), DefaultMaxCertifications)
		}
	}
	if third != DefaultMaxCertifications {
		t.Errorf("kept %d third-party certifications, want %d", third, DefaultMaxCertifications)
	}
}

func TestPolicyShedsCertificationsToFitKeySize(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	uid := "Alice <alice@example.org>"
	base := mustParse(t, entityBytes(t, alice)).Packets()
	signer := genEntity(t, "S1", "s1@example.org", 11)
	var certs []Packet
	for i := 0; i < 50; i++ {
		certs = append(certs, Packet{Tag: TagSignature, Body: certify(t, signer, alice.PrimaryKey, uid, testTime.Add(time.Duration(i)*time.Hour))})
	}
	full, _ := mustApply(t, NewKey(insertAfter(base, isTag(TagUserID), certs...)))
	p := Policy{MaxKeySize: full.Size() - 500}
	out, rep, err := p.Apply(full)
	if err != nil {
		t.Fatal(err)
	}
	if out.Size() > p.MaxKeySize || rep.Count(DropKeySizeLimit) == 0 {
		t.Errorf("size %d (limit %d), report %v", out.Size(), p.MaxKeySize, rep)
	}
	if _, _, err := (Policy{MaxKeySize: 200}).Apply(full); !errors.Is(err, ErrKeyTooLarge) {
		t.Errorf("tiny limit: err = %v, want ErrKeyTooLarge", err)
	}
}

func TestPolicyKeepsRevokedKeyAndRevocations(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	if err := alice.RevokeKey(packet.KeyCompromised, "lost", sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := alice.RevokeSubkey(&alice.Subkeys[0], packet.KeySuperseded, "", sigConfig(testTime.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	out, rep := mustApply(t, mustParse(t, entityBytes(t, alice)))
	d := out.Describe()
	if !d.Revoked || !d.Subkeys[0].Revoked || rep.Total() != 0 {
		t.Errorf("revoked=%v subkey revoked=%v report %v", d.Revoked, d.Subkeys[0].Revoked, rep)
	}
}

func TestPolicyChecksBackSignatures(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	if err := alice.AddSigningSubkey(sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	good, _ := mustApply(t, mustParse(t, entityBytes(t, alice)))
	if n := len(good.Describe().Subkeys); n != 2 {
		t.Fatalf("%d subkeys, want 2", n)
	}
	// Strip the embedded back-signature: re-sign the binding without it.
	sk := alice.Subkeys[1]
	sk.Sig.EmbeddedSignature = nil
	if err := sk.Sig.SignKey(sk.PublicKey, alice.PrivateKey, sigConfig(testTime.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	alice.Subkeys[1] = sk
	k := mustParse(t, entityBytes(t, alice))
	out, rep := mustApply(t, k)
	if n := len(out.Describe().Subkeys); n != 1 || rep.Count(DropBadSelfSignature) != 1 || rep.Count(DropUnboundSubkey) != 1 {
		t.Errorf("%d subkeys, report %v; want the signing subkey without back-signature dropped", n, rep)
	}
	lax, _, err := Policy{AllowMissingBackSignatures: true}.Apply(k)
	if err != nil || len(lax.Describe().Subkeys) != 2 {
		t.Errorf("AllowMissingBackSignatures: err %v", err)
	}
}

// Attack: certifications dated decades ahead outrank every genuine one
// under "keep the newest". Signatures dated more than a day ahead of the
// policy's clock are dropped instead.
func TestPolicyDropsSignaturesDatedInTheFuture(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	mallory := genEntity(t, "Mallory", "mallory@example.org", 2)
	uid := "Alice <alice@example.org>"
	now := testTime.Add(365 * 24 * time.Hour)
	p := Policy{Now: func() time.Time { return now }}
	base := mustParse(t, entityBytes(t, alice)).Packets()
	soon := Packet{Tag: TagSignature, Body: certify(t, mallory, alice.PrimaryKey, uid, now.Add(time.Hour))}
	far := Packet{Tag: TagSignature, Body: certify(t, mallory, alice.PrimaryKey, uid, now.Add(70*365*24*time.Hour))}
	out, rep, err := p.Apply(NewKey(insertAfter(base, isTag(TagUserID), soon, far)))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Count(DropFutureSignature); got != 1 {
		t.Errorf("dropped %d future signatures, want 1 (report %v)", got, rep)
	}
	var kept [][]byte
	for _, q := range out.Packets() {
		kept = append(kept, q.Body)
	}
	if !slices.ContainsFunc(kept, func(b []byte) bool { return bytes.Equal(b, soon.Body) }) {
		t.Error("a certification an hour ahead (clock skew) was dropped")
	}
	if slices.ContainsFunc(kept, func(b []byte) bool { return bytes.Equal(b, far.Body) }) {
		t.Error("a certification dated 70 years ahead was kept")
	}
}

// Attack: a flood of certifications that verify against no known key,
// newer than a genuine one, pushes the genuine one out of the per-user-ID
// cap. With Issuers set, certifications that verify are kept first;
// certifications that only name a known issuer (forged) rank as unverified.
func TestPolicyFloodCannotDisplaceVerifiedCertifications(t *testing.T) {
	alice := genEntity(t, "Alice", "alice@example.org", 1)
	bob := genEntity(t, "Bob", "bob@example.org", 3)
	uid := "Alice <alice@example.org>"
	base := mustParse(t, entityBytes(t, alice)).Packets()
	genuine := Packet{Tag: TagSignature, Body: certify(t, bob, alice.PrimaryKey, uid, testTime)}

	floodSigners := []*openpgp.Entity{genEntity(t, "M1", "m1@example.org", 21), genEntity(t, "M2", "m2@example.org", 22)}
	var flood []Packet
	for i := 0; i < DefaultMaxCertifications+20; i++ {
		body := certify(t, floodSigners[i%2], alice.PrimaryKey, uid, testTime.Add(time.Duration(i+1)*time.Hour))
		if i%5 == 0 {
			// Forged: names Bob as issuer but is signed by someone else.
			body = forgeIssuer(t, floodSigners[i%2], bob, alice.PrimaryKey, uid, testTime.Add(time.Duration(i+1)*time.Hour))
		}
		flood = append(flood, Packet{Tag: TagSignature, Body: body})
	}
	key := NewKey(insertAfter(base, isTag(TagUserID), append([]Packet{genuine}, flood...)...))
	holds := func(k *Key) bool {
		return slices.ContainsFunc(k.Packets(), func(q Packet) bool { return bytes.Equal(q.Body, genuine.Body) })
	}

	// Without an issuer lookup the attack works: the genuine one is oldest.
	out, _, err := Policy{}.Apply(key)
	if err != nil {
		t.Fatal(err)
	}
	if holds(out) {
		t.Fatal("test premise: without Issuers the oldest certification should be displaced")
	}

	bobBody := bob.PrimaryKey
	var bobPacket bytes.Buffer
	if err := bobBody.Serialize(&bobPacket); err != nil {
		t.Fatal(err)
	}
	bobKey := mustParse(t, bobPacket.Bytes())
	issuers := func(id uint64) [][]byte {
		if id == bob.PrimaryKey.KeyId {
			return [][]byte{bobKey.Packets()[0].Body}
		}
		return nil
	}
	p := Policy{Issuers: issuers}
	out, rep, err := p.Apply(key)
	if err != nil {
		t.Fatal(err)
	}
	if !holds(out) {
		t.Errorf("the verified certification was displaced by the flood (report %v)", rep)
	}
	if got := rep.Count(DropCertificationFlood); got != len(flood)+1-DefaultMaxCertifications {
		t.Errorf("dropped %d, want %d", got, len(flood)+1-DefaultMaxCertifications)
	}

	// The whole-key size limit sheds unverified certifications first too.
	small := Policy{Issuers: issuers, MaxKeySize: out.Size() / 2}
	out, rep, err = small.Apply(out)
	if err != nil {
		t.Fatal(err)
	}
	if !holds(out) || rep.Count(DropKeySizeLimit) == 0 {
		t.Errorf("size shedding: genuine kept %v, report %v", holds(out), rep)
	}
}

// forgeIssuer makes a certification signed by signer that claims to be by
// claimed (its issuer subpackets name claimed's key).
func forgeIssuer(t testing.TB, signer, claimed *openpgp.Entity, target *packet.PublicKey, uid string, at time.Time) []byte {
	t.Helper()
	sig := &packet.Signature{
		Version: 4, SigType: packet.SigTypeGenericCert, PubKeyAlgo: signer.PrivateKey.PubKeyAlgo,
		Hash: crypto.SHA256, CreationTime: at,
		IssuerKeyId: &claimed.PrimaryKey.KeyId, IssuerFingerprint: claimed.PrimaryKey.Fingerprint,
	}
	if err := sig.SignUserId(uid, target, signer.PrivateKey, sigConfig(at)); err != nil {
		t.Fatal(err)
	}
	return serializeBody(t, sig)
}
