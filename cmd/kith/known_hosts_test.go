package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// TestServePublishesListedHostKeys: kith serve with hosts.names publishes
// a claimed host's key at /hosts/NAME.known_hosts, and refuses a name the
// setting does not list.
func TestServePublishesListedHostKeys(t *testing.T) {
	testkit.Tool(t, "ssh-keygen")
	s := startServe(t, tempDir(t), nil, "--database-url", pgtest.NewDatabase(t), "--hosts-names", "git.example.org,*.lab.example.org")
	s.waitHealth(t, http.StatusOK, 30*time.Second)
	base := "http://" + s.addr
	key := newSSHKeyPair(t, t.TempDir(), "ssh_host_ed25519_key")
	if out, errOut, err := kithCmd("id", "claim", "host:github.com", "--ssh-key", key.path, "--server", base); err == nil || !strings.Contains(errOut+err.Error(), "host_not_allowed") {
		t.Fatalf("claim of an unlisted host: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := kithCmd("id", "claim", "host:a.lab.example.org", "--ssh-key", key.path, "--server", base); err != nil {
		t.Fatalf("claim: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err := kithCmd("known-hosts", "--server", base, "a.lab.example.org")
	if want := "a.lab.example.org " + keyOnlyLine(key.pub) + "\n"; err != nil || out != want {
		t.Fatalf("known-hosts: %q, %v (%s); want %q", out, err, errOut, want)
	}
	s.stop(t)
}
