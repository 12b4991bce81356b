package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/web/api/client"
)

// TestKnownHostsInTheFormSSHAskedFor: the host's proven key, in the form
// of ssh's %H (NAME, or [NAME]:PORT for another port), from the real API;
// an unknown host gets nothing, and an address or pattern is no host.
func TestKnownHostsInTheFormSSHAskedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	key := u.sshKey(t.TempDir(), "ssh_host_ed25519_key")
	if _, err := c.Claim(ctx, "host:git.example.test", key); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"git.example.test":        "git.example.test " + key.Pub + "\n",
		"GIT.example.test":        "GIT.example.test " + key.Pub + "\n",
		"[git.example.test]:2222": "[git.example.test]:2222 " + key.Pub + "\n",
		"other.example.test":      "",
	} {
		out, err := c.KnownHosts(ctx, host)
		if err != nil || string(out) != want {
			t.Errorf("known hosts of %s: %q, %v; want %q", host, out, err, want)
		}
	}
	for _, host := range []string{"127.0.0.1", "[127.0.0.1]:22", "[git.example.test]:0", "git.example.test,foo"} {
		if out, err := c.KnownHosts(ctx, host); !errors.Is(err, client.ErrNotHostName) || out != nil {
			t.Errorf("known hosts of %s: %q, %v; want ErrNotHostName", host, out, err)
		}
	}
}

// TestKnownHostsFailsClosedOnBadAnswers: whatever a server (or whoever
// sits between it and the client) sends that is not plain known_hosts
// lines for the host asked about is an error and no lines: no other
// host's key, no marker, no certificate authority.
func TestKnownHostsFailsClosedOnBadAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUser(t)
	key := u.sshKey(t.TempDir(), "k").Pub
	good := "git.example.test " + key + "\n"
	for name, answer := range map[string]func(w http.ResponseWriter){
		"another host's key":  func(w http.ResponseWriter) { w.Write([]byte(good + "github.com " + key + "\n")) },
		"a wildcard pattern":  func(w http.ResponseWriter) { w.Write([]byte("* " + key + "\n")) },
		"a marker":            func(w http.ResponseWriter) { w.Write([]byte("@cert-authority git.example.test " + key + "\n")) },
		"several patterns":    func(w http.ResponseWriter) { w.Write([]byte("git.example.test,github.com " + key + "\n")) },
		"options":             func(w http.ResponseWriter) { w.Write([]byte("git.example.test no-pty " + key + "\n")) },
		"a garbled key":       func(w http.ResponseWriter) { w.Write([]byte(good + "git.example.test ssh-ed25519 AAAA!!\n")) },
		"a server error":      func(w http.ResponseWriter) { w.WriteHeader(500); w.Write([]byte(good)) },
		"a refusal":           func(w http.ResponseWriter) { w.WriteHeader(403) },
		"too large an answer": func(w http.ResponseWriter) { w.Write([]byte(strings.Repeat(good, 1+client.MaxTextBody/len(good)))) },
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hosts/git.example.test.known_hosts" {
				http.NotFound(w, r)
				return
			}
			answer(w)
		}))
		c, err := client.New(srv.URL, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := c.KnownHosts(ctx, "git.example.test"); err == nil || out != nil {
			t.Errorf("%s: %q, %v; want nothing and an error", name, out, err)
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
	c, err := client.New(tls.URL, client.Options{Transport: tls.Client().Transport})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.KnownHosts(ctx, "git.example.test"); err == nil || out != nil {
		t.Errorf("after a redirect to http: %q, %v", out, err)
	}
	// The same client takes the answer straight from https.
	direct := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(good)) }))
	direct.TLS = tls.TLS
	direct.StartTLS()
	defer direct.Close()
	c, err = client.New(direct.URL, client.Options{Transport: direct.Client().Transport})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.KnownHosts(ctx, "git.example.test"); err != nil || string(out) != good {
		t.Errorf("over https: %q, %v; want %q", out, err, good)
	}
}
