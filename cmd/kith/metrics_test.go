package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// TestServeMetricsOnlyOnMetricsListen: with metrics_listen, /metrics is
// served there (and nothing else is), and the public listener answers it
// 404; without it, the public listener serves it.
func TestServeMetricsOnlyOnMetricsListen(t *testing.T) {
	metrics := testkit.FreeAddr(t)
	s := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t), "--metrics-listen", metrics)
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	if code, body := getBody(t, "http://"+metrics+"/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `kith_http_requests_total{code="200",route="GET /pks/health"}`) {
		t.Errorf("metrics listener: %d %.200q, want the metrics with the public listener's requests", code, body)
	}
	if code, _ := getBody(t, "http://"+metrics+"/pks/health"); code != http.StatusNotFound {
		t.Errorf("metrics listener answered /pks/health with %d, want 404", code)
	}
	if code, _ := getBody(t, "http://"+s.addr+"/metrics"); code != http.StatusNotFound {
		t.Errorf("public listener answered /metrics with %d, want 404", code)
	}
	s.stop(t)

	s = startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t))
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	if code, body := getBody(t, "http://"+s.addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "kith_http_requests_total") {
		t.Errorf("public /metrics without metrics_listen: %d %.200q", code, body)
	}
	s.stop(t)
}
