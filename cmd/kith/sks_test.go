package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
	"github.com/kith-keyserver/kith/recon"
	"github.com/kith-keyserver/kith/recon/skstest"
)

// debianKeys returns the debian-keyring after Kith's policy, skipping (or
// failing with CI=true) when the package is missing.
func debianKeys(t *testing.T) []*pgp.Key {
	t.Helper()
	f, err := os.Open(testkit.DebianKeyring)
	if err != nil {
		testkit.Missing(t, "%s missing: %v", testkit.DebianKeyring, err)
	}
	defer f.Close()
	var keys []*pgp.Key
	err = pgp.DefaultPolicy().ProcessParallel(context.Background(), pgp.NewReader(f), 0, func(r pgp.Result) error {
		if r.Err == nil {
			keys = append(keys, r.Key)
		}
		return nil
	})
	if err != nil || len(keys) < 900 {
		t.Fatalf("debian-keyring: %d keys, %v", len(keys), err)
	}
	return keys
}

// hkpHas reports whether the HKP server at base serves the key.
func hkpHas(base string, k *pgp.Key) bool {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/pks/lookup?op=get&options=mr&search=0x" + k.Describe().FingerprintHex())
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// missingFrom lists the keys base does not serve.
func missingFrom(base string, keys []*pgp.Key) []*pgp.Key {
	var out []*pgp.Key
	for _, k := range keys {
		if !hkpHas(base, k) {
			out = append(out, k)
		}
	}
	return out
}

// TestReconWithRealSKS: SKS holds one half of debian-keyring, Kith the
// other half plus keys of its own; after recon both serve the union over
// HKP, whichever side starts the session.
func TestReconWithRealSKS(t *testing.T) {
	skstest.FindBinary(t)
	all := debianKeys(t)
	var sksHalf, kithHalf []*pgp.Key
	for i, k := range all {
		if i%2 == 0 {
			sksHalf = append(sksHalf, k)
		} else {
			kithHalf = append(kithHalf, k)
		}
	}
	raw, err := keygen.New(33).Range(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	kithHalf = append(kithHalf, policyKeys(t, raw)...)
	union := append(append([]*pgp.Key(nil), sksHalf...), kithHalf...)
	sksBytes := make([][]byte, len(sksHalf))
	for i, k := range sksHalf {
		sksBytes[i] = k.Bytes()
	}

	for _, kithStarts := range []bool{true, false} {
		name := map[bool]string{true: "kith initiates", false: "sks initiates"}[kithStarts]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			node := newReconNode(t, ctx, kithHalf)
			_, kithReconPort, _ := net.SplitHostPort(node.reconLn.Addr().String())
			gossip := 60.0 // minutes: SKS stays quiet
			if !kithStarts {
				gossip = 0.05 // about every 3 s
			}
			sks := skstest.Start(t, skstest.Options{
				Keys:           sksBytes,
				Membership:     []string{"127.0.0.1 " + kithReconPort},
				GossipInterval: gossip,
				DebugLevel:     4,
			})
			node.start(t, ctx, sks.ReconAddr, sks.HKPURL)
			if kithStarts {
				res, fetched, err := node.manager.ReconcileWith(ctx, recon.Peer{Address: sks.ReconAddr, HTTP: sks.HKPURL})
				if err != nil {
					t.Fatalf("recon with SKS: %v\n%s", err, sks.Log("recon"))
				}
				if len(res.Missing) != len(sksHalf) || fetched.Stored != len(sksHalf) {
					t.Errorf("Kith found %d missing and stored %d, want %d", len(res.Missing), fetched.Stored, len(sksHalf))
				}
			}
			// SKS fetches what it lacks from Kith's hashquery a few seconds
			// after its session; Kith fetches at once.
			var kithLacks, sksLacks []*pgp.Key
			if !testkit.PollEvery(2*time.Minute, time.Second, func() bool {
				kithLacks = missingFrom(node.http.URL, union)
				sksLacks = missingFrom(sks.HKPURL, union)
				return len(kithLacks) == 0 && len(sksLacks) == 0
			}) {
				t.Fatalf("after recon Kith lacks %d and SKS lacks %d of %d keys\nSKS recon log:\n%s",
					len(kithLacks), len(sksLacks), len(union), sks.Log("recon"))
			}
			if n := len(digestsOf(t, node.store)); n != len(union) {
				t.Errorf("Kith holds %d keys, want %d", n, len(union))
			}
		})
	}
}

// TestDumpLoadsIntoRealSKS: what kith dump writes, sks build reads, and SKS
// then serves every key under the digest Kith computed.
func TestDumpLoadsIntoRealSKS(t *testing.T) {
	skstest.FindBinary(t)
	url := openDumpSource(t)
	dir := t.TempDir()
	if _, errOut, err := runKith(t, "dump", "--database-url", url, "--dir", dir, "--keys-per-file", "400"); err != nil {
		t.Fatalf("dump: %v\n%s", err, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "sks-dump-*.pgp"))
	sks := skstest.Start(t, skstest.Options{KeyFiles: files})
	digests := digestsOf(t, openTestStore(t, url))
	for _, d := range digests {
		code, _, err := sks.Get("/pks/lookup?op=hget&search=" + d)
		if err != nil || code != http.StatusOK {
			t.Fatalf("SKS hget %s: %d %v", d, code, err)
		}
	}
	t.Logf("SKS serves all %d dumped keys by Kith's digests", len(digests))
}

// openDumpSource loads half of debian-keyring and some generated keys into
// a fresh database and returns its URL.
func openDumpSource(t *testing.T) string {
	t.Helper()
	keys := debianKeys(t)[:450]
	raw, err := keygen.New(44).Range(0, 300)
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, policyKeys(t, raw)...)
	url := pgtest.NewDatabase(t)
	s := openTestStore(t, url)
	if _, err := s.AddKeys(context.Background(), keys); err != nil {
		t.Fatal(err)
	}
	return url
}
