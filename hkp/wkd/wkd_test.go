package wkd_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/hkp/wkd"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func wksClient(t testing.TB) string {
	return testkit.AnyTool(t, "gpg-wks-client", "/usr/lib/gnupg/gpg-wks-client", "/usr/libexec/gpg-wks-client")
}

func TestHashIsWhatGPGWKSClientComputes(t *testing.T) {
	bin := wksClient(t)
	for _, addr := range []string{"alice@example.org", "Joe.Doe@Example.ORG", "x+tag@example.org", "ünïcode@example.org"} {
		out, err := exec.Command(bin, "--print-wkd-hash", addr).Output()
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		want, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		local, _, _ := strings.Cut(addr, "@")
		if got := wkd.Hash(local); got != want {
			t.Errorf("%s: %s, gpg-wks-client says %s", addr, got, want)
		}
	}
}

// env is a WKD handler for example.org over a real store, with a helper
// that verifies addresses through the identity service and a real SMTP
// server.
type env struct {
	t    *testing.T
	st   *postgres.Store
	svc  *identity.Service
	smtp *mailtest.Server
	h    http.Handler
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvLimited(t, nil)
}

// newEnvLimited is newEnv whose key lookups count against lookups.
func newEnvLimited(t *testing.T, lookups *ratelimit.Limiter) *env {
	t.Helper()
	e := &env{t: t, st: pgtest.NewStore(t), smtp: mailtest.Start(t, mailtest.Options{})}
	var err error
	e.svc, err = identity.NewService(e.st, &verify.Verifier{Keys: e.st}, identity.ServiceOptions{Server: "Kith <http://test>"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	wkd.NewHandler(e.st, e.st, []string{"example.org"}, lookups, slog.New(slog.DiscardHandler)).Register(mux)
	e.h = mux
	return e
}

// store stores a fresh key with the user IDs and returns it.
func (e *env) store(uids ...string) *pgp.Key {
	e.t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	var ent *openpgp.Entity
	for i, u := range uids {
		n, a, _ := strings.Cut(u, " <")
		a = strings.TrimSuffix(a, ">")
		var err error
		if i == 0 {
			ent, err = openpgp.NewEntity(n, "", a, cfg)
		} else {
			err = ent.AddUserId(n, "", a, cfg)
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
	var b bytes.Buffer
	ent.Serialize(&b)
	k, err := pgp.ParseKey(b.Bytes())
	if err != nil {
		e.t.Fatal(err)
	}
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.AddKey(context.Background(), applied); err != nil {
		e.t.Fatal(err)
	}
	return applied
}

// verifyAddr verifies addr for k by mail.
func (e *env) verifyAddr(k *pgp.Key, addr string) {
	e.t.Helper()
	ctx := context.Background()
	key := identity.PGPFactor(k.Fingerprint())
	sender := &mail.SMTP{Address: e.smtp.Addr, From: "kith@example.org"}
	err := e.svc.RequestEmail(ctx, identity.EmailRequest{Action: identity.EmailVerify, Key: key, Email: identity.EmailFactor(addr),
		Send: func(ctx context.Context, token string) error {
			return sender.Send(ctx, mail.Message{To: addr, Subject: "verify", Body: token + "\n"})
		}})
	if err != nil {
		e.t.Fatal(err)
	}
	token := strings.TrimSpace(e.smtp.Wait(e.t, 30*time.Second).Body)
	if _, err := e.svc.ConfirmEmail(ctx, key, token); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(host, path string) (int, []byte) {
	e.t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.Host = host
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, b
}

func uids(t *testing.T, b []byte) []string {
	t.Helper()
	keys, err := pgp.ReadKeys(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not keys: %v", err)
	}
	var out []string
	for _, k := range keys {
		for _, p := range k.Packets() {
			if p.Tag == pgp.TagUserID {
				out = append(out, string(p.Body))
			}
		}
	}
	return out
}

// TestGPGWKSClientURLsAnswerOnlyVerifiedKeys: the URLs gpg-wks-client
// prints answer the verified key with only the asked address's user ID,
// by the advanced and the direct method; a stranger's key naming the
// same address, unverified addresses and other domains answer 404.
func TestGPGWKSClientURLsAnswerOnlyVerifiedKeys(t *testing.T) {
	bin := wksClient(t)
	e := newEnv(t)
	alice := e.store("Alice <alice@example.org>", "Alice <alice@other.example>", "Alice <alice.smith@example.org>")
	e.store("Mallory <alice@example.org>")
	e.verifyAddr(alice, "alice@example.org")

	out, err := exec.Command(bin, "--print-wkd-url", "alice@example.org").Output()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	code, body := e.get(u.Host, u.RequestURI())
	if code != 200 {
		t.Fatalf("%s: %d %s", u, code, body)
	}
	keys, _ := pgp.ReadKeys(bytes.NewReader(body))
	if len(keys) != 1 || !bytes.Equal(keys[0].Fingerprint(), alice.Fingerprint()) {
		t.Fatalf("%s served %d keys, want only alice's verified one", u, len(keys))
	}
	if got := uids(t, body); len(got) != 1 || got[0] != "Alice <alice@example.org>" {
		t.Errorf("user IDs %q, want only the asked address's", got)
	}
	direct := "/.well-known/openpgpkey/hu/" + wkd.Hash("alice") + "?l=alice"
	if code, body := e.get("example.org", direct); code != 200 || len(uids(t, body)) != 1 {
		t.Errorf("direct method: %d", code)
	}
	for _, c := range []struct{ host, path string }{
		{"openpgpkey.example.org", "/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("alice.smith") + "?l=alice.smith"}, // not verified
		{"openpgpkey.example.org", "/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("alice")},                          // no l=
		{"openpgpkey.example.org", "/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("bob") + "?l=alice"},               // hash of another
		{"openpgpkey.other.example", "/.well-known/openpgpkey/other.example/hu/" + wkd.Hash("alice") + "?l=alice"},         // not a served domain
		{"other.example", direct},
	} {
		if code, _ := e.get(c.host, c.path); code != 404 {
			t.Errorf("%s%s: %d, want 404", c.host, c.path, code)
		}
	}
	for host, path := range map[string]string{
		"openpgpkey.example.org": "/.well-known/openpgpkey/example.org/policy",
		"example.org":            "/.well-known/openpgpkey/policy",
	} {
		if code, _ := e.get(host, path); code != 200 {
			t.Errorf("%s%s: %d", host, path, code)
		}
	}
	if code, _ := e.get("other.example", "/.well-known/openpgpkey/policy"); code != 404 {
		t.Errorf("policy of an unserved domain: %d", code)
	}
}

// TestKeyLookupsAreLimitedPerClient: a key lookup is a lookup by email;
// past the client's budget it answers 429 with Retry-After, while the
// policy files stay free.
func TestKeyLookupsAreLimitedPerClient(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e := newEnvLimited(t, ratelimit.New(1, func() time.Time { return now }))
	path := "/.well-known/openpgpkey/example.org/hu/" + wkd.Hash("alice") + "?l=alice"
	if code, _ := e.get("openpgpkey.example.org", path); code != http.StatusNotFound {
		t.Fatalf("within the budget: %d", code)
	}
	if code, _ := e.get("openpgpkey.example.org", "/.well-known/openpgpkey/example.org/policy"); code != http.StatusOK {
		t.Errorf("policy: %d", code)
	}
	r := httptest.NewRequest("GET", path, nil)
	r.Host = "openpgpkey.example.org"
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
		t.Errorf("past the budget: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}
