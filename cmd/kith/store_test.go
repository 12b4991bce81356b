package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
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
			var out, errb testkit.SyncBuffer
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

// TestRootStoreCommandLeavesTheServiceCluster: a store made by kith
// running as a system user of its own (as the README's unit runs it)
// still belongs to that user after root ran store commands on it while
// it was stopped, and that user's kith starts it again. Root's kith ran
// the cluster as its owner, not as postgres_user (postgres by default).
func TestRootStoreCommandLeavesTheServiceCluster(t *testing.T) {
	requirePostgresBinaries(t)
	runuser := testkit.Tool(t, "runuser")
	u := testkit.SystemUser(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base := tempDir(t)
	if err := os.Chown(base, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "kith-data")
	kith := func(asUser bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(kithBinary(t), args...)
		if asUser {
			cmd = exec.Command(runuser, append([]string{"-u", u.Username, "--", kithBinary(t)}, args...)...)
		}
		cmd.Dir = base
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base}
		var out, errb testkit.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kith %s (as %s): %v\n%s", strings.Join(args, " "), map[bool]string{true: u.Username, false: "root"}[asUser], err, errb.String())
		}
		return out.String()
	}
	ownedByUser := func(when string) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(data, "postgres"), &st); err != nil || st.Uid != uint32(uid) {
			t.Fatalf("%s: the cluster belongs to uid %d (%v), want %s's %d", when, st.Uid, err, u.Username, uid)
		}
	}

	kith(true, "migrate", "--data-dir", data)
	key := kith(true, "log-key", "--data-dir", data)
	ownedByUser("made by its user")

	if got := kith(false, "log-key", "--data-dir", data); got != key {
		t.Errorf("root's kith log-key printed %q, the user's %q", got, key)
	}
	kith(false, "load", "--data-dir", data, writeTypicalDump(t, 1, 1))
	ownedByUser("after root's log-key and load")

	if got := kith(true, "log-key", "--data-dir", data); got != key {
		t.Errorf("the user's kith log-key after root's commands printed %q, want %q", got, key)
	}
}
