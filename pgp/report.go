// report.go: what a Policy dropped, counted by reason.

package pgp

import (
	"errors"
	"fmt"
	"strings"
)

// DropReason says why a Policy dropped a packet.
type DropReason uint8

// The reasons a Policy drops packets. Every dropped packet is counted under
// exactly one reason.
const (
	// DropTrustPacket: a trust packet (local to one keyring, never exported).
	DropTrustPacket DropReason = iota
	// DropSecretKey: a secret key or secret subkey packet.
	DropSecretKey
	// DropMisplacedPacket: a packet that has no place in a public key
	// (marker, padding, data, unknown tags, a second primary key).
	DropMisplacedPacket
	// DropMisplacedSignature: a signature whose type does not belong where
	// it stands (e.g. a subkey binding on a user ID, a third-party
	// signature on a subkey).
	DropMisplacedSignature
	// DropOrphanSignature: a signature of a dropped packet or component.
	DropOrphanSignature
	// DropDuplicate: an exact copy of a packet already kept.
	DropDuplicate
	// DropPacketTooLarge: a packet over its size limit.
	DropPacketTooLarge
	// DropMalformedPacket: a user attribute or subkey packet that is not
	// well formed (see CheckPacket): its body cannot be parsed, a length in
	// it lies, or bytes trail its fields.
	DropMalformedPacket
	// DropMalformedSignature: a signature packet that is not well formed
	// (see CheckPacket), third-party certifications included.
	DropMalformedSignature
	// DropUnsupportedSignature: a self-signature Kith cannot check (unknown
	// version, hash or algorithm).
	DropUnsupportedSignature
	// DropBadSelfSignature: a signature that claims the primary key as its
	// issuer but does not verify.
	DropBadSelfSignature
	// DropNoIssuer: a signature that names no issuer and is not a valid
	// self-signature.
	DropNoIssuer
	// DropUnboundUserID: a user ID without a valid self-certification (a
	// grafted user ID).
	DropUnboundUserID
	// DropUnboundUserAttribute: a user attribute without a valid
	// self-certification.
	DropUnboundUserAttribute
	// DropUnboundSubkey: a subkey without a valid binding signature (or a
	// signing subkey without a valid back-signature).
	DropUnboundSubkey
	// DropCertificationFlood: a third-party certification beyond the
	// per-component cap (unverified ones go first, then the oldest).
	DropCertificationFlood
	// DropTooManyUserIDs: a user ID or attribute beyond the per-key cap.
	DropTooManyUserIDs
	// DropTooManySubkeys: a subkey beyond the per-key cap.
	DropTooManySubkeys
	// DropKeySizeLimit: a third-party certification shed (unverified ones
	// first, then oldest first) to bring the key under the whole-key size
	// limit.
	DropKeySizeLimit
	// DropUnreadableVersion: a signature or subkey whose version RFC 9580
	// does not define (or LibrePGP's v5), or one gpg stops reading at where
	// it stands: a v6 signature or subkey on a v3 or v4 key, a v3 subkey.
	DropUnreadableVersion
	// DropUnknownAlgorithm: a signature or subkey of a public-key algorithm
	// RFC 9580 does not define, whose fields cannot be checked.
	DropUnknownAlgorithm
	// DropFutureSignature: a signature dated more than MaxClockSkew after
	// the policy's clock.
	DropFutureSignature
	// DropUnattestedCertification: a third-party certification of a user
	// ID whose holder attested others but not this one.
	DropUnattestedCertification
	// DropVerificationBudget: a self-signature left unchecked because the
	// key's verification budget was spent (Policy.MaxVerifyWork,
	// Policy.Budget) or its component had too many bad self-signatures
	// already (Policy.MaxBadSelfSignatures).
	DropVerificationBudget

	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	DropTrustPacket:             "trust-packet",
	DropSecretKey:               "secret-key",
	DropMisplacedPacket:         "misplaced-packet",
	DropMisplacedSignature:      "misplaced-signature",
	DropOrphanSignature:         "orphan-signature",
	DropDuplicate:               "duplicate",
	DropPacketTooLarge:          "packet-too-large",
	DropMalformedPacket:         "malformed-packet",
	DropMalformedSignature:      "malformed-signature",
	DropUnsupportedSignature:    "unsupported-signature",
	DropBadSelfSignature:        "bad-self-signature",
	DropNoIssuer:                "no-issuer",
	DropUnboundUserID:           "unbound-user-id",
	DropUnboundUserAttribute:    "unbound-user-attribute",
	DropUnboundSubkey:           "unbound-subkey",
	DropCertificationFlood:      "certification-flood",
	DropTooManyUserIDs:          "too-many-user-ids",
	DropTooManySubkeys:          "too-many-subkeys",
	DropKeySizeLimit:            "key-size-limit",
	DropUnreadableVersion:       "unreadable-version",
	DropUnknownAlgorithm:        "unknown-algorithm",
	DropFutureSignature:         "future-signature",
	DropUnattestedCertification: "unattested-certification",
	DropVerificationBudget:      "verification-budget",
}

// String returns the reason's stable kebab-case name (for logs and metrics).
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropReasonNames[r]
	}
	return fmt.Sprintf("drop-reason-%d", uint8(r))
}

// DropReasons returns every reason, in declaration order.
func DropReasons() []DropReason {
	rs := make([]DropReason, numDropReasons)
	for i := range rs {
		rs[i] = DropReason(i)
	}
	return rs
}

// Report counts what a Policy dropped from one key (or, after Add, from many).
// The zero Report is empty.
type Report struct {
	counts [numDropReasons]int
	// storedUnchecked counts the stored key's self-signatures (in Merge)
	// that a spent budget left unchecked: Merge refuses rather than drop
	// what the store holds.
	storedUnchecked int
}

func (r *Report) add(reason DropReason, n int) { r.counts[reason] += n }

// Count returns how many packets were dropped for reason.
func (r Report) Count(reason DropReason) int {
	if reason >= numDropReasons {
		return 0
	}
	return r.counts[reason]
}

// Total returns how many packets were dropped in all.
func (r Report) Total() int {
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// Add adds o's counts to r.
func (r *Report) Add(o Report) {
	for i, c := range o.counts {
		r.counts[i] += c
	}
	r.storedUnchecked += o.storedUnchecked
}

// String lists the non-zero counts, e.g. "duplicate=2 unbound-user-id=1",
// or "nothing dropped".
func (r Report) String() string {
	var b strings.Builder
	for i, c := range r.counts {
		if c == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", DropReason(i), c)
	}
	if b.Len() == 0 {
		return "nothing dropped"
	}
	return b.String()
}

// RejectionReason names, in a few stable words, why a key was refused as
// a whole (by a Reader or a Policy): the text of the sentinel error err
// wraps, without the details (fingerprints, offsets) that make every
// error unique; "other" when err wraps none. Every upload path (HKP, the
// pages, recon, `kith load`) reports refusals with it.
func RejectionReason(err error) string {
	for _, known := range []error{
		ErrVerifyBudget, ErrNoSelfSignature, ErrKeyTooLarge, ErrUnsupportedKey, ErrMalformedKey,
		ErrNotPublicKey, ErrBadHeader, ErrPartialLength, ErrIndeterminateLength,
		ErrTruncated, ErrPacketTooLarge, ErrBadArmor, ErrFingerprintMismatch,
	} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	return "other"
}
