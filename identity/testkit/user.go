package testkit

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"os/user"
	"testing"
)

// SystemUser makes a system user (and its group of the same name) of
// t's own, with no home and no login shell, and deletes both when t ends:
// for tests of what a process running as some other unprivileged user
// (a service's user) can and cannot do. It needs root (see Root).
func SystemUser(t testing.TB) *user.User {
	t.Helper()
	Root(t, "to make a user")
	useradd := Tool(t, "useradd")
	userdel := Tool(t, "userdel")
	name := fmt.Sprintf("kitht%08x", rand.Uint32())
	if out, err := exec.Command(useradd, "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(userdel, name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
