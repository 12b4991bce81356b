package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

// TestKnownHostsPrintsWhatSSHAskedFor: the host's proven key, in the form
// of ssh's %H (NAME, or [NAME]:PORT for another port), from the real API.
func TestKnownHostsPrintsWhatSSHAskedFor(t *testing.T) {
	requireTool(t, "ssh-keygen")
	a := newAPIServer(t)
	key := newSSHKeyPair(t, t.TempDir(), "ssh_host_ed25519_key")
	a.claim("host:git.example.test", key)
	for host, want := range map[string]string{
		"git.example.test":        "git.example.test " + keyOnlyLine(key.pub) + "\n",
		"GIT.example.test":        "GIT.example.test " + keyOnlyLine(key.pub) + "\n",
		"[git.example.test]:2222": "[git.example.test]:2222 " + keyOnlyLine(key.pub) + "\n",
		// Not published, or no host name: nothing, and no failure.
		"other.example.test":   "",
		"127.0.0.1":            "",
		"[127.0.0.1]:22":       "",
		"[git.example.test]:0": "",
		"git.example.test,foo": "",
	} {
		out, errOut, err := kithCmd("known-hosts", "--server", a.srv.URL, host)
		if err != nil || out != want {
			t.Errorf("known-hosts %s: %q, %v (%s); want %q", host, out, err, errOut, want)
		}
	}
}

// TestKnownHostsFailsClosedOnBadAnswers: whatever a server (or whoever
// sits between it and the client) sends that is not plain known_hosts
// lines for the host asked about, nothing is printed and the command
// fails: no other host's key, no marker, no certificate authority.
func TestKnownHostsFailsClosedOnBadAnswers(t *testing.T) {
	requireTool(t, "ssh-keygen")
	key := newSSHKeyPair(t, t.TempDir(), "k")
	good := "git.example.test " + keyOnlyLine(key.pub) + "\n"
	for name, answer := range map[string]func(w http.ResponseWriter){
		"another host's key": func(w http.ResponseWriter) { w.Write([]byte(good + "github.com " + keyOnlyLine(key.pub) + "\n")) },
		"a wildcard pattern": func(w http.ResponseWriter) { w.Write([]byte("* " + keyOnlyLine(key.pub) + "\n")) },
		"a marker": func(w http.ResponseWriter) {
			w.Write([]byte("@cert-authority git.example.test " + keyOnlyLine(key.pub) + "\n"))
		},
		"several patterns": func(w http.ResponseWriter) {
			w.Write([]byte("git.example.test,github.com " + keyOnlyLine(key.pub) + "\n"))
		},
		"options":             func(w http.ResponseWriter) { w.Write([]byte("git.example.test no-pty " + keyOnlyLine(key.pub) + "\n")) },
		"a garbled key":       func(w http.ResponseWriter) { w.Write([]byte(good + "git.example.test ssh-ed25519 AAAA!!\n")) },
		"a server error":      func(w http.ResponseWriter) { w.WriteHeader(500); w.Write([]byte(good)) },
		"a refusal":           func(w http.ResponseWriter) { w.WriteHeader(403) },
		"too large an answer": func(w http.ResponseWriter) { w.Write([]byte(strings.Repeat(good, 1+maxKeysBody/len(good)))) },
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hosts/git.example.test.known_hosts" {
				http.NotFound(w, r)
				return
			}
			answer(w)
		}))
		out, _, err := kithCmd("known-hosts", "--server", srv.URL, "git.example.test")
		if err == nil || out != "" {
			t.Errorf("%s: printed %q, returned %v; want nothing and an error", name, out, err)
		}
		srv.Close()
	}
	// A redirect from https to plain http is not followed.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(good)) }))
	defer plain.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusFound)
	}))
	defer tls.Close()
	saved := keysClient.Transport
	keysClient.Transport = tls.Client().Transport
	defer func() { keysClient.Transport = saved }()
	if out, _, err := kithCmd("known-hosts", "--server", tls.URL, "git.example.test"); err == nil || out != "" {
		t.Errorf("after a redirect to http: printed %q, returned %v", out, err)
	}
	// The same client takes the answer straight from https.
	direct := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(good)) }))
	direct.TLS = tls.TLS
	direct.StartTLS()
	defer direct.Close()
	keysClient.Transport = direct.Client().Transport
	if out, _, err := kithCmd("known-hosts", "--server", direct.URL, "git.example.test"); err != nil || out != good {
		t.Errorf("over https: printed %q, returned %v; want %q", out, err, good)
	}
	for _, args := range [][]string{{"known-hosts", "git.example.test"}, {"known-hosts", "--server", "ftp://x", "git.example.test"}, {"known-hosts", "--server", plain.URL}} {
		if out, _, err := kithCmd(args...); err == nil || out != "" {
			t.Errorf("kith %v: printed %q, returned %v", args, out, err)
		}
	}
}

// TestServePublishesListedHostKeys: kith serve with hosts.names publishes
// a claimed host's key at /hosts/NAME.known_hosts, and refuses a name the
// setting does not list.
func TestServePublishesListedHostKeys(t *testing.T) {
	requireTool(t, "ssh-keygen")
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
