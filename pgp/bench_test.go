package pgp

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// benchPipeline reads, applies the policy and takes the digest of every key
// in input, on workers goroutines (sequentially when workers == 1).
func benchPipeline(b *testing.B, input []byte, workers int) {
	b.SetBytes(int64(len(input)))
	keys := 0
	start := time.Now()
	for b.Loop() {
		keys = 0
		err := Policy{}.ProcessParallel(context.Background(), NewReader(bytes.NewReader(input)), workers, func(r Result) error {
			if r.Err == nil {
				_ = r.Key.Digest()
				keys++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(keys)*float64(b.N)/time.Since(start).Seconds(), "keys/s")
}

// BenchmarkReadPolicyDigest measures the bulk-load pipeline (read, verify
// self-signatures, policy, digest) on the Debian keyring and on generated
// typical pool keys, on all cores and on one.
func BenchmarkReadPolicyDigest(b *testing.B) {
	debian := testkit.File(b, testkit.DebianKeyring)
	typical, err := keygen.TypicalKeys(3000, 1)
	if err != nil {
		b.Fatal(err)
	}
	gen := bytes.Join(typical, nil)
	for _, in := range []struct {
		name string
		data []byte
	}{{"debian-keyring", debian}, {"typical", gen}} {
		b.Run(in.name+"/parallel", func(b *testing.B) { benchPipeline(b, in.data, 0) })
		b.Run(in.name+"/sequential", func(b *testing.B) { benchPipeline(b, in.data, 1) })
	}
}

// TestMeasureGPGImport times `gpg --import` of the Debian keyring into an
// empty GNUPGHOME, for comparison with BenchmarkReadPolicyDigest. It takes
// about a minute, so it runs only with KITH_MEASURE_GPG=1.
func TestMeasureGPGImport(t *testing.T) {
	if os.Getenv("KITH_MEASURE_GPG") != "1" {
		t.Skip("set KITH_MEASURE_GPG=1 to time gpg --import")
	}
	gpg := testkit.Tool(t, "gpg")
	testkit.File(t, testkit.DebianKeyring)
	home := t.TempDir()
	start := time.Now()
	out, err := exec.Command(gpg, "--batch", "--homedir", home, "--import", testkit.DebianKeyring).CombinedOutput()
	d := time.Since(start)
	if err != nil {
		t.Fatalf("gpg --import: %v\n%s", err, out)
	}
	t.Logf("gpg --import of %s: %v (%s)", filepath.Base(testkit.DebianKeyring), d, lastLine(out))
	start = time.Now()
	b, _ := os.ReadFile(testkit.DebianKeyring)
	n := 0
	if err := (Policy{}).ProcessParallel(context.Background(), NewReader(bytes.NewReader(b)), 0, func(r Result) error {
		if r.Err == nil {
			_ = r.Key.Digest()
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	k := time.Since(start)
	t.Logf("kith read+policy+digest of %d keys: %v; ratio %.1fx", n, k, d.Seconds()/k.Seconds())
}

func lastLine(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(lines[len(lines)-1])
}
