package hkp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestStatsReportsKeysSoftwareAndExtras(t *testing.T) {
	ts := newTestServer(t, Options{
		Version: "1.2.3",
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
	if s.Software != "Kith" || s.Version != "1.2.3" || s.Keys != 2 || len(s.Daily) == 0 || s.Daily[0].New != 2 || s.Extra["recon"] == nil {
		t.Errorf("stats %+v", s)
	}

	r = ts.lookup("op=stats")
	if r.code != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %v", r.code, r.header)
	}
	for _, want := range []string{"<td>Kith</td>", "<td>1.2.3</td>", "<td>2</td>", "<h2>recon</h2>", "127.0.0.1:11370 \\u003cok\\u003e"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("stats page lacks %q:\n%s", want, r.body)
		}
	}
}
