package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/recon"
)

// The fields of Hockeypuck's op=stats&options=mr answer that Kith has,
// with their JSON types, as read from Hockeypuck's source (the stats and
// statsPeer structs of src/hockeypuck/server/server.go and LoadStat of
// src/hockeypuck/hkp/sks/stats.go, at commit 1d9b073 of August 2026).
// Left out, as Kith has nothing true to put there: queryConfig,
// pksTargets, hourly; per day Removed, InsertedJitter and RemovedJitter;
// per peer lastRecovery and recoveryStatus, and the raw error strings
// lastIncomingError, lastOutgoingError and lastRecoveryError, which Kith
// never shows (they may name internal addresses; Kith logs them).
var (
	hockeypuckStatsFields = map[string]string{
		"now": "time", "version": "string", "hostname": "string", "nodename": "string",
		"contact": "string", "httpAddr": "string", "reconAddr": "string", "software": "string",
		"total": "number", "peers": "array", "daily": "array",
	}
	hockeypuckPeerFields = map[string]string{
		"name": "string", "httpAddr": "string", "reconAddr": "string", "statsPath": "string",
		"lastIncomingRecon": "time", "lastOutgoingRecon": "time", "reconStatus": "string",
	}
	hockeypuckDailyFields = map[string]string{"Time": "time", "Inserted": "number", "Updated": "number"}
)

// checkJSONFields reports the fields of obj (named what) that are missing
// or whose JSON type is not the one want gives ("time": an RFC 3339
// string).
func checkJSONFields(t *testing.T, what string, obj map[string]any, want map[string]string) {
	t.Helper()
	for name, typ := range want {
		v, ok := obj[name]
		if !ok {
			t.Errorf("%s lacks Hockeypuck's field %q", what, name)
			continue
		}
		var good bool
		switch typ {
		case "string":
			_, good = v.(string)
		case "time":
			s, isString := v.(string)
			_, err := time.Parse(time.RFC3339, s)
			good = isString && err == nil
		case "number":
			_, good = v.(float64)
		case "array":
			_, good = v.([]any)
		}
		if !good {
			t.Errorf("%s field %q is %#v, want a JSON %s", what, name, v, typ)
		}
	}
}

// nothingFetcher is a recon peer's fetcher that fetches nothing.
type nothingFetcher struct{}

func (nothingFetcher) Fetch(context.Context, recon.Peer, [][16]byte) (recon.FetchResult, error) {
	return recon.FetchResult{}, nil
}

// TestServeStatsAsPoolToolsReadThem runs kith serve with the operator's
// names and two recon peers, one answering and one that refuses
// connections: op=stats&options=mr has Hockeypuck's fields with
// Hockeypuck's types; the HTML page shows both peers' states in words and
// neither null nor the refused peer's raw error; and headless Chromium
// lays the page out at desktop and phone widths without sideways
// scrolling (screenshots under KITH_SCREENSHOT_DIR, if set).
func TestServeStatsAsPoolToolsReadThem(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	dir := tempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The answering peer: a recon manager with an empty tree that lists
	// Kith's recon address.
	kithRecon := testkit.FreeAddr(t)
	peerLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := recon.NewManager(recon.ManagerConfig{HTTPPort: 11371, Peers: []recon.Peer{{Address: kithRecon}}},
		recon.NewTree(), nothingFetcher{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go peer.Serve(ctx, peerLn)
	dead := testkit.FreeAddr(t) // nothing listens there

	conf := filepath.Join(dir, "kith.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf(`[[recon.peer]]
address = %q
http = "http://127.0.0.1:11371"
[[recon.peer]]
address = %q
`, peerLn.Addr().String(), dead)), 0o644)
	s := startServe(t, dir, nil, "--database-url", dbURL, "--config", conf, "--recon-listen", kithRecon, "--recon-interval", "1s",
		"--public-url", "https://keys.example.org", "--contact", "0x0123456789ABCDEF", "--nodename", "node-a")
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	base := "http://" + s.addr

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", path, resp.Status, err)
		}
		return string(b)
	}
	var stats map[string]any
	var peers []any
	testkit.Eventually(t, 90*time.Second, "a good round with one peer and failures with the other", func() bool {
		if err := json.Unmarshal([]byte(get("/pks/lookup?op=stats&options=mr")), &stats); err != nil {
			t.Fatal(err)
		}
		peers, _ = stats["peers"].([]any)
		if len(peers) != 2 {
			t.Fatalf("peers: %v", stats["peers"])
		}
		return peers[0].(map[string]any)["reconStatus"] == "OK" && peers[1].(map[string]any)["reconStatus"] == "Failing"
	})
	checkJSONFields(t, "op=stats", stats, hockeypuckStatsFields)
	for i, p := range peers {
		checkJSONFields(t, fmt.Sprintf("peer %d", i), p.(map[string]any), hockeypuckPeerFields)
	}
	daily, _ := stats["daily"].([]any)
	if len(daily) == 0 {
		t.Fatalf("daily: %v", stats["daily"])
	}
	checkJSONFields(t, "day 0", daily[0].(map[string]any), hockeypuckDailyFields)
	_, kithPort, _ := net.SplitHostPort(s.addr)
	_, reconPort, _ := net.SplitHostPort(kithRecon)
	for field, want := range map[string]any{"hostname": "keys.example.org", "nodename": "node-a", "contact": "0x0123456789ABCDEF",
		"software": "Kith", "httpAddr": ":" + kithPort, "reconAddr": ":" + reconPort, "total": 0.0} {
		if stats[field] != want {
			t.Errorf("%s = %#v, want %#v", field, stats[field], want)
		}
	}
	good, failing := peers[0].(map[string]any), peers[1].(map[string]any)
	if good["name"] != peerLn.Addr().String() || good["httpAddr"] != "127.0.0.1:11371" || good["state"] != "ok" || good["last_recon"] == nil {
		t.Errorf("the answering peer: %v", good)
	}
	if !strings.HasPrefix(failing["state"].(string), "failing since ") || failing["last_recon"] != nil || failing["reconAddr"] != dead {
		t.Errorf("the refusing peer: %v", failing)
	}

	page := get("/pks/lookup?op=stats")
	for _, leak := range []string{"null", "refused", "dial", "last_error", "recon:"} {
		if strings.Contains(page, leak) || strings.Contains(get("/pks/lookup?op=stats&options=mr"), leak) {
			t.Errorf("op=stats shows %q:\n%s", leak, page)
		}
	}
	for _, want := range []string{"keys.example.org", "node-a", "0x0123456789ABCDEF", `<span class="badge ok">ok</span>`,
		`<span class="badge failing">failing since `, "Total number of keys: "} {
		if !strings.Contains(page, want) {
			t.Errorf("the stats page lacks %q:\n%s", want, page)
		}
	}
	// The log has what the page leaves out.
	if log := s.stderr.String(); !strings.Contains(log, dead) || !strings.Contains(log, "refused") {
		t.Errorf("the log does not say why %s fails:\n%s", dead, log)
	}

	bctx := chromium(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		tctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		if err := chromedp.Do(tctx, chromedp.EmulateViewport(size.w, size.h), chromedp.Navigate(base+"/pks/lookup?op=stats")); err != nil {
			cancel()
			t.Fatal(err)
		}
		wide, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if wide {
			t.Errorf("the stats page at %s width (%d px) is wider than the screen", size.name, size.w)
		}
		styled, err := chromedp.Run(tctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('header.site')).display`))
		if err != nil || styled != "flex" {
			t.Errorf("the stats page does not wear the site's stylesheet (header display %q, %v)", styled, err)
		}
		shot, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if img, err := png.Decode(bytes.NewReader(shot)); err != nil || img.Bounds().Dx() != int(size.w) {
			t.Fatalf("screenshot at %s width: %v", size.name, err)
		}
		out := os.Getenv("KITH_SCREENSHOT_DIR")
		if out == "" {
			out = t.TempDir()
		}
		f := filepath.Join(out, "stats-"+size.name+".png")
		if err := os.WriteFile(f, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", f)
	}
}

// chromium starts a headless Chromium for t; without one installed it
// skips t (fails it under CI=true).
func chromium(t *testing.T) context.Context {
	t.Helper()
	path := testkit.AnyTool(t, "chromium", "chromium-browser", "google-chrome")
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()))
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
