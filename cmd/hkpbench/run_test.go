package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
