package ssh

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestFingerprintOfMatchesKeygen(t *testing.T) {
	dir := t.TempDir()
	for _, kt := range keygenTypes {
		key := keygen(t, dir, kt.name, kt.args...)
		out := string(runTool(t, nil, "ssh-keygen", "-l", "-E", "sha256", "-f", key.public))
		want := strings.Fields(out)[1]
		k := readKeyFile(t, key.public)
		if got := FingerprintOf(k.Public).String(); got != want {
			t.Errorf("%s: %s, ssh-keygen says %s", kt.name, got, want)
		}
		if got := ssh.FingerprintSHA256(k.Public); got != want {
			t.Errorf("%s: x/crypto/ssh disagrees: %s", kt.name, got)
		}
	}
}

func TestParseFingerprintRoundTrips(t *testing.T) {
	pub := newEd25519Signer(t).PublicKey()
	fp := FingerprintOf(pub)
	for _, s := range []string{fp.String(), " " + fp.String() + "\n"} {
		got, err := ParseFingerprint(s)
		if err != nil || got != fp {
			t.Errorf("ParseFingerprint(%q) = %v, %v; want %v", s, got, err, fp)
		}
	}
	b, err := json.Marshal(struct{ F Fingerprint }{fp})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"F":"` + fp.String() + `"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back struct{ F Fingerprint }
	if err := json.Unmarshal(b, &back); err != nil || back.F != fp {
		t.Errorf("JSON round trip: %v, %v", back.F, err)
	}
	if err := json.Unmarshal([]byte(`{"F":"SHA256:nope"}`), &back); !errors.Is(err, ErrMalformedFingerprint) {
		t.Errorf("bad JSON fingerprint: %v", err)
	}
}

func TestParseFingerprintRefusesMalformed(t *testing.T) {
	good := "SHA256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+ho"
	if _, err := ParseFingerprint(good); err != nil {
		t.Fatalf("good fingerprint: %v", err)
	}
	for _, s := range []string{
		"",
		"SHA256:",
		"YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+ho",        // no prefix
		"sha256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+ho", // prefix case
		"SHA256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+ho=",
		"SHA256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+h",
		"SHA256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c+hp", // non-zero trailing bits
		"SHA256:YO_eqJwPOj6gFtT0QxNMSupHMRCcMpojgID-ob9c-ho", // URL alphabet
		"SHA256:YO/eqJwPOj6gFtT0QxNMSupHMRCcMpojgID+ob9c ho", // blank inside
		"MD5:ab:29:62:32:67:ac:f3:3d:fa:93:d3:a6:59:fd:b9:04",
	} {
		if f, err := ParseFingerprint(s); !errors.Is(err, ErrMalformedFingerprint) || !f.IsZero() {
			t.Errorf("ParseFingerprint(%q) = %v, %v; want ErrMalformedFingerprint", s, f, err)
		}
	}
}

func TestFingerprintLineSaysNoComment(t *testing.T) {
	k := NewKey(newEd25519Signer(t).PublicKey(), "")
	want := "256 " + k.Fingerprint().String() + " no comment (ED25519)"
	if got := FingerprintLine(k); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if FingerprintLine(nil) != "" || FingerprintOf(nil) != (Fingerprint{}) {
		t.Error("nil keys should give empty results")
	}
}
