package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// TestServeAnswersStartingWhileTheStoreStarts: while the store is not
// up yet (here a database that accepts connections and never answers, as
// one does while initdb runs), /pks/health answers 503 "starting" at once
// instead of hanging, and SIGINT still ends it.
func TestServeAnswersStartingWhileTheStoreStarts(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held <- c // never answered
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	s := startServe(t, tempDir(t), nil, "--database-url", "postgres://kith@"+silent.Addr().String()+"/kith?connect_timeout=600")
	var body string
	client := &http.Client{Timeout: 5 * time.Second}
	if !testkit.PollEvery(30*time.Second, 20*time.Millisecond, func() bool {
		resp, err := client.Get("http://" + s.addr + "/pks/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = resp.Status + " " + strings.TrimSpace(string(b))
		return resp.StatusCode == http.StatusServiceUnavailable
	}) {
		t.Fatalf("no 503 from /pks/health while the store starts (last: %q)\n%s", body, s.stderr.String())
	}
	if body != "503 Service Unavailable starting" {
		t.Errorf("health while starting: %q", body)
	}
	// SIGINT during the start ends the process too.
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("kith serve did not stop within 60 s of SIGINT while starting:\n%s", s.stderr.String())
	}
}
