package pgp

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// sqAttestedKey makes, with sq, a key whose user ID carries two
// third-party certifications of which the holder attested only the first
// (the attestation was made before the second certification existed). It
// returns the key without the attestation but with both certifications,
// the attested key, and the issuers of the attested and the unattested
// certification.
func sqAttestedKey(t *testing.T) (plain, attested []byte, good, bad string) {
	t.Helper()
	sq := testkit.Tool(t, "sq")
	dir := t.TempDir()
	run := func(out string, args ...string) []byte {
		t.Helper()
		c := exec.Command(sq, args...)
		c.Dir = dir
		var o, e bytes.Buffer
		c.Stdout, c.Stderr = &o, &e
		if err := c.Run(); err != nil {
			t.Fatalf("sq %s: %v\n%s", strings.Join(args, " "), err, e.String())
		}
		if out != "" {
			if err := os.WriteFile(filepath.Join(dir, out), o.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return o.Bytes()
	}
	const uid = "Owner <owner@example.org>"
	run("", "key", "generate", "--userid", uid, "--export", "owner.key")
	run("", "key", "generate", "--userid", "Good <good@example.org>", "--export", "good.key")
	run("", "key", "generate", "--userid", "Bad <bad@example.org>", "--export", "bad.key")
	run("c1.pgp", "certify", "good.key", "owner.key", uid)
	run("o1.key", "keyring", "merge", "owner.key", "c1.pgp")
	run("o2.key", "key", "attest-certifications", "o1.key")
	run("c2.pgp", "certify", "bad.key", "owner.key", uid)
	run("o3.key", "keyring", "merge", "o2.key", "c2.pgp")
	run("o1c2.key", "keyring", "merge", "o1.key", "c2.pgp")
	attested = run("", "key", "extract-cert", "o3.key")
	plain = run("", "key", "extract-cert", "o1c2.key")
	keyID := func(file string) string {
		cert := run("", "key", "extract-cert", file)
		return strings.ToUpper(mustParse(t, cert).Describe().FingerprintHex()[24:])
	}
	return plain, attested, keyID("good.key"), keyID("bad.key")
}

// certIssuers lists the issuers of the third-party certifications of a
// canonical key's user IDs, and counts its attestations.
func certIssuers(k *Key) (issuers []string, attestations int) {
	fp := k.Describe().FingerprintHex()
	for _, bp := range BlockablePackets(k) {
		if bp.Tag != TagSignature || bp.UserID == "" {
			continue
		}
		switch id := hexID(bp.Issuer); {
		case bp.SigType == sigTypeAttestation:
			attestations++
		case !strings.HasSuffix(fp, id):
			issuers = append(issuers, id)
		}
	}
	return issuers, attestations
}

func hexID(id uint64) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = digits[id&15]
		id >>= 4
	}
	return string(b)
}

func TestAttestationKeepsOnlyTheAttestedCertification(t *testing.T) {
	plain, attested, good, bad := sqAttestedKey(t)

	// Without an attestation both certifications stay.
	k, _ := mustApply(t, mustParse(t, plain))
	if got, n := certIssuers(k); len(got) != 2 || n != 0 {
		t.Fatalf("without an attestation: certifications by %v, %d attestations", got, n)
	}
	// With it, the attestation is kept (not dropped as misplaced) and only
	// the attested certification remains.
	k, rep := mustApply(t, mustParse(t, attested))
	got, n := certIssuers(k)
	if n != 1 || len(got) != 1 || got[0] != good {
		t.Fatalf("attested key: certifications by %v (good %s, bad %s), %d attestations; report %s", got, good, bad, n, rep)
	}
	if rep.Count(DropUnattestedCertification) != 1 || rep.Count(DropMisplacedSignature) != 0 {
		t.Fatalf("report: %s", rep)
	}
	// Merging the unattested certification back changes nothing, in
	// either order.
	for _, pair := range [][2]*Key{{k, mustParse(t, plain)}, {mustParse(t, plain), k}} {
		m, _, err := Policy{}.Merge(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if m.Digest() != k.Digest() {
			got, _ := certIssuers(m)
			t.Fatalf("merge with the unattested certification: certifications by %v", got)
		}
	}
	// gpg reads the result.
	gpg := testkit.Tool(t, "gpg")
	if fprs, stderr, err := gpgShow(t, gpg, k.Bytes()); err != nil || len(fprs) != 1 {
		t.Fatalf("gpg --show-keys of the attested key: %v %v\n%s", fprs, err, stderr)
	}
}

// TestForgedAttestationChangesNothing: an attestation that the key holder
// did not make (here: the holder's, with one attested digest changed) does
// not verify, is dropped, and every certification stays.
func TestForgedAttestationChangesNothing(t *testing.T) {
	plain, attested, _, _ := sqAttestedKey(t)
	var att []byte
	for _, p := range mustParse(t, attested).Packets() {
		if p.Tag == TagSignature && len(p.Body) > 1 && p.Body[1] == sigTypeAttestation {
			info, err := parseSigInfo(p.Body)
			if err != nil || len(info.attested) == 0 {
				t.Fatalf("attestation: %v", err)
			}
			att = bytes.Clone(p.Body)
			att[cap(p.Body)-cap(info.attested)] ^= 0xff // first attested digest octet
		}
	}
	// The forged attestation goes after the user ID of the key that has
	// both certifications.
	var out []Packet
	for _, p := range mustParse(t, plain).Packets() {
		out = append(out, p)
		if p.Tag == TagUserID {
			out = append(out, Packet{Tag: TagSignature, Body: att})
		}
	}
	k, rep := mustApply(t, NewKey(out))
	if got, n := certIssuers(k); len(got) != 2 || n != 0 || rep.Count(DropBadSelfSignature) != 1 {
		t.Fatalf("forged attestation: certifications by %v, %d attestations, report %s", got, n, rep)
	}
}

func TestDescriptionShowsAttestedCertifications(t *testing.T) {
	plain, attested, good, _ := sqAttestedKey(t)
	p, _ := mustApply(t, mustParse(t, plain))
	a, _ := mustApply(t, mustParse(t, attested))
	pu, au := p.Describe().UserIDs[0], a.Describe().UserIDs[0]
	if pu.Attested || len(pu.Certifications) != 2 {
		t.Fatalf("unattested user ID: %+v", pu)
	}
	if !au.Attested || len(au.Certifications) != 1 || hexID(au.Certifications[0].Issuer) != good {
		t.Fatalf("attested user ID: %+v", au)
	}
	// The attestation speaks neither for the user ID nor for the key.
	if !au.Created.Equal(pu.Created) || !au.Primary || a.Describe().Capabilities != p.Describe().Capabilities {
		t.Fatalf("the attestation changed the description: %+v vs %+v", a.Describe(), p.Describe())
	}
}
