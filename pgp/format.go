// format.go: how keys are shown to people: fingerprints in groups and the
// names of public-key algorithms. Every frontend (the HKP index, the pages,
// the VKS mails) shows them the same way because they all call these.

package pgp

import (
	"fmt"
	"strings"
)

// GroupFingerprint writes a fingerprint or key ID given in hex in groups
// of four digits separated by single spaces, as people read and compare
// them ("0123456789ABCDEF" becomes "0123 4567 89AB CDEF"). The last group
// is shorter when the length is not a multiple of four. The digits are
// kept as given: pass upper-case hex for the usual display.
func GroupFingerprint(hex string) string {
	var b strings.Builder
	b.Grow(len(hex) + len(hex)/4)
	for i := 0; i < len(hex); i += 4 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(hex[i:min(i+4, len(hex))])
	}
	return b.String()
}

// algorithmNames names the public-key algorithms of RFC 9580 section 9.1
// and RFC 9980's post-quantum ones:
// for people (AlgorithmName) and as gpg abbreviates them (GPGAlgorithmName).
// fixed marks the algorithms whose name says their size (X25519, Ed448, …).
var algorithmNames = map[int]struct {
	name, gpg string
	fixed     bool
}{
	1:  {"RSA", "rsa", false},
	2:  {"RSA", "rsa", false},
	3:  {"RSA", "rsa", false},
	16: {"ElGamal", "elg", false},
	17: {"DSA", "dsa", false},
	18: {"ECDH", "ecdh", false},
	19: {"ECDSA", "ecdsa", false},
	20: {"ElGamal", "elg", false},
	22: {"EdDSA", "eddsa", false},
	25: {"X25519", "x25519", true},
	26: {"X448", "x448", true},
	27: {"Ed25519", "ed25519", true},
	28: {"Ed448", "ed448", true},
	// RFC 9980. gpg has no names for them (GnuPG implements none of its
	// algorithms); these follow its style.
	30: {"ML-DSA-65+Ed25519", "mldsa65ed25519", true},
	31: {"ML-DSA-87+Ed448", "mldsa87ed448", true},
	32: {"SLH-DSA-SHAKE-128s", "slhdsa128s", true},
	33: {"SLH-DSA-SHAKE-128f", "slhdsa128f", true},
	34: {"SLH-DSA-SHAKE-256s", "slhdsa256s", true},
	35: {"ML-KEM-768+X25519", "mlkem768x25519", true},
	36: {"ML-KEM-1024+X448", "mlkem1024x448", true},
}

// AlgorithmName names a key's public-key algorithm (an RFC 9580 algorithm
// ID) with its size or curve, for people: "RSA 4096", "DSA 1024",
// "EdDSA ed25519", "ECDH cv25519", "Ed25519". bits and curve are a key's
// Description.Bits and Description.Curve: the curve is shown for the
// algorithms that take one, the size for the others; an unknown algorithm
// is "algorithm N".
func AlgorithmName(algo, bits int, curve string) string {
	a, ok := algorithmNames[algo]
	name := a.name
	if !ok {
		name = fmt.Sprintf("algorithm %d", algo)
	}
	switch {
	case curve != "" && !a.fixed:
		return name + " " + curve
	case bits > 0 && curve == "":
		return fmt.Sprintf("%s %d", name, bits)
	}
	return name
}

// GPGAlgorithmName names a key's public-key algorithm (an RFC 9580
// algorithm ID) with its size or curve the way gpg lists keys, which is
// how HKP indexes show it: "rsa4096", "dsa1024", "ed25519", "cv25519". A
// key with a curve is named by the curve alone; an unknown algorithm is
// "algoN-" followed by the size.
func GPGAlgorithmName(algo, bits int, curve string) string {
	if curve != "" {
		return curve
	}
	a, ok := algorithmNames[algo]
	name := a.gpg
	switch {
	case !ok:
		name = fmt.Sprintf("algo%d-", algo)
	case a.fixed:
		return name
	}
	if bits > 0 {
		return fmt.Sprintf("%s%d", name, bits)
	}
	return name
}
