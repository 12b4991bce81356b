package subprocess

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// helperEnv makes the test binary the parent of TestChildDiesWithParent.
const helperEnv = "KITH_SUBPROCESS_HELPER"

// TestChildDiesWithParent runs this test binary as a parent that starts
// sleep with Start, from a goroutine whose locked thread then exits (which
// would fire a naive parent-death signal), and prints the child's pid;
// the parent is then killed with SIGKILL, and the child must die with it.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		parent()
		return
	}
	testkit.Tool(t, "sleep")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	var child, tid int
	if _, err := fmt.Sscanf(line, "child %d thread %d\n", &child, &tid); err != nil {
		t.Fatalf("parent said %q: %v", line, err)
	}
	task := fmt.Sprintf("/proc/%d/task/%d", cmd.Process.Pid, tid)
	testkit.Eventually(t, time.Minute, "the thread that started the child ending", func() bool {
		_, err := os.Stat(task)
		return err != nil
	})
	if !alive(child) {
		t.Fatal("the child died with the thread that started it, before its parent")
	}
	cmd.Process.Kill()
	cmd.Wait()
	testkit.Eventually(t, time.Minute, "the child ending after its parent was killed", func() bool { return !alive(child) })
}

// parent is the helper process: it starts the child, says its pid and
// waits to be killed.
func parent() {
	type started struct {
		cmd *exec.Cmd
		tid int
	}
	var s started
	for s.cmd == nil {
		done := make(chan started)
		go func() {
			runtime.LockOSThread() // exits locked: the runtime ends this thread
			if syscall.Gettid() == syscall.Getpid() {
				// The runtime never ends the main thread; try another.
				done <- started{}
				return
			}
			cmd := exec.Command("sleep", "600")
			if err := Start(cmd, 0); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			done <- started{cmd, syscall.Gettid()}
		}()
		s = <-done
	}
	fmt.Printf("child %d thread %d\n", s.cmd.Process.Pid, s.tid)
	io.Copy(io.Discard, os.Stdin) // until killed: the test never closes it
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && syscall.Kill(pid, 0) == nil
}
