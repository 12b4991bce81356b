// policy.go: the key policy. Every key that enters Kith passes through
// Policy.Apply (or Policy.Merge): it keeps only what is validly self-signed
// or is a bounded number of third-party certifications, and puts the kept
// packets in canonical order.

package pgp

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Errors a Policy rejects a whole key with (test with errors.Is).
var (
	// ErrNoSelfSignature: the key has no valid self-signature at all: no
	// user ID or attribute with a valid self-certification or
	// self-revocation, no valid direct-key signature and no valid key
	// revocation.
	ErrNoSelfSignature = errors.New("no valid self-signature")
	// ErrKeyTooLarge: the key exceeds the whole-key size limit even after
	// shedding third-party certifications (or, in a Reader, the input key
	// exceeds ReaderOptions.MaxKeySize).
	ErrKeyTooLarge = errors.New("key too large")
	// ErrUnsupportedKey: the primary key's version or algorithm is one Kith
	// cannot verify signatures with, so nothing about the key can be checked.
	ErrUnsupportedKey = errors.New("unsupported primary key")
	// ErrFingerprintMismatch: Merge was given two different keys.
	ErrFingerprintMismatch = errors.New("fingerprints differ")
)

// Policy is the set of rules and limits applied to every key. The zero value
// of any limit means its default (see DefaultPolicy), so Policy{} is the
// default policy.
type Policy struct {
	// MaxKeySize caps the canonical key (all kept packets with headers).
	// Above it, third-party certifications are shed oldest first; a key
	// still above it is rejected with ErrKeyTooLarge. Default 1 MiB, the
	// Hockeypuck limit.
	MaxKeySize int
	// MaxPacketSize caps a public-key, subkey or user-ID packet body.
	// Default 8 KiB (an RSA 16384 key is about 2 KiB, the largest
	// post-quantum key, ML-DSA-87+Ed448, 2,659 bytes; ML-KEM-1024+X448
	// 1,634).
	MaxPacketSize int
	// MaxSignatureSize caps a signature packet body. Default 64 KiB
	// (signatures with long notations exist; larger ones are abuse). The
	// largest signatures RFC 9980 makes fit it: an SLH-DSA-SHAKE-256s
	// signature is 29,792 bytes of value, and the binding of an
	// SLH-DSA-SHAKE-256s signing subkey, which embeds the subkey's own
	// back-signature, about 60,000 (TestPolicyKeepsLargestPQCSignature);
	// Hockeypuck, which raised its signature cap for them, caps at the
	// same 64 KiB.
	MaxSignatureSize int
	// MaxUserAttributeSize caps a user attribute (photo ID) body.
	// Default 64 KiB.
	MaxUserAttributeSize int
	// MaxUserIDs caps the user IDs kept per key (those with the newest
	// self-certifications are kept). Default 100.
	MaxUserIDs int
	// MaxUserAttributes caps the user attributes kept per key. Default 16.
	MaxUserAttributes int
	// MaxSubkeys caps the subkeys kept per key (newest bindings kept).
	// Default 100.
	MaxSubkeys int
	// MaxCertifications caps the third-party signatures kept per user ID,
	// user attribute, and on the primary key; the newest are kept.
	// Default 100 (the CVE-2019-13050 flooding defence).
	MaxCertifications int
	// AllowMissingBackSignatures keeps signing-capable subkeys whose binding
	// lacks a valid embedded primary-key binding signature. The default
	// (false) drops such bindings, as RFC 9580 requires.
	AllowMissingBackSignatures bool
	// AllowNoSelfSignature keeps a key with no user ID, no user attribute
	// and no direct self-signature instead of rejecting it
	// (ErrNoSelfSignature): what Key.WithoutUserIDs leaves of a key, whose
	// subkey bindings still verify. Such a key has no primary-key
	// capabilities, expiry or preferences, which only the user IDs' self-
	// signatures state.
	AllowNoSelfSignature bool
	// MaxVerifyWork caps the signature-verification work spent on one
	// key, in the units of budget.go (self-signatures, back-signatures,
	// and the certifications Issuers lets it rank); what is left
	// unchecked when it is spent is dropped (DropVerificationBudget).
	// Default DefaultMaxVerifyWork, some 90 ms of one core.
	MaxVerifyWork int
	// MaxBadSelfSignatures caps the self-signatures that may fail on one
	// component (checked a stored key's first, in Merge, then newest
	// first); the rest of the component's self-signatures are then
	// dropped unchecked (DropVerificationBudget). Default
	// DefaultMaxBadSelfSignatures.
	MaxBadSelfSignatures int
	// Budget, when not nil, is verification work that every key this
	// policy checks pays from as well, shared with whoever else holds it:
	// one upload request's keys (see VerifyBudget).
	Budget *VerifyBudget
	// Issuers finds the keys that may have made a third-party
	// certification. When a cap forces certifications out (MaxCertifications
	// or MaxKeySize), those that verify against a key it returns are kept
	// before any that do not, so a flood of unverifiable certifications
	// cannot displace a genuine one. Nil: certifications are ranked by date
	// alone. Those checks are paid from the key's verification budget
	// (MaxVerifyWork); a certification it cannot pay for ranks as
	// unverified.
	Issuers IssuerKeys
	// Now is the clock signatures' creation times are checked against
	// (signatures dated more than MaxClockSkew after it are dropped). Nil:
	// time.Now.
	Now func() time.Time

	// batch, set only in a keyGroup's policy, collects its keys' Ed25519
	// self-signature checks to make them together.
	batch *ed25519Batch
}

// IssuerKeys returns the public-key packet bodies (primary keys or subkeys)
// whose 64-bit key ID is id, as far as the caller knows them. It must not
// fail: a lookup that cannot be done returns nothing, and the
// certification then ranks as unverified.
type IssuerKeys func(id uint64) [][]byte

// MaxClockSkew is how far in the future a signature's creation time may
// lie: one day, for clocks set a time zone wrong. Signatures dated later
// are dropped (DropFutureSignature), so that no one can pin their
// certifications above every genuine one by dating them decades ahead.
const MaxClockSkew = 24 * time.Hour

// Default limits (see the Policy fields).
const (
	DefaultMaxKeySize           = 1 << 20
	DefaultMaxPacketSize        = 8 << 10
	DefaultMaxSignatureSize     = 64 << 10
	DefaultMaxUserAttributeSize = 64 << 10
	DefaultMaxUserIDs           = 100
	DefaultMaxUserAttributes    = 16
	DefaultMaxSubkeys           = 100
	DefaultMaxCertifications    = 100
)

// (DefaultMaxVerifyWork and DefaultMaxBadSelfSignatures are in budget.go.)

// DefaultPolicy returns the policy with every limit at its default.
func DefaultPolicy() Policy {
	return Policy{
		MaxKeySize:           DefaultMaxKeySize,
		MaxPacketSize:        DefaultMaxPacketSize,
		MaxSignatureSize:     DefaultMaxSignatureSize,
		MaxUserAttributeSize: DefaultMaxUserAttributeSize,
		MaxUserIDs:           DefaultMaxUserIDs,
		MaxUserAttributes:    DefaultMaxUserAttributes,
		MaxSubkeys:           DefaultMaxSubkeys,
		MaxCertifications:    DefaultMaxCertifications,
		MaxVerifyWork:        DefaultMaxVerifyWork,
		MaxBadSelfSignatures: DefaultMaxBadSelfSignatures,
	}
}

// withDefaults fills zero limits.
func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	def := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	def(&p.MaxKeySize, d.MaxKeySize)
	def(&p.MaxPacketSize, d.MaxPacketSize)
	def(&p.MaxSignatureSize, d.MaxSignatureSize)
	def(&p.MaxUserAttributeSize, d.MaxUserAttributeSize)
	def(&p.MaxUserIDs, d.MaxUserIDs)
	def(&p.MaxUserAttributes, d.MaxUserAttributes)
	def(&p.MaxSubkeys, d.MaxSubkeys)
	def(&p.MaxCertifications, d.MaxCertifications)
	def(&p.MaxVerifyWork, d.MaxVerifyWork)
	def(&p.MaxBadSelfSignatures, d.MaxBadSelfSignatures)
	return p
}

// Apply checks k against the policy and returns the key made of the packets
// that pass, in canonical order, with what was dropped counted by reason.
//
// Canonical order: the primary key; its direct signatures; the user IDs,
// sorted by their bytes; the user attributes, sorted by their bytes; the
// subkeys, sorted by their body bytes. Each is followed by its signatures
// sorted by creation time, then by their bytes. Apply is idempotent:
// Apply(Apply(k)) yields the same packets.
//
// The key is rejected (nil Key, error wrapping ErrNoSelfSignature,
// ErrKeyTooLarge, ErrUnsupportedKey, ErrMalformedKey, ErrPacketTooLarge or
// ErrNotPublicKey) when nothing about it can be trusted.
func (p Policy) Apply(k *Key) (*Key, Report, error) {
	g := p.newKeyGroup()
	g.addKey(k)
	r := g.finish()[0]
	return r.Key, r.Report, r.Err
}

// keptSig is a signature that passed the checks so far.
type keptSig struct {
	pkt  Packet
	info *sigInfo
	self *selfSig // nil for third-party signatures
	// verified: a third-party certification that verified against a key
	// Policy.Issuers returned (set only when a cap needs the ranking).
	verified bool
}

func (p Policy) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// keptComp is a component that passed the checks so far.
type keptComp struct {
	kind   componentKind
	pkt    Packet
	km     *keyMaterial // subkeys only
	sigs   []keptSig
	latest int64 // creation time of its newest valid self-signature
}

// apply runs the policy over a structured key, its Ed25519 checks made
// as one batch (a group of one key).
func (p Policy) apply(st *structured) (*Key, Report, error) {
	g := p.newKeyGroup()
	g.add(st)
	r := g.finish()[0]
	return r.Key, r.Report, r.Err
}

// keyGroup applies the policy to keys whose Ed25519 checks are made
// together, as one batch, when the group finishes: a key's own
// signatures in Apply and Merge, up to applyGroupKeys keys' in
// ProcessParallel.
type keyGroup struct {
	p    Policy
	keys []*structured // nil where the key could not be structured
	out  []Result
}

func (p Policy) newKeyGroup() *keyGroup {
	p = p.withDefaults()
	p.batch = &ed25519Batch{}
	return &keyGroup{p: p}
}

// add applies the policy to st, its outcome provisional until finish.
func (g *keyGroup) add(st *structured) {
	var r Result
	r.Key, r.Report, r.Err = g.p.applyChecked(st)
	g.keys = append(g.keys, st)
	g.out = append(g.out, r)
}

// addKey is add for a key not yet structured; one that cannot be is
// refused as Apply refuses it.
func (g *keyGroup) addKey(k *Key) {
	st, err := structure(k.packets)
	if err != nil {
		g.keys = append(g.keys, nil)
		g.out = append(g.out, Result{Err: fmt.Errorf("pgp: policy: %w", err)})
		return
	}
	g.add(st)
}

// finish makes the group's checks and returns the outcome of each key
// added since the last finish, in order (only Key, Report and Err set).
// When the batch fails (a bad signature is in it), each key is applied
// again checking every signature alone, so the outcome is the same as if
// every check had been made at once; a bad signature costs its group's
// work twice.
func (g *keyGroup) finish() []Result {
	out := g.out
	if !g.p.batch.verify() {
		alone := g.p
		alone.batch = nil
		for i, st := range g.keys {
			if st != nil {
				out[i].Key, out[i].Report, out[i].Err = alone.applyChecked(st)
			}
		}
	}
	g.p.batch = &ed25519Batch{}
	g.keys, g.out = nil, nil
	return out
}

// applyChecked is apply, with the Ed25519 checks in p.batch when it is
// not nil.
func (p Policy) applyChecked(st *structured) (*Key, Report, error) {
	rep := st.stray
	if n := len(st.primary.Body); n > p.MaxPacketSize {
		return nil, rep, fmt.Errorf("pgp: policy: primary key packet of %d bytes: %w", n, ErrPacketTooLarge)
	}
	prim, err := parseKeyMaterial(st.primary.Body, false)
	if err != nil {
		return nil, rep, fmt.Errorf("pgp: policy: %w", err)
	}
	fprHex := strings.ToUpper(hex.EncodeToString(prim.fpr))
	if prim.pub == nil {
		return nil, rep, fmt.Errorf("pgp: policy: key %s: %w: %v", fprHex, ErrUnsupportedKey, prim.pubErr)
	}
	if err := checkPublicKey(st.primary.Body); err != nil {
		return nil, rep, fmt.Errorf("pgp: policy: key %s: primary key: %w", fprHex, err)
	}

	bud := p.newKeyBudget()
	direct := p.filterSigs(prim, kindDirect, nil, nil, st.direct, st.storedDirect, bud, &rep)

	// Components with identical packets are one component.
	type ckey struct {
		kind componentKind
		body string
	}
	byBody := make(map[ckey]*component, len(st.comps))
	var comps []*component
	for _, c := range st.comps {
		ck := ckey{c.kind, string(c.pkt.Body)}
		if have := byBody[ck]; have != nil {
			rep.add(DropDuplicate, 1)
			have.sigs = append(have.sigs, c.sigs...)
			continue
		}
		cc := &component{kind: c.kind, pkt: c.pkt, sigs: slices.Clip(c.sigs), stored: c.stored}
		byBody[ck] = cc
		comps = append(comps, cc)
	}

	var uids, uats, subs []*keptComp
	for _, c := range comps {
		kc, reason, ok := p.checkComponent(prim, c, bud, &rep)
		if !ok {
			rep.add(reason, 1)
			rep.add(DropOrphanSignature, len(kc.sigs))
			continue
		}
		switch c.kind {
		case kindUserID:
			uids = append(uids, kc)
		case kindUserAttribute:
			uats = append(uats, kc)
		default:
			subs = append(subs, kc)
		}
	}

	// The key must carry at least one valid self-signature.
	if len(uids) == 0 && len(uats) == 0 && !p.AllowNoSelfSignature && !slices.ContainsFunc(direct, func(s keptSig) bool { return s.self != nil }) {
		if n := rep.Count(DropVerificationBudget); n > 0 {
			return nil, rep, fmt.Errorf("pgp: policy: key %s: %w (%d signatures left unchecked: %w)", fprHex, ErrNoSelfSignature, n, ErrVerifyBudget)
		}
		return nil, rep, fmt.Errorf("pgp: policy: key %s: %w", fprHex, ErrNoSelfSignature)
	}

	direct = p.capCertifications(prim, kindDirect, nil, direct, bud, &rep)
	for _, list := range [][]*keptComp{uids, uats} {
		for _, c := range list {
			c.sigs = p.capCertifications(prim, c.kind, c.pkt.Body, c.sigs, bud, &rep)
		}
	}
	uids = capComponents(uids, p.MaxUserIDs, DropTooManyUserIDs, &rep)
	uats = capComponents(uats, p.MaxUserAttributes, DropTooManyUserIDs, &rep)
	subs = capComponents(subs, p.MaxSubkeys, DropTooManySubkeys, &rep)

	// Canonical order.
	sortSigs(direct)
	for _, list := range [][]*keptComp{uids, uats, subs} {
		slices.SortFunc(list, func(a, b *keptComp) int { return bytes.Compare(a.pkt.Body, b.pkt.Body) })
		for _, c := range list {
			sortSigs(c.sigs)
		}
	}

	if size := canonicalSize(st.primary, direct, uids, uats, subs); size > p.MaxKeySize {
		p.markVerified(prim, kindDirect, nil, direct, bud)
		for _, list := range [][]*keptComp{uids, uats} {
			for _, c := range list {
				p.markVerified(prim, c.kind, c.pkt.Body, c.sigs, bud)
			}
		}
		size = shedForSize(size, p.MaxKeySize, &direct, [][]*keptComp{uids, uats}, &rep)
		if size > p.MaxKeySize {
			return nil, rep, fmt.Errorf("pgp: policy: key %s: %d bytes of self-signed material, limit %d: %w", fprHex, size, p.MaxKeySize, ErrKeyTooLarge)
		}
	}

	out := &Key{packets: buildPackets(st.primary, direct, uids, uats, subs)}
	out.applied = &analysis{desc: describe(prim, direct, uids, uats, subs)}
	out.applied.digest = digestPackets(out.packets)
	return out, rep, nil
}

// structuralDrop checks that a signature, user attribute or subkey packet
// is well formed and of a version that fits a key whose primary is of
// primaryVersion; if not, it returns the reason to drop it.
func structuralDrop(primaryVersion int, p Packet) (DropReason, bool) {
	err := CheckPacket(p)
	if err == nil {
		err = checkVersionFits(primaryVersion, p)
	}
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, ErrUnknownVersion):
		return DropUnreadableVersion, false
	case errors.Is(err, ErrUnknownAlgorithm):
		return DropUnknownAlgorithm, false
	case p.Tag == TagSignature:
		return DropMalformedSignature, false
	}
	return DropMalformedPacket, false
}

// checkComponent checks one user ID, user attribute or subkey and its
// signatures. When the component is dropped it returns the reason (its
// surviving signatures, in kc.sigs, are then orphans).
func (p Policy) checkComponent(prim *keyMaterial, c *component, bud *keyBudget, rep *Report) (kc *keptComp, reason DropReason, ok bool) {
	kc = &keptComp{kind: c.kind, pkt: c.pkt}
	limit, unbound := p.MaxPacketSize, DropUnboundUserID
	switch c.kind {
	case kindUserAttribute:
		limit, unbound = p.MaxUserAttributeSize, DropUnboundUserAttribute
	case kindSubkey:
		unbound = DropUnboundSubkey
	}
	if len(c.pkt.Body) > limit {
		kc.sigs = make([]keptSig, len(c.sigs))
		return kc, DropPacketTooLarge, false
	}
	if c.kind != kindUserID {
		if reason, ok := structuralDrop(prim.version, c.pkt); !ok {
			kc.sigs = make([]keptSig, len(c.sigs))
			return kc, reason, false
		}
	}
	if c.kind == kindSubkey {
		km, err := parseKeyMaterial(c.pkt.Body, true)
		if err != nil || km.fpr == nil {
			kc.sigs = make([]keptSig, len(c.sigs))
			return kc, DropMalformedPacket, false
		}
		kc.km = km
	}
	kc.sigs = p.filterSigs(prim, c.kind, c.pkt.Body, kc.km, c.sigs, c.stored, bud, rep)
	if c.kind != kindSubkey {
		kc.sigs = keepAttested(kc.sigs, rep)
	}
	// A valid self-revocation binds too: gpg keeps revoked user IDs that
	// carry only their revocation (Debian's keyring has many), and no one
	// but the key holder can make one.
	bound := false
	for _, s := range kc.sigs {
		if s.self == nil || s.self.attestation {
			continue
		}
		bound = true
		if t := s.self.created.Unix(); t > kc.latest {
			kc.latest = t
		}
	}
	if !bound {
		return kc, unbound, false
	}
	return kc, 0, true
}

// filterSigs checks the signatures on one component (kind kindDirect: on the
// primary key) and returns those kept, in their order in sigs. The
// self-signatures are checked paid from bud, the first stored of sigs
// (those of a stored key, in Merge) first, each part newest first; after
// p.MaxBadSelfSignatures of them failed, or when bud is spent, the rest
// are dropped unchecked.
func (p Policy) filterSigs(prim *keyMaterial, kind componentKind, comp []byte, sub *keyMaterial, sigs []Packet, stored int, bud *keyBudget, rep *Report) []keptSig {
	slots := make([]keptSig, len(sigs)) // kept ones have info set
	latestAllowed := p.now().Add(MaxClockSkew).Unix()
	var seen map[string]struct{}
	if len(sigs) > 1 {
		seen = make(map[string]struct{}, len(sigs))
	}
	// candidates are the signatures that are self-signatures if any are:
	// they claim the primary key as issuer, or name no issuer at all.
	type candidate struct {
		i      int
		info   *sigInfo
		claims bool
	}
	var candidates []candidate
	for i, s := range sigs {
		if seen != nil {
			if _, dup := seen[string(s.Body)]; dup {
				rep.add(DropDuplicate, 1)
				continue
			}
			seen[string(s.Body)] = struct{}{}
		}
		if len(s.Body) > p.MaxSignatureSize {
			rep.add(DropPacketTooLarge, 1)
			continue
		}
		if reason, ok := structuralDrop(prim.version, s); !ok {
			rep.add(reason, 1)
			continue
		}
		info, err := parseSigInfo(s.Body)
		if err != nil {
			rep.add(DropMalformedSignature, 1)
			continue
		}
		if info.created > latestAllowed {
			rep.add(DropFutureSignature, 1)
			continue
		}
		if !sigAllowedFor(info.sigType, kind) {
			rep.add(DropMisplacedSignature, 1)
			continue
		}
		claims := info.claimsIssuer(prim)
		if claims || !info.hasIssuerInfo() {
			candidates = append(candidates, candidate{i, info, claims})
			continue
		}
		if kind == kindSubkey || info.sigType == sigTypeAttestation {
			// Only the primary key binds subkeys, and only the key holder
			// attests certifications.
			rep.add(DropMisplacedSignature, 1)
			continue
		}
		slots[i] = keptSig{pkt: s, info: info}
	}
	// Stored first, then newest first: when the budget runs out, what is
	// left unchecked is what a current key needs least.
	slices.SortStableFunc(candidates, func(a, b candidate) int {
		if as, bs := a.i < stored, b.i < stored; as != bs {
			if as {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.info.created, a.info.created)
	})
	bad := 0
	for _, c := range candidates {
		if bad >= p.MaxBadSelfSignatures {
			rep.add(DropVerificationBudget, 1)
			continue
		}
		ss, err := verifySelfSig(p.batch, bud, prim, c.info, kind, comp, sub, !p.AllowMissingBackSignatures)
		switch {
		case err == nil:
			slots[c.i] = keptSig{pkt: sigs[c.i], info: c.info, self: ss}
			continue
		case errors.Is(err, errNoBudget):
			rep.add(DropVerificationBudget, 1)
			if c.i < stored {
				rep.storedUnchecked++
			}
			continue
		case !errors.Is(err, ErrUnsupportedSignature):
			bad++
		}
		switch {
		case !c.claims:
			rep.add(DropNoIssuer, 1)
		case errors.Is(err, ErrUnsupportedSignature):
			rep.add(DropUnsupportedSignature, 1)
		default:
			rep.add(DropBadSelfSignature, 1)
		}
	}
	return slices.DeleteFunc(slots, func(s keptSig) bool { return s.info == nil })
}

// capCertifications keeps at most MaxCertifications third-party signatures
// on one component (kind and body comp; kindDirect: on the primary key):
// those that verify against a known issuer first, then the newest.
func (p Policy) capCertifications(prim *keyMaterial, kind componentKind, comp []byte, sigs []keptSig, bud *keyBudget, rep *Report) []keptSig {
	third := 0
	for _, s := range sigs {
		if s.self == nil {
			third++
		}
	}
	if third <= p.MaxCertifications {
		return sigs
	}
	p.markVerified(prim, kind, comp, sigs, bud)
	var self, others []keptSig
	for _, s := range sigs {
		if s.self == nil {
			others = append(others, s)
		} else {
			self = append(self, s)
		}
	}
	slices.SortFunc(others, func(a, b keptSig) int { return -rankCertifications(a, b) }) // best first
	rep.add(DropCertificationFlood, len(others)-p.MaxCertifications)
	return append(self, others[:p.MaxCertifications]...)
}

// markVerified sets verified on the third-party signatures of one component
// that verify against a key Policy.Issuers knows, the checks paid from
// bud; those it cannot pay for rank as unverified.
func (p Policy) markVerified(prim *keyMaterial, kind componentKind, comp []byte, sigs []keptSig, bud *keyBudget) {
	if p.Issuers == nil {
		return
	}
	for i := range sigs {
		s := &sigs[i]
		if s.self != nil || s.verified {
			continue
		}
		id := s.info.issuerKeyID()
		if id == 0 {
			continue
		}
		for _, body := range p.Issuers(id) {
			if verifyCertification(bud, prim, s.info, kind, comp, body) {
				s.verified = true
				break
			}
		}
	}
}

// rankCertifications orders third-party signatures from least to most
// worth keeping: unverified before verified, then oldest first.
func rankCertifications(a, b keptSig) int {
	if a.verified != b.verified {
		if a.verified {
			return 1
		}
		return -1
	}
	return compareSigs(a, b)
}

// capComponents keeps at most max components, those with the newest valid
// self-signatures (ties broken by bytes).
func capComponents(cs []*keptComp, max int, reason DropReason, rep *Report) []*keptComp {
	if len(cs) <= max {
		return cs
	}
	slices.SortFunc(cs, func(a, b *keptComp) int {
		if a.latest != b.latest {
			if a.latest > b.latest {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.pkt.Body, b.pkt.Body)
	})
	for _, c := range cs[max:] {
		rep.add(reason, 1)
		rep.add(DropOrphanSignature, len(c.sigs))
	}
	return cs[:max]
}

// compareSigs orders signatures by creation time, then by bytes.
func compareSigs(a, b keptSig) int {
	if a.info.created != b.info.created {
		if a.info.created < b.info.created {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.pkt.Body, b.pkt.Body)
}

func sortSigs(sigs []keptSig) { slices.SortFunc(sigs, compareSigs) }

func sigsSize(sigs []keptSig) int {
	n := 0
	for _, s := range sigs {
		n += headerLen(len(s.pkt.Body)) + len(s.pkt.Body)
	}
	return n
}

func canonicalSize(primary Packet, direct []keptSig, lists ...[]*keptComp) int {
	n := headerLen(len(primary.Body)) + len(primary.Body) + sigsSize(direct)
	for _, list := range lists {
		for _, c := range list {
			n += headerLen(len(c.pkt.Body)) + len(c.pkt.Body) + sigsSize(c.sigs)
		}
	}
	return n
}

// shedForSize drops third-party signatures, oldest first, until the key is
// no larger than max, and returns the new size.
func shedForSize(size, max int, direct *[]keptSig, lists [][]*keptComp, rep *Report) int {
	type ref struct {
		sigs *[]keptSig
		s    keptSig
	}
	var refs []ref
	add := func(sigs *[]keptSig) {
		for _, s := range *sigs {
			if s.self == nil {
				refs = append(refs, ref{sigs, s})
			}
		}
	}
	add(direct)
	for _, list := range lists {
		for _, c := range list {
			add(&c.sigs)
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return rankCertifications(a.s, b.s) })
	drop := make(map[*sigInfo]bool)
	for _, r := range refs {
		if size <= max {
			break
		}
		drop[r.s.info] = true
		size -= headerLen(len(r.s.pkt.Body)) + len(r.s.pkt.Body)
		rep.add(DropKeySizeLimit, 1)
	}
	filter := func(sigs *[]keptSig) {
		*sigs = slices.DeleteFunc(*sigs, func(s keptSig) bool { return drop[s.info] })
	}
	filter(direct)
	for _, list := range lists {
		for _, c := range list {
			filter(&c.sigs)
		}
	}
	return size
}

// buildPackets lays out the canonical packet list.
func buildPackets(primary Packet, direct []keptSig, lists ...[]*keptComp) []Packet {
	n := 1 + len(direct)
	for _, list := range lists {
		for _, c := range list {
			n += 1 + len(c.sigs)
		}
	}
	out := make([]Packet, 0, n)
	out = append(out, primary)
	for _, s := range direct {
		out = append(out, s.pkt)
	}
	for _, list := range lists {
		for _, c := range list {
			out = append(out, c.pkt)
			for _, s := range c.sigs {
				out = append(out, s.pkt)
			}
		}
	}
	return out
}
