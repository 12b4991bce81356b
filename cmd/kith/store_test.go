package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreCommandsCreateNothing: each command that works on a server's
// store, run where there is none (an empty directory, no database URL),
// stops non-zero with one line that names the directory it looked in and
// how to name the right one, and creates nothing: no data directory, no
// cluster, no dump directory.
func TestStoreCommandsCreateNothing(t *testing.T) {
	keys := writeTypicalDump(t, 1, 1)
	for _, args := range [][]string{
		{"log-key"},
		{"load", keys},
		{"dump", "--dir", "out"},
		{"repair"},
		{"repair", "--dry-run"},
		{"block", "list"},
		{"log-key", "--data-dir", "elsewhere/kith-data"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(kithBinary(t), args...)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			var out, errb syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			if err == nil {
				t.Fatalf("exit 0 without a store; printed %q", out.String())
			}
			msg := errb.String()
			want := filepath.Join(dir, "kith-data")
			if len(args) > 1 && args[1] == "--data-dir" {
				want = filepath.Join(dir, args[2])
			}
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "no Kith store in "+want+" ") ||
				!strings.Contains(msg, "--data-dir") || !strings.Contains(msg, "KITH_DATA_DIR") || !strings.Contains(msg, "--database-url") {
				t.Errorf("stderr %q: want one line naming %s and how to name the right store", msg, want)
			}
			if out.String() != "" {
				t.Errorf("printed %q", out.String())
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("left %v in the directory it ran in", left)
			}
		})
	}
}

// TestLogKeyReadsTheStoreServeMade: once kith serve has made the store,
// kith log-key run in the same directory (no server running) prints the
// key the server served.
func TestLogKeyReadsTheStoreServeMade(t *testing.T) {
	requirePostgresBinaries(t)
	dir := tempDir(t)
	s := startServe(t, dir, nil)
	s.waitHealth(t, http.StatusOK, 60*time.Second)
	_, served := getBody(t, "http://"+s.addr+"/log/key")
	s.stop(t)
	cmd := exec.Command(kithBinary(t), "log-key", "--listen", s.addr)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	printed, err := cmd.Output()
	if err != nil || string(printed) != served {
		t.Fatalf("kith log-key in the server's directory: %q (%v), /log/key served %q", printed, err, served)
	}
}
