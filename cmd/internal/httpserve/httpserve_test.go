package httpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStartGateOpens: the gate answers 503 starting with Retry-After
// until it is opened, then hands every request to the server's handler.
func TestStartGateOpens(t *testing.T) {
	g := &StartGate{}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest("GET", "/pks/lookup?op=stats", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || strings.TrimSpace(rec.Body.String()) != "starting" {
		t.Fatalf("closed gate: %d %q %q", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	g.Open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready") }))
	rec = httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest("GET", "/pks/health", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ready" {
		t.Fatalf("open gate: %d %q", rec.Code, rec.Body.String())
	}
}

type pingFunc func(context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

var errRestarting = errors.New("database restarting")

// TestHealthSaysWhyTheStoreIsUnreachable: ok while the store answers; a
// restart is named, any other failure is "store unreachable".
func TestHealthSaysWhyTheStoreIsUnreachable(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		wantCode int
		wantBody string
	}{
		{"answers", nil, http.StatusOK, "ok\n"},
		{"restarting", fmt.Errorf("ping: %w", errRestarting), http.StatusServiceUnavailable, "ping: database restarting\n"},
		{"down", errors.New("connection refused"), http.StatusServiceUnavailable, "store unreachable\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Health(pingFunc(func(context.Context) error { return tc.err }), errRestarting, slog.New(slog.DiscardHandler))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/pks/health", nil))
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody || rec.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("got %d %q (Cache-Control %q), want %d %q", rec.Code, rec.Body.String(), rec.Header().Get("Cache-Control"), tc.wantCode, tc.wantBody)
			}
		})
	}
}

// TestHandlerCountsRequestsByRouteAndCode: every request is counted
// under the mux pattern that served it, with the status it got;
// requests no route matched count as "unmatched".
func TestHandlerCountsRequestsByRouteAndCode(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pks/lookup", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("op") == "" {
			http.Error(w, "no op", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "found")
	})
	reg := prometheus.NewRegistry()
	h := Handler(mux, pingFunc(func(context.Context) error { return nil }), errRestarting, reg, true, slog.New(slog.DiscardHandler))
	for _, path := range []string{"/pks/lookup?op=get", "/pks/lookup?op=get", "/pks/lookup", "/nowhere", "/pks/health"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`kith_http_requests_total{code="200",route="GET /pks/health"} 1`,
		`kith_http_requests_total{code="200",route="GET /pks/lookup"} 2`,
		`kith_http_requests_total{code="400",route="GET /pks/lookup"} 1`,
		`kith_http_requests_total{code="404",route="unmatched"} 1`,
		`kith_http_request_duration_seconds_count{route="GET /pks/lookup"} 3`,
	} {
		if !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", line, rec.Body.String())
		}
	}
}

// TestHandlerLeavesMetricsToTheirListener: without publicMetrics the
// routes' handler answers /metrics 404, as any unknown path, while the
// Metrics handler of the same registry serves them, counting that 404.
func TestHandlerLeavesMetricsToTheirListener(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := Handler(http.NewServeMux(), pingFunc(func(context.Context) error { return nil }), errRestarting, reg, false, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("public /metrics: %d, want 404", rec.Code)
	}
	rec = httptest.NewRecorder()
	Metrics(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `kith_http_requests_total{code="404",route="unmatched"} 1`; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want+"\n") {
		t.Fatalf("metrics handler: %d, want 200 with %s:\n%s", rec.Code, want, rec.Body.String())
	}
}

// Every response carries the Date of its second, in HTTP's form, once
// formatted per second: a later second gets its own.
func TestResponsesCarryTheirSecondsDate(t *testing.T) {
	h := Handler(http.NewServeMux(), pingFunc(func(context.Context) error { return nil }), errRestarting, prometheus.NewRegistry(), true, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(h)
	defer srv.Close()
	before := time.Now().Truncate(time.Second)
	res, err := http.Get(srv.URL + "/pks/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	date, err := http.ParseTime(res.Header.Get("Date"))
	if err != nil || date.Before(before) || date.After(time.Now()) {
		t.Errorf("Date %q (%v), want a time from %v to now", res.Header.Get("Date"), err, before)
	}

	var d dateCache
	t0 := time.Date(2026, 12, 7, 1, 2, 3, 100, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{t0, "Mon, 07 Dec 2026 00:02:03 GMT"},
		{t0.Add(900 * time.Millisecond), "Mon, 07 Dec 2026 00:02:03 GMT"},
		{t0.Add(time.Second), "Mon, 07 Dec 2026 00:02:04 GMT"},
		{t0.Add(time.Hour), "Mon, 07 Dec 2026 01:02:03 GMT"},
	} {
		if got := d.at(c.at); got != c.want {
			t.Errorf("at %v: %q, want %q", c.at, got, c.want)
		}
	}
}
