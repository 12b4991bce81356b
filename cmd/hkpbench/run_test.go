package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunRefusesNonLoopbackTargets(t *testing.T) {
	for _, u := range []string{
		"http://192.0.2.1/pks/lookup",
		"http://example.org/",
		"https://127.0.0.1/",
		"http://[2001:db8::1]/",
		"ftp://127.0.0.1/",
	} {
		if err := checkLoopbackURL(u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:11371/pks/lookup?op=stats", "http://[::1]:8080/", "http://localhost/"} {
		if err := checkLoopbackURL(u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
}

func TestRunMeasuresRequestsAndStopsAtCount(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "-c", "4", "-d", "5s", "-n", "200", "-warmup", "0",
		"-url", srv.URL + "/a", "-url", srv.URL + "/missing"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"requests 200, errors 0", "status codes: 200: ", ", 404: ", "latency p50 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The wire client reads every framing net/http's server writes: a
// Content-Length body, a chunked one (a handler that flushes), an answer
// with Connection: close, and a POST's answer; it counts each body's
// bytes and reuses one connection while the server keeps it open.
func TestWireClientReadsEveryFraming(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("hello"))
		case "/chunked":
			w.Write([]byte(strings.Repeat("a", 3000)))
			w.(http.Flusher).Flush()
			w.Write([]byte(strings.Repeat("b", 3000)))
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/post":
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &wireConn{timeout: 10 * time.Second}
	for _, tc := range []struct {
		path       string
		body       []byte
		status     int
		n          int64
		totalConns int32
	}{
		{"/length", nil, 200, 5, 1},
		{"/chunked", nil, 200, 6000, 1},
		{"/missing", nil, 404, int64(len("404 page not found\n")), 1},
		{"/post", []byte("keytext=x"), 201, 9, 1},
		{"/close", nil, 200, 3, 1},
		{"/length", nil, 200, 5, 2},
	} {
		host, req, err := newWireRequest(srv.URL+tc.path, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		c.host = host
		status, n, err := c.do(req)
		if err != nil || status != tc.status || n != tc.n {
			t.Errorf("%s: status %d, %d bytes, %v; want %d, %d bytes", tc.path, status, n, err, tc.status, tc.n)
		}
		if got := conns.Load(); got != tc.totalConns {
			t.Errorf("after %s: %d connections, want %d", tc.path, got, tc.totalConns)
		}
	}
}
