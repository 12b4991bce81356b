package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// TestVerifyLogFindsTheChangedRecord builds a real log with ssh-keygen
// signatures, verifies it from the server and from an exported file, then
// changes one byte of one stored record and expects exactly that record
// to be reported.
func TestVerifyLogFindsTheChangedRecord(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	a := newAPIServer(t)
	dir := t.TempDir()
	k1, k2, k3 := newSSHKeyPair(t, dir, "one"), newSSHKeyPair(t, dir, "two"), newSSHKeyPair(t, dir, "three")
	a.claim("alice", k1)
	a.add("alice", k2, k1, false) // records 2 and 3
	a.add("alice", k3, k1, true)  // record 4
	a.revoke("alice", k2, k1)     // record 5
	a.integrate()

	out, stderr, err := kithCmd("verify-log", "--server", a.srv.URL)
	if err != nil {
		t.Fatalf("verify-log on a good log: %v\n%s%s", err, out, stderr)
	}
	if !regexp.MustCompile(`^trusting the log key 127\.0\.0\.1:11371/log\+[0-9a-f]{8}\+\S+ on first use\nok: 5 records verified; head 5 [0-9a-f]{64}; checkpoint 5 \S{44}\n$`).MatchString(out) {
		t.Fatalf("verify-log said %q", out)
	}

	// The same from an exported file.
	resp, err := http.Get(a.srv.URL + "/api/v1/log?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	file := filepath.Join(dir, "log.json")
	os.WriteFile(file, export, 0o644)
	if out, _, err := kithCmd("verify-log", "--file", file); err != nil || !strings.HasPrefix(out, "ok: 5 records") {
		t.Fatalf("verify-log --file: %v: %s", err, out)
	}

	for _, tt := range []struct {
		name, column string
		seq          int
		want         []string
	}{
		{"signature byte", "signature", 3, []string{"record 3: FAIL: chain: content hashes", "record 3: FAIL: ssh: "}},
		{"statement byte", "statement", 1, []string{"record 1: FAIL: chain: content hashes", "record 1: FAIL: "}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := pgx.Connect(context.Background(), a.dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			flip := "UPDATE evidence SET " + tt.column + " = set_byte(" + tt.column + ", 40, get_byte(" + tt.column + ", 40) # 1) WHERE seq = $1"
			if _, err := conn.Exec(context.Background(), flip, tt.seq); err != nil {
				t.Fatal(err)
			}
			defer conn.Exec(context.Background(), flip, tt.seq) // flip it back
			out, _, err := kithCmd("verify-log", "--server", a.srv.URL)
			if !errors.Is(err, errLogInvalid) {
				t.Fatalf("verify-log on a changed log: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.HasPrefix(line, "record ") && !strings.HasPrefix(line, "record "+strconv.Itoa(tt.seq)+":") {
					t.Errorf("another record reported: %s", line)
				}
			}
		})
	}
}
