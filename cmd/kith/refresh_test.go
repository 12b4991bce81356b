package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// requestCounter is a reverse proxy to a kith serve that counts the
// prefix log requests and the keys asked for.
type requestCounter struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	logs  int
	gets  map[string]int // by upper-case fingerprint
	other []string
}

func (c *requestCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/pks/v2/prefixlog/"):
		c.logs++
	case r.URL.Path == "/pks/lookup" && r.URL.Query().Get("op") == "get":
		c.gets[strings.ToUpper(strings.TrimPrefix(r.URL.Query().Get("search"), "0x"))]++
	default:
		c.other = append(c.other, r.URL.String())
	}
	c.mu.Unlock()
	c.proxy.ServeHTTP(w, r)
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	c.logs, c.gets, c.other = 0, map[string]int{}, nil
	c.mu.Unlock()
}

// publicKey is e's public key as the policy keeps it.
func publicKey(t *testing.T, e *openpgp.Entity) *pgp.Key {
	t.Helper()
	var b bytes.Buffer
	if err := keygen.Serialize(&b, e); err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRefreshDownloadsOnlyChangedPrefixes is issue 35's measure of
// private refresh, through the kith serve and kith refresh binaries: of
// 1,000 held keys (in a store of 5,005) of which 5 changed since the last
// refresh, the refresh downloads those 5 and fewer than 1% of the
// others, and gpg's keyring refreshed the same way gets the 5 changes.
// The server's prefix log refuses what is not a day and holds no user ID.
func TestRefreshDownloadsOnlyChangedPrefixes(t *testing.T) {
	requirePostgresBinaries(t)
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	dir := t.TempDir()

	// The store: 5,000 typical keys and 5 whose private keys the test
	// holds, to change them.
	dump := writeTypicalDump(t, 5000, 35)
	typical, err := pgp.ReadKeys(mustOpen(t, dump))
	if err != nil || len(typical) != 5000 {
		t.Fatalf("read dump: %d keys, %v", len(typical), err)
	}
	var ents []*openpgp.Entity
	var mine bytes.Buffer
	for i := range 5 {
		e, err := keygen.NewEd25519(fmt.Sprintf("Changing %d", i), fmt.Sprintf("changing%d@example.org", i), time.Unix(1700000000, 0), int64(3500+i))
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, e)
		mine.Write(publicKey(t, e).Bytes())
	}
	minePath := filepath.Join(dir, "mine.pgp")
	if err := os.WriteFile(minePath, mine.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runKith(t, "load", "--database-url", dbURL, dump, minePath); err != nil {
		t.Fatalf("load: %v\n%s", err, errOut)
	}
	// ... as it was ten days ago.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE keys SET modified_at = now() - interval '10 days'"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	// With one key a prefix, 5,005 keys are 3 digits: 4,096 prefixes.
	s := startServe(t, tempDir(t), nil, "--database-url", dbURL, "--hkp-prefixlog-min-keys", "1")
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	target, _ := url.Parse("http://" + s.addr)
	counter := &requestCounter{proxy: httputil.NewSingleHostReverseProxy(target)}
	counter.reset()
	proxy := httptest.NewServer(counter)
	defer proxy.Close()

	// The prefix log refuses what is not a day, answers a day to come and
	// one long past with an empty log, and today's holds no user ID.
	for _, d := range []string{"2026-13-01", "yesterday", "2026-03-01T00:00:00Z", "%2B2026-03-01"} {
		if code, _ := getBody(t, "http://"+s.addr+"/pks/v2/prefixlog/"+d); code != http.StatusBadRequest {
			t.Errorf("prefix log of %q: %d, want 400", d, code)
		}
	}
	for _, d := range []string{"9999-12-31", "1970-01-01", time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly)} {
		if code, body := getBody(t, "http://"+s.addr+"/pks/v2/prefixlog/"+d); code != http.StatusOK || body != "" {
			t.Errorf("prefix log of %s: %d %q, want an empty log", d, code, body)
		}
	}
	tenDaysAgo := time.Now().UTC().AddDate(0, 0, -10).Format(time.DateOnly)
	code, body := getBody(t, "http://"+s.addr+"/pks/v2/prefixlog/"+tenDaysAgo)
	lines := strings.Split(strings.TrimSuffix(body, "\r\n"), "\r\n")
	// 5,005 keys fill about 2,890 of 4,096 prefixes.
	if code != http.StatusOK || len(lines) < 2500 || len(lines) > 3300 {
		t.Errorf("prefix log of the load's day: %d, %d lines; want about 2,890", code, len(lines))
	}
	for _, l := range lines {
		if !regexp.MustCompile(`\A[0-9a-f]{3}\z`).MatchString(l) {
			t.Fatalf("prefix log of the load's day has the line %q, want 3 hex digits", l)
		}
	}

	// Five held keys change today: a new user ID each.
	for i, e := range ents {
		if err := e.AddUserId("Changed", "", fmt.Sprintf("changed%d@example.org", i), nil); err != nil {
			t.Fatal(err)
		}
		if code, body := addKeyText(t, s.addr, armored(t, publicKey(t, e))); code != http.StatusOK {
			t.Fatalf("upload of changed key %d: %d %s", i, code, body)
		}
	}

	// The client holds 995 typical keys and the 5, as fingerprints, and
	// last refreshed five days ago.
	var held strings.Builder
	changed := map[string]bool{}
	for _, k := range typical[:995] {
		fmt.Fprintf(&held, "%X\n", k.Fingerprint())
	}
	for _, e := range ents {
		fmt.Fprintf(&held, "%X  # a key that changes\n", e.PrimaryKey.Fingerprint)
		changed[fmt.Sprintf("%X", e.PrimaryKey.Fingerprint)] = true
	}
	heldPath, statePath := filepath.Join(dir, "held.txt"), filepath.Join(dir, "state.json")
	if err := os.WriteFile(heldPath, []byte(held.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	writeState := func(server string, at time.Time) {
		b, _ := json.Marshal(refreshState{Servers: map[string]time.Time{server: at}})
		if err := os.WriteFile(statePath, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fiveDaysAgo := time.Now().AddDate(0, 0, -5)
	writeState(proxy.URL, fiveDaysAgo)
	outPath, metricsPath := filepath.Join(dir, "fetched.asc"), filepath.Join(dir, "refresh.prom")
	cmd := exec.Command(kithBinary(t), "refresh", "--server", proxy.URL, "--keys", heldPath, "--out", outPath,
		"--state", statePath, "--metrics-file", metricsPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kith refresh: %v\n%s", err, stderr.String())
	}
	t.Logf("%s", strings.TrimSpace(stderr.String()))

	others := 0
	for fp := range counter.gets {
		if !changed[fp] {
			others++
		}
	}
	for fp := range changed {
		if counter.gets[fp] != 1 {
			t.Errorf("changed key %s asked for %d times, want once", fp, counter.gets[fp])
		}
	}
	if others*100 >= 995 {
		t.Errorf("%d of the 995 unchanged keys downloaded, want fewer than 1%%", others)
	}
	if counter.logs < 6 || counter.logs > 7 || len(counter.other) != 0 {
		t.Errorf("%d prefix logs asked (want the 6 or 7 days since the last refresh), other requests %q", counter.logs, counter.other)
	}
	fetched, err := pgp.ReadKeys(mustOpen(t, outPath))
	if err != nil || len(fetched) != 5+others {
		t.Fatalf("fetched keys: %d, %v; want %d", len(fetched), err, 5+others)
	}
	for _, k := range fetched {
		fp := fmt.Sprintf("%X", k.Fingerprint())
		if changed[fp] && len(k.Describe().UserIDs) != 2 {
			t.Errorf("changed key %s fetched without its new user ID", fp)
		}
	}
	summary := fmt.Sprintf("1000 keys held, %d daily logs read", counter.logs)
	if !strings.Contains(stderr.String(), summary) || !strings.Contains(stderr.String(), fmt.Sprintf("%d skipped without a download", 995-others)) {
		t.Errorf("summary %q, want %q and the skipped count", stderr.String(), summary)
	}
	prom, err := os.ReadFile(metricsPath)
	if err != nil || !strings.Contains(string(prom), fmt.Sprintf("kith_refresh_keys_skipped %d", 995-others)) {
		t.Errorf("metrics file: %s, %v", prom, err)
	}
	// The state now dates this refresh, by the server's clock.
	st, err := readRefreshState(statePath)
	if err != nil || time.Since(st.Servers[proxy.URL]) > time.Minute || time.Since(st.Servers[proxy.URL]) < -time.Minute {
		t.Errorf("state after the refresh: %+v, %v", st, err)
	}
	// The server counted the prefix logs it answered.
	if code, body := getBody(t, "http://"+s.addr+"/metrics"); code != http.StatusOK ||
		!regexp.MustCompile(`kith_hkp_prefixlog_requests_total\{outcome="served"\} \d+`).MatchString(body) {
		t.Errorf("server metrics: %d, no prefix log count", code)
	}

	// gpg's keyring, holding the old forms of the five and a hundred
	// others, gets the new user IDs the same way.
	home := gpgtest.New(t)
	var old bytes.Buffer
	old.Write(mine.Bytes())
	for _, k := range typical[:100] {
		old.Write(k.Bytes())
	}
	home.Run(old.String(), "--import")
	counter.reset()
	writeState(proxy.URL, fiveDaysAgo)
	cmd = exec.Command(kithBinary(t), "refresh", "--server", proxy.URL, "--state", statePath)
	cmd.Env = home.Env()
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kith refresh into gpg: %v\n%s", err, stderr.String())
	}
	listing := string(home.Run("", "--with-colons", "--list-keys"))
	for i := range ents {
		if !strings.Contains(listing, fmt.Sprintf("changed%d@example.org", i)) {
			t.Errorf("gpg did not get changed key %d's new user ID", i)
		}
	}
	// Of the 100 others, about 0.1 share a changed key's prefix.
	if n := len(counter.gets); n < 5 || n > 10 {
		t.Errorf("the gpg refresh asked for %d keys of 105, want the 5 changed and hardly any other", n)
	}
	t.Logf("gpg: %s", strings.TrimSpace(stderr.String()))
	s.stop(t)
}
