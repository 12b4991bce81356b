// Package testkit holds the helpers every Kith test package needs and
// none owns: the check for an installed tool (skip where it is missing,
// fail under CI=true, where the real thing must be tested), waiting on a
// condition instead of a sleep, free ports for servers that must be told
// theirs, system users and ssh-agents of a test's own, and the shared fixtures. It is imported by tests and
// test-support packages (pgtest, skstest, gpgtest) only.
//
// It does not start servers: PostgreSQL is package pgtest's, SKS package
// skstest's, GnuPG homes package gpgtest's.
package testkit

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CI reports whether the tests run in CI (CI=true), where a missing tool
// or fixture fails a test instead of skipping it.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips t because a prerequisite is missing, or fails it under
// CI=true. The message says what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true and "+format, args...)
	}
	t.Skipf(format, args...)
}

// Tool returns the path of the first of names when every one of them is
// installed; when one is missing it skips t (fails it under CI=true).
func Tool(t testing.TB, names ...string) string {
	t.Helper()
	var first string
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			Missing(t, "%s not installed", name)
		}
		if i == 0 {
			first = p
		}
	}
	return first
}

// AnyTool returns the path of the first of names that is installed, for a
// tool known under several names or paths (chromium, chromium-browser);
// when none is, it skips t (fails it under CI=true).
func AnyTool(t testing.TB, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, "none of %v installed", names)
	return ""
}

// File returns the contents of a fixture installed on the machine (a
// keyring of a system package, say); when it is missing it skips t (fails
// it under CI=true).
func File(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		Missing(t, "%s missing: %v", path, err)
	}
	return b
}

// DebianKeyring is the debian-keyring package's keyring: about a
// thousand developers' keys with real signatures, RSA and ECC, old and
// new. Read it with File.
const DebianKeyring = "/usr/share/keyrings/debian-keyring.gpg"

// Eventually waits until cond holds, failing t with what if it does not
// within d. Choose d generous enough for a loaded machine: it bounds a
// wait on a condition, it does not time anything.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(d, cond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}

// Poll calls cond until it holds or within has passed, and reports
// whether it held: Eventually for callers that report the failure
// themselves (or may not fail the test from their goroutine). The wait
// between calls grows from 1 ms to 100 ms.
func Poll(within time.Duration, cond func() bool) bool {
	return poll(within, time.Millisecond, 100*time.Millisecond, cond)
}

// PollEvery is Poll with a fixed wait between calls, for a condition that
// costs its server something to check (a lookup of many keys, say).
func PollEvery(within, every time.Duration, cond func() bool) bool {
	return poll(within, every, every, cond)
}

func poll(within, first, most time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	wait := first
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, most)
	}
	return true
}

// Root skips t unless the tests run as root (fails it under CI=true, where
// they do); why says what needs root.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root %s", why)
	}
}

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server that must be told its port before it starts (sshd, sks, a kith
// binary). A server the test runs in-process listens on port 0 instead.
//
// The port is drawn at random from below the kernel's ephemeral range
// (ip_local_port_range), never from it: a port the kernel handed out for
// a moment is the one it hands out next, for another test's port-0
// listener or an outgoing connection's source port, and on a busy machine
// one of those takes it before the server binds ("address already in
// use"). Below that range only another FreePort can pick the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		port := freePortFloor + rand.IntN(low-freePortFloor)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatalf("no free loopback port in [%d, %d) after 200 tries", freePortFloor, low)
	return 0
}

// freePortFloor is the lowest port FreePort draws: above the well-known
// and commonly configured ports (PostgreSQL's 5432, SKS's 11370/11371).
const freePortFloor = 12000

// ephemeralLow returns the first port of the kernel's ephemeral range, or
// Linux's default 32768 when it cannot be read or leaves no room below.
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < freePortFloor+1000 {
		return linuxDefault
	}
	return low
}

// FreeAddr is FreePort as a "127.0.0.1:PORT" address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// SyncBuffer is a bytes.Buffer that a logger or a child process's output
// and the test reading it may share across goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
