package hkp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// uploadHugeKeys stores n keys of about 1 MiB each (the policy's limit,
// reached with strangers' certifications), all with the user ID word
// "amplifier", and returns their total stored size.
func uploadHugeKeys(t *testing.T, ts *testServer, n int) int {
	t.Helper()
	mallory := newEntity(t, "Mallory", "mallory@example.org", 99)
	total := 0
	for i := range n {
		e := newEntity(t, fmt.Sprintf("Amplifier %d", i), fmt.Sprintf("amp%d@example.org", i), int64(1000+i))
		uid := fmt.Sprintf("Amplifier %d <amp%d@example.org>", i, i)
		var certs [][]byte
		for j := range 17 {
			certs = append(certs, certification(t, mallory, e, uid, testTime.Add(time.Duration(j)*time.Hour), 62<<10))
		}
		body := withCertifications(t, e, certs)
		req, _ := http.NewRequest("POST", ts.url+"/pks/add", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/pgp-keys")
		if r := ts.do(req); r.code != http.StatusOK || !strings.Contains(r.body, "1 inserted") {
			t.Fatalf("upload of huge key %d: %d %s", i, r.code, r.body)
		}
	}
	keys, _, err := ts.store.FindKeys(t.Context(), wordsQuery("amplifier"))
	if err != nil || len(keys) != n {
		t.Fatalf("stored %d huge keys (%v), want %d", len(keys), err, n)
	}
	for _, k := range keys {
		if k.Size < 900<<10 {
			t.Fatalf("key %X is only %d bytes", k.Fingerprint, k.Size)
		}
		total += k.Size
	}
	return total
}

// peakRSSGrowth runs fn and returns how far the process's resident set
// rose above what it was before, by the kernel's high-water mark (reset
// first through /proc/self/clear_refs).
func peakRSSGrowth(t *testing.T, fn func()) int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	before := procStatus(t, "VmRSS")
	fn()
	return procStatus(t, "VmHWM") - before
}

// procStatus reads a /proc/self/status field in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if ok && name == field {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// Attack (issue 12): twenty 1 MiB keys sharing one word; one 60-byte GET
// returned 26.6 MB and RSS doubled, four at once took it to 285 MB. A get
// whose keys are over the answer cap is now refused before any key is
// read, and one under it is streamed a key at a time, never held whole.
func TestBroadGetOfHugeKeysIsRefusedOrStreamed(t *testing.T) {
	ts := newTestServer(t, Options{})
	total := uploadHugeKeys(t, ts, 20)
	t.Logf("20 keys, %d MiB stored", total>>20)

	// get fetches the broad get; the body is kept only up to keep bytes,
	// so that the client's copies do not count against the server.
	get := func(base string, keep int64) (int, []byte, int64) {
		resp, err := http.Get(base + "/pks/lookup?op=get&search=amplifier")
		if err != nil {
			t.Error(err)
			return 0, nil, 0
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		n, err := io.Copy(&b, io.LimitReader(resp.Body, keep))
		if err == nil {
			var rest int64
			rest, err = io.Copy(io.Discard, resp.Body)
			n += rest
		}
		if err != nil {
			t.Error(err)
		}
		return resp.StatusCode, b.Bytes(), n
	}
	parallel := func(base string, check func(int, []byte, int64)) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { check(get(base, 4096)) })
		}
		wg.Wait()
	}

	growth := peakRSSGrowth(t, func() {
		parallel(ts.url, func(code int, body []byte, _ int64) {
			if code != http.StatusBadRequest || !bytes.Contains(body, []byte("larger than 16 MiB")) {
				t.Errorf("broad get over the cap: %d %.200s", code, body)
			}
		})
	})
	t.Logf("4 refused gets at once: peak RSS +%d MiB", growth>>20)
	if growth > 64<<20 {
		t.Errorf("4 refused gets raised RSS by %d MiB, want under 64", growth>>20)
	}

	// With the cap raised above the keys' size, the answer is streamed.
	big := newTestServerOn(t, ts.store, Options{MaxAnswerSize: 32 << 20, CacheSize: -1})
	growth = peakRSSGrowth(t, func() {
		parallel(big.url, func(code int, body []byte, n int64) {
			if code != http.StatusOK || n < int64(total) {
				t.Errorf("streamed get: %d, %d bytes %.100s", code, n, body)
			}
		})
	})
	t.Logf("4 streamed gets of %d MiB at once: peak RSS +%d MiB", total>>20, growth>>20)
	if growth > 64<<20 {
		t.Errorf("4 streamed gets raised RSS by %d MiB, want under 64", growth>>20)
	}
	code, body, _ := get(big.url, 64<<20)
	blk, err := armor.Decode(bytes.NewReader(body))
	if code != http.StatusOK || err != nil {
		t.Fatalf("streamed get: %d %v", code, err)
	}
	if keys, err := pgp.ReadKeys(blk.Body); err != nil || len(keys) != 20 {
		t.Errorf("streamed get: %d keys, %v", len(keys), err)
	}

	// hashquery streams too and stops at the same cap.
	var digests [][16]byte
	keys, _, _ := ts.store.FindKeys(t.Context(), wordsQuery("amplifier"))
	for _, k := range keys {
		digests = append(digests, k.Digest)
	}
	small := newTestServerOn(t, ts.store, Options{MaxAnswerSize: 5 << 20})
	req, _ := http.NewRequest("POST", small.url+"/pks/hashquery", bytes.NewReader(hashQueryBody(digests...)))
	r := small.do(req)
	if r.code != http.StatusOK {
		t.Fatalf("hashquery: %d", r.code)
	}
	got := readHashQueryResponse(t, []byte(r.body))
	sent := 0
	for _, k := range got {
		sent += len(k)
	}
	if len(got) < 4 || sent > 5<<20 {
		t.Errorf("hashquery under a 5 MiB cap returned %d keys of ~1 MiB (%d bytes), want 4 or 5 within the cap", len(got), sent)
	}
}

func wordsQuery(w string) keys.Query {
	return keys.Query{Words: []string{w}, Limit: 100}
}
