package hkp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// statsPeers are four recon peers, one in each state.
func statsPeers(now time.Time) []PeerStatus {
	return []PeerStatus{
		{Address: "keys.example.net:11370", HTTP: "https://keys.example.net", Enabled: true,
			LastGood: now.Add(-time.Minute), LastOutgoing: now.Add(-time.Minute), LastIncoming: now.Add(-3 * time.Minute),
			LastAttempt: now.Add(-time.Minute), KeysReceived: 12, ElementsReceived: 14, ElementsSent: 3},
		{Address: "10.1.2.3:11370", HTTP: "http://10.1.2.3:11371", Enabled: true,
			LastGood: now.Add(-2 * time.Hour), LastAttempt: now.Add(-time.Minute), FailingSince: time.Date(2026, 12, 6, 14, 5, 0, 0, time.UTC)},
		{Address: "192.0.2.7:11370", Enabled: true},
		{Address: "192.0.2.8:11370", Enabled: false},
	}
}

func TestStatsReportsKeysSoftwareAndExtras(t *testing.T) {
	now := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	ts := newTestServer(t, Options{
		Version:  "1.2.3",
		Hostname: "keys.example.org", Nodename: "node-2", Contact: "0x1234567890ABCDEF",
		HTTPAddr: ":11371", ReconAddr: ":11370",
		Peers: func(context.Context) []PeerStatus { return statsPeers(now) },
		ExtraStats: func(ctx context.Context) map[string]any {
			return map[string]any{"recon": map[string]any{"peers": []string{"127.0.0.1:11370 <ok>"}}}
		},
	})
	ts.mustAdd(armored(t, binaryKey(t, newEntity(t, "Stat One", "s1@example.org", 300)), binaryKey(t, newEntity(t, "Stat Two", "s2@example.org", 301))))

	r := ts.lookup("op=stats&options=mr")
	if r.code != 200 || r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("%d %v", r.code, r.header)
	}
	var s Stats
	if err := json.Unmarshal([]byte(r.body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Software != "Kith" || s.Version != "1.2.3" || s.Keys != 2 || s.Total != 2 || len(s.Daily) == 0 || s.Daily[0].New != 2 ||
		s.Daily[0].Inserted != 2 || s.Daily[0].Time.Format(time.DateOnly) != s.Daily[0].Day || s.Extra["recon"] == nil {
		t.Errorf("stats %+v", s)
	}
	if s.Hostname != "keys.example.org" || s.Nodename != "node-2" || s.Contact != "0x1234567890ABCDEF" || s.HTTPAddr != ":11371" || s.ReconAddr != ":11370" {
		t.Errorf("settings %+v", s)
	}
	want := []struct{ status, state, last, httpAddr string }{
		{"OK", "ok", "2026-12-06T15:59:00Z", "keys.example.net:443"},
		{"Failing", "failing since 2026-12-06 14:05 UTC", "2026-12-06T14:00:00Z", "10.1.2.3:11371"},
		{"Starting", "waiting for the first round", "", ""},
		{"Disabled", "disabled", "", ""},
	}
	if len(s.Peers) != len(want) {
		t.Fatalf("peers %+v", s.Peers)
	}
	for i, w := range want {
		p := s.Peers[i]
		if p.ReconStatus != w.status || p.State != w.state || p.LastRecon != w.last || p.HTTPAddr != w.httpAddr || p.StatsPath != "/pks/lookup?op=stats" {
			t.Errorf("peer %d: %+v, want %+v", i, p, w)
		}
	}
	if p := s.Peers[0]; !p.LastOutgoingRecon.Equal(now.Add(-time.Minute)) || !p.LastIncomingRecon.Equal(now.Add(-3*time.Minute)) || p.KeysReceived != 12 {
		t.Errorf("peer 0: %+v", p)
	}

	r = ts.lookup("op=stats")
	if r.code != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %v", r.code, r.header)
	}
	for _, want := range []string{
		`<link rel="stylesheet" href="/static/kith.css">`, `<header class="site">`,
		"<td>Kith</td>", "<td>1.2.3</td>", "Total number of keys: <strong id=\"total\">2</strong>",
		`<td class="value">keys.example.org</td>`, `<td class="value">node-2</td>`,
		`<a href="/pks/lookup?op=index&amp;fingerprint=on&amp;search=0x1234567890ABCDEF">0x1234567890ABCDEF</a>`,
		`<span class="value mono">keys.example.net:11370</span> <a href="https://keys.example.net/pks/lookup?op=stats">statistics</a>`,
		"2026-12-06 15:59 UTC", "12 received, 3 sent",
		`<span class="badge ok">ok</span>`, `<span class="badge failing">failing since 2026-12-06 14:05 UTC</span>`,
		`<span class="badge waiting">waiting for the first round</span>`, `<span class="badge disabled">disabled</span>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("stats page lacks %q:\n%s", want, r.body)
		}
	}
	// The extras are for programs; the page shows no JSON.
	for _, unwanted := range []string{"null", "127.0.0.1:11370 &lt;ok&gt;", "<pre>"} {
		if strings.Contains(r.body, unwanted) {
			t.Errorf("stats page shows %q:\n%s", unwanted, r.body)
		}
	}
}

// TestStatsWithoutPeersOrSettings: a server with no recon, no contact and
// no node name answers an empty list of peers, never null, and says so
// on the page.
func TestStatsWithoutPeersOrSettings(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.lookup("op=stats&options=mr")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["peers"]) != "[]" || string(raw["daily"]) == "null" || raw["extra"] != nil || string(raw["total"]) != "0" {
		t.Errorf("stats without peers:\n%s", r.body)
	}
	r = ts.lookup("op=stats")
	for _, want := range []string{"No recon peers are configured.", "<span class=\"muted\">not given</span>", "<span class=\"muted\">off</span>"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("stats page lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "null") {
		t.Errorf("stats page shows null:\n%s", r.body)
	}
}
