// Package subprocess starts child processes that do not outlive the
// process that started them: the embedded PostgreSQL server, and in tests
// sks, sshd and kith binaries. A child started with Start runs in a process
// group of its own and is sent a signal by the kernel when its parent dies,
// however it dies (a panic, a test timeout, kill -9), so that no server is
// left running, holding ports and disk, after a crash.
//
// It does not wait for, stop or restart the child: the caller owns the
// *exec.Cmd as before.
//
// Linux only: it uses the parent-death signal (PR_SET_PDEATHSIG).
package subprocess

import (
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Start starts cmd as Cmd.Start does, in a new process group, with sig
// (SIGKILL if 0) delivered to it when this process dies. It keeps the
// cmd's other SysProcAttr settings (a Credential, for one).
//
// The kernel sends the parent-death signal when the *thread* that forked
// the child ends, not the process; the Go runtime ends a thread when a
// goroutine locked to it exits. Start therefore forks from one thread
// that is locked for the life of the process and does nothing else, so a
// child is signalled when, and only when, this process dies.
func Start(cmd *exec.Cmd, sig syscall.Signal) error {
	if sig == 0 {
		sig = syscall.SIGKILL
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = sig
	done := make(chan error, 1)
	starter() <- start{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return fmt.Errorf("subprocess: start %s: %w", cmd.Path, err)
	}
	return nil
}

// KillGroup sends SIGKILL to the process group of a child started with
// Start (the child and whatever it forked that stayed in its group). A
// child that has not started, or whose group is gone, is no error.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// start is one request to the starter thread.
type start struct {
	cmd  *exec.Cmd
	done chan<- error
}

// starter returns the channel of the one goroutine that starts children.
// It is locked to its thread and never exits, so that thread lives as
// long as the process. This is the package's only state: one thread per
// process is what the kernel's rule asks for.
var starter = sync.OnceValue(func() chan<- start {
	reqs := make(chan start)
	go func() {
		runtime.LockOSThread() // never unlocked: see Start
		for r := range reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return reqs
})
