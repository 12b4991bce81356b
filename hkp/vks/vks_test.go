package vks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const mailWait = 30 * time.Second

// env is a VKS handler on a real store and identity service, mailing
// through a real SMTP server, behind a loopback HTTP server.
type env struct {
	t    *testing.T
	st   *postgres.Store
	svc  *identity.Service
	smtp *mailtest.Server
	url  string

	mu    sync.Mutex
	clock time.Time
}

type envOptions struct {
	perMinute int
	mailer    mail.Sender
	// uploadsPerMinute and lookupsPerMinute: the shared budgets (zero:
	// none).
	uploadsPerMinute, lookupsPerMinute int
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, st: pgtest.NewStore(t), smtp: mailtest.Start(t, mailtest.Options{}), clock: time.Now()}
	now := func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.clock }
	svc, err := identity.NewService(e.st, &verify.Verifier{Keys: e.st}, identity.ServiceOptions{Server: "Kith <http://test>", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	mailer := o.mailer
	if mailer == nil {
		mailer = &mail.SMTP{Address: e.smtp.Addr, From: "kith@keys.example.org"}
	}
	if o.perMinute == 0 {
		o.perMinute = -1
	}
	limit := func(n int) *ratelimit.Limiter {
		if n == 0 {
			return nil
		}
		return ratelimit.New(n, now)
	}
	ks := keys.NewService(e.st, keys.Options{Policy: pgp.DefaultPolicy(), Identities: svc, Logger: slog.New(slog.DiscardHandler)})
	h, err := vks.NewHandler(e.st, ks, e.st, svc, vks.Options{PublicURL: srv.URL, Server: "Kith <" + srv.URL + ">",
		TokenKey: bytes.Repeat([]byte{7}, 32), Mailer: mailer, RequestsPerMinute: o.perMinute, Now: now,
		UploadLimit: limit(o.uploadsPerMinute), EmailLookupLimit: limit(o.lookupsPerMinute), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(mux)
	return e
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clock = e.clock.Add(d)
}

// newKey returns an armored fresh key with the given user IDs
// ("Name <addr>").
func newKey(t *testing.T, uids ...string) string {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	split := func(u string) (string, string) {
		n, a, _ := strings.Cut(u, " <")
		return n, strings.TrimSuffix(a, ">")
	}
	n, a := split(uids[0])
	ent, err := openpgp.NewEntity(n, "", a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uids[1:] {
		n, a := split(u)
		if err := ent.AddUserId(n, "", a, cfg); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	w, _ := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	if err := ent.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.String()
}

func (e *env) do(method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) upload(key string) vks.Response {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"keytext": key})
	code, out := e.do("POST", "/vks/v1/upload", string(body))
	if code != 200 {
		e.t.Fatalf("upload: %d %s", code, out)
	}
	var r vks.Response
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) request(kind, token string, addrs ...string) (int, string) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"token": token, "addresses": addrs})
	return e.do("POST", "/vks/v1/request-"+kind, string(body))
}

var linkRE = regexp.MustCompile(`http://\S+/email/confirm/\S+`)

// link waits for the next mail and returns the link in it.
func (e *env) link(to string) string {
	e.t.Helper()
	m := e.smtp.Wait(e.t, mailWait)
	if len(m.To) != 1 || m.To[0] != to {
		e.t.Fatalf("mail to %v, want %s", m.To, to)
	}
	l := linkRE.FindString(m.Body)
	if l == "" {
		e.t.Fatalf("no link in the mail:\n%s", m.Body)
	}
	return strings.TrimPrefix(l, e.url)
}

// follow follows a mailed link as the page it opens does (package web
// serves that page; here the service is called directly).
func (e *env) follow(link string) (identity.EmailConfirmation, error) {
	e.t.Helper()
	parts := strings.Split(strings.TrimPrefix(link, "/email/confirm/"), "/")
	if len(parts) != 2 {
		e.t.Fatalf("not a confirm link: %s", link)
	}
	key, err := identity.ParsePGPFingerprint(parts[0])
	if err != nil {
		return identity.EmailConfirmation{}, err
	}
	return e.svc.ConfirmEmail(context.Background(), key, parts[1])
}

// userIDs returns the user IDs of the armored keys in an answer.
func userIDs(t *testing.T, armored string) []string {
	t.Helper()
	keys, err := pgp.ReadKeys(strings.NewReader(armored))
	if err != nil {
		t.Fatalf("answer is not keys: %v\n%s", err, armored)
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

func (e *env) records() int {
	e.t.Helper()
	recs, err := e.st.Log(context.Background(), 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(recs)
}

func TestVerifyFlowServesOnlyVerifiedAddresses(t *testing.T) {
	e := newEnv(t, envOptions{})
	key := newKey(t, "Alice <alice@example.org>", "Alice at work <alice@work.example>")
	r := e.upload(key)
	if r.Status["alice@example.org"] != vks.StatusUnpublished || r.Status["alice@work.example"] != vks.StatusUnpublished || r.Token == "" {
		t.Fatalf("upload answer %+v", r)
	}
	if code, _ := e.do("GET", "/vks/v1/by-email/alice@example.org", ""); code != 404 {
		t.Errorf("by-email before verification: %d", code)
	}
	code, body := e.do("GET", "/vks/v1/by-fingerprint/"+r.KeyFpr, "")
	if code != 200 || len(userIDs(t, body)) != 0 {
		t.Errorf("by-fingerprint before verification: %d, user IDs %q", code, userIDs(t, body))
	}

	code, body = e.request("verify", r.Token, "alice@example.org")
	if code != 200 || !strings.Contains(body, `"alice@example.org":"pending"`) {
		t.Fatalf("request-verify: %d %s", code, body)
	}
	link := e.link("alice@example.org")
	if r := e.upload(key); r.Status["alice@example.org"] != vks.StatusPending || r.Status["alice@work.example"] != vks.StatusUnpublished {
		t.Errorf("status while the mail is out %+v", r.Status)
	}
	if c, err := e.follow(link); err != nil || c.Action != identity.EmailVerify || c.Email.Value != "alice@example.org" {
		t.Fatalf("follow: %+v %v", c, err)
	}
	code, body = e.do("GET", "/vks/v1/by-email/Alice@Example.org", "")
	if code != 200 {
		t.Fatalf("by-email after verification: %d %s", code, body)
	}
	if got := userIDs(t, body); len(got) != 1 || got[0] != "Alice <alice@example.org>" {
		t.Errorf("by-email user IDs %q, want only the verified one", got)
	}
	for _, path := range []string{"/vks/v1/by-fingerprint/" + r.KeyFpr, "/vks/v1/by-keyid/" + r.KeyFpr[24:]} {
		code, body := e.do("GET", path, "")
		if got := userIDs(t, body); code != 200 || len(got) != 1 || got[0] != "Alice <alice@example.org>" {
			t.Errorf("%s: %d, user IDs %q", path, code, got)
		}
	}
	if r := e.upload(key); r.Status["alice@example.org"] != vks.StatusPublished || r.Status["alice@work.example"] != vks.StatusUnpublished {
		t.Errorf("status after verification %+v", r.Status)
	}
	if code, _ := e.do("GET", "/vks/v1/by-email/alice@work.example", ""); code != 404 {
		t.Errorf("the unverified address answers: %d", code)
	}

	// Withdraw.
	if code, body := e.request("withdraw", r.Token, "alice@example.org"); code != 200 {
		t.Fatalf("request-withdraw: %d %s", code, body)
	}
	link = e.link("alice@example.org")
	if c, err := e.follow(link); err != nil || c.Action != identity.EmailWithdraw {
		t.Fatalf("withdraw: %+v %v", c, err)
	}
	if code, _ := e.do("GET", "/vks/v1/by-email/alice@example.org", ""); code != 404 {
		t.Errorf("by-email after withdrawal: %d", code)
	}
}

// TestAStrangersKeyIsNotServedForAVerifiedAddress: a key naming someone
// else's address is never served by email, even once the real one is.
func TestAStrangersKeyIsNotServedForAVerifiedAddress(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := e.upload(newKey(t, "Alice <ceo@example.org>"))
	mallory := e.upload(newKey(t, "The CEO <ceo@example.org>"))
	e.request("verify", alice.Token, "ceo@example.org")
	if _, err := e.follow(e.link("ceo@example.org")); err != nil {
		t.Fatal(err)
	}
	code, body := e.do("GET", "/vks/v1/by-email/ceo@example.org", "")
	if code != 200 {
		t.Fatal(code)
	}
	keys, _ := pgp.ReadKeys(strings.NewReader(body))
	if len(keys) != 1 || identity.PGPFactor(keys[0].Fingerprint()).Value != alice.KeyFpr {
		t.Errorf("by-email served %d keys; want only %s, not the stranger's %s", len(keys), alice.KeyFpr, mallory.KeyFpr)
	}
}

func TestBadLinks(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	b := e.upload(newKey(t, "Bob <bob@example.org>"))
	e.request("verify", a.Token, "alice@example.org")
	link := e.link("alice@example.org")
	before := e.records()

	// Unknown token.
	if _, err := e.follow("/email/confirm/" + a.KeyFpr + "/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); identity.CodeOf(err) != identity.CodeUnknownToken {
		t.Errorf("unknown token: %v", err)
	}
	// The link with another key's fingerprint.
	other := strings.Replace(link, a.KeyFpr, b.KeyFpr, 1)
	if _, err := e.follow(other); identity.CodeOf(err) != identity.CodeWrongToken || !strings.Contains(err.Error(), "not for key") {
		t.Errorf("link for another key: %v", err)
	}
	if n := e.records(); n != before {
		t.Errorf("bad links appended %d records", n-before)
	}
	// The real link still works once, then no more.
	if _, err := e.follow(link); err != nil {
		t.Fatalf("the real link: %v", err)
	}
	if _, err := e.follow(link); identity.CodeOf(err) != identity.CodeTokenUsed {
		t.Errorf("reused link: %v", err)
	}
	if n := e.records(); n != before+1 {
		t.Errorf("%d records appended, want 1", n-before)
	}
	if code, _ := e.do("GET", "/vks/v1/by-email/bob@example.org", ""); code != 404 {
		t.Errorf("bob's address answers: %d", code)
	}
}

func TestExpiredLink(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	e.request("verify", a.Token, "alice@example.org")
	link := e.link("alice@example.org")
	e.advance(identity.EmailTokenTTL + time.Minute)
	before := e.records()
	if _, err := e.follow(link); identity.CodeOf(err) != identity.CodeTokenExpired {
		t.Errorf("expired link: %v", err)
	}
	if e.records() != before {
		t.Error("an expired link appended a record")
	}
}

func TestRequestVerifyRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"address not in the key", `{"token":"` + a.Token + `","addresses":["ceo@example.org"]}`, 400},
		{"no addresses", `{"token":"` + a.Token + `","addresses":[]}`, 400},
		{"bad token", `{"token":"AAAA","addresses":["alice@example.org"]}`, 400},
		{"forged token", `{"token":"` + a.Token[:len(a.Token)-2] + `AA","addresses":["alice@example.org"]}`, 400},
		{"not an address", `{"token":"` + a.Token + `","addresses":["<script>"]}`, 400},
		{"not JSON", `{"token":`, 400},
		{"too many addresses", `{"token":"` + a.Token + `","addresses":["a@b.c","a@b.d","a@b.e","a@b.f","a@b.g","a@b.h","a@b.i","a@b.j","a@b.k","a@b.l","a@b.m"]}`, 400},
	} {
		code, body := e.do("POST", "/vks/v1/request-verify", tc.body)
		if code != tc.code || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}
	e.advance(vks.UploadTokenTTL + time.Minute)
	if code, body := e.request("verify", a.Token, "alice@example.org"); code != 400 || !strings.Contains(body, "expired") {
		t.Errorf("expired upload token: %d %s", code, body)
	}
	if n := e.smtp.Pending(); n != 0 {
		t.Errorf("%d mails sent by refused requests", n)
	}
}

func TestLookupRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	for path, want := range map[string]int{
		"/vks/v1/by-fingerprint/0x" + strings.Repeat("A", 40): 400,
		"/vks/v1/by-fingerprint/" + strings.Repeat("a", 40):   400,
		"/vks/v1/by-fingerprint/" + strings.Repeat("A", 40):   404,
		"/vks/v1/by-keyid/" + strings.Repeat("A", 15):         400,
		"/vks/v1/by-keyid/" + strings.Repeat("A", 16):         404,
		"/vks/v1/by-email/not-an-address":                     400,
		"/vks/v1/by-email/nobody@example.org":                 404,
	} {
		if code, _ := e.do("GET", path, ""); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
	for name, body := range map[string]string{
		"empty keytext": `{"keytext":""}`,
		"junk keytext":  `{"keytext":"hello"}`,
		"not JSON":      `keytext=abc`,
		"two keys":      mustJSON(newKey(t, "A <a@example.org>") + "\n" + newKey(t, "B <b@example.org>")),
	} {
		if code, out := e.do("POST", "/vks/v1/upload", body); code != 400 || !strings.Contains(out, `"error"`) {
			t.Errorf("upload %s: %d %s", name, code, out)
		}
	}
}

func mustJSON(keytext string) string {
	b, _ := json.Marshal(map[string]string{"keytext": keytext})
	return string(b)
}

// TestAFloodSendsOneMail: many requests for one address within the
// window send one mail, and the answers say pending.
func TestAFloodSendsOneMail(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	for i := range 25 {
		code, body := e.request("verify", a.Token, "alice@example.org")
		if code != 200 || !strings.Contains(body, "pending") {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	e.smtp.Wait(t, mailWait)
	// One more mail after the window proves the server was still
	// listening; the flood's mails would have arrived before it.
	e.advance(identity.EmailWindow + time.Minute)
	e.request("verify", a.Token, "alice@example.org")
	e.smtp.Wait(t, mailWait)
	if n := e.smtp.Pending(); n != 0 {
		t.Errorf("%d more mails sent by the flood", n)
	}
}

func TestPerClientLimit(t *testing.T) {
	e := newEnv(t, envOptions{perMinute: 3})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	for i := range 3 {
		if code, _ := e.request("verify", a.Token, "alice@example.org"); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	if code, body := e.request("verify", a.Token, "alice@example.org"); code != 429 || !strings.Contains(body, `"error"`) {
		t.Errorf("over the cap: %d %s", code, body)
	}
}

func TestMailServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := newEnv(t, envOptions{mailer: &mail.SMTP{Address: addr, From: "kith@keys.example.org"}})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	before := e.records()
	code, body := e.request("verify", a.Token, "alice@example.org")
	if code != 503 || !strings.Contains(body, "mail server is unavailable") {
		t.Errorf("mail server down: %d %s", code, body)
	}
	if e.records() != before {
		t.Error("a record was appended")
	}
	// Had the failed mail's token been kept, the window would now answer
	// "pending" without trying: it tries again, and fails again.
	if code, body := e.request("verify", a.Token, "alice@example.org"); code != 503 {
		t.Errorf("second try: %d %s", code, body)
	}
}

// TestFreshKeysCannotFloodOneMailbox: fresh keys naming one address, in
// any spelling, buy it no more than identity.DefaultMailsPerAddress
// mails an hour; the next request is 429 and says no more than that the
// address had its mails; another address still gets its mail.
func TestFreshKeysCannotFloodOneMailbox(t *testing.T) {
	e := newEnv(t, envOptions{})
	spellings := []string{"Victim <victim@example.net>", "Victim <Victim@Example.NET>", "V <VICTIM@example.net>"}
	for i := range identity.DefaultMailsPerAddress {
		k := e.upload(newKey(t, spellings[i%len(spellings)]))
		if code, body := e.request("verify", k.Token, "Victim@Example.NET"); code != 200 || !strings.Contains(body, "pending") {
			t.Fatalf("mail %d: %d %s", i+1, code, body)
		}
	}
	k := e.upload(newKey(t, "Victim <victim@example.net>", "Other <other@example.net>"))
	req, _ := json.Marshal(map[string]any{"token": k.Token, "addresses": []string{"victim@example.net"}})
	resp, err := http.Post(e.url+"/vks/v1/request-verify", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var refusal struct{ Error string }
	json.Unmarshal(body, &refusal)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" ||
		refusal.Error != "victim@example.net: this address has had the most mails this server sends an hour: ask again later" {
		t.Errorf("the %dth mail: %d (Retry-After %q) %s", identity.DefaultMailsPerAddress+1, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if code, body := e.request("verify", k.Token, "other@example.net"); code != 200 {
		t.Errorf("another address: %d %s", code, body)
	}
	for range identity.DefaultMailsPerAddress {
		e.link("victim@example.net")
	}
	e.link("other@example.net")
	if n := e.smtp.Pending(); n != 0 {
		t.Errorf("%d more mails went out", n)
	}
}

// TestUploadsAndEmailLookupsAreLimitedPerClient: past a client's budget
// an upload answers 429 in JSON and a by-email lookup 429 in text, both
// with Retry-After; lookups by fingerprint do not count.
func TestUploadsAndEmailLookupsAreLimitedPerClient(t *testing.T) {
	e := newEnv(t, envOptions{uploadsPerMinute: 1, lookupsPerMinute: 1})
	a := e.upload(newKey(t, "Alice <alice@example.org>"))
	if code, body := e.do("POST", "/vks/v1/upload", `{"keytext": "x"}`); code != 429 || !strings.Contains(body, `"error"`) {
		t.Errorf("an upload past the budget: %d %s", code, body)
	}
	if code, _ := e.do("GET", "/vks/v1/by-fingerprint/"+a.KeyFpr, ""); code != 200 {
		t.Errorf("by-fingerprint: %d", code)
	}
	if code, _ := e.do("GET", "/vks/v1/by-email/alice@example.org", ""); code != 404 {
		t.Errorf("by-email within the budget: %d", code)
	}
	if code, body := e.do("GET", "/vks/v1/by-email/alice@example.org", ""); code != 429 || !strings.Contains(body, "by email") {
		t.Errorf("by-email past the budget: %d %s", code, body)
	}
	e.advance(time.Minute)
	if code, _ := e.do("GET", "/vks/v1/by-email/alice@example.org", ""); code != 404 {
		t.Errorf("by-email a minute later: %d", code)
	}
}
