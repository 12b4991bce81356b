package v2_test

// sendtoken and PUT canonical on the real store, identity service and
// SMTP server: the token is the mailed verify link's, and presenting it
// is following the link.

import (
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail"
)

const mailWait = 30 * time.Second

// sendToken asks for a token for addr of the key with fingerprint fp.
func (e *env) sendToken(fp []byte, addr string) (answer, v2.TokenAnswer) {
	e.t.Helper()
	body, _ := json.Marshal(v2.TokenRequest{Fingerprint: hex.EncodeToString(fp), Identity: addr})
	a := e.do("POST", "/pks/v2/sendtoken", body, "Content-Type: application/json")
	var ta v2.TokenAnswer
	if a.code == http.StatusOK {
		if err := json.Unmarshal(a.body, &ta); err != nil {
			e.t.Fatalf("sendtoken answer is not JSON: %v\n%s", err, a.body)
		}
	}
	return a, ta
}

// mailedToken waits for the next mail, checks it went to addr, and
// returns its link and the token (the link's last path segment).
func (e *env) mailedToken(addr string) (link, token string) {
	e.t.Helper()
	m := e.smtp.Wait(e.t, mailWait)
	if len(m.To) != 1 || m.To[0] != addr {
		e.t.Fatalf("mail to %v, want %s", m.To, addr)
	}
	link = linkRE.FindString(m.Body)
	if link == "" {
		e.t.Fatalf("no link in the mail:\n%s", m.Body)
	}
	return link, link[strings.LastIndexByte(link, '/')+1:]
}

// putCanonical presents token for addr with the key in body.
func (e *env) putCanonical(addr string, body []byte, token string) answer {
	e.t.Helper()
	h := []string{"Content-Type: " + v2.MediaType}
	if token != "" {
		h = append(h, "Authorization: Bearer "+token)
	}
	return e.do("PUT", "/pks/v2/canonical/"+addr, body, h...)
}

func TestSendTokenThenPutCanonicalMakesTheKeyAuthoritative(t *testing.T) {
	e := newEnv(t, envOptions{tokens: true})
	key := newKey(t, false, "Alice <alice@example.org>", "Alice <alice@work.example>")
	fp := fingerprintOf(t, key)
	if a, _ := e.submit(key); a.code != http.StatusOK {
		t.Fatalf("submit: %d %s", a.code, a.body)
	}
	a, ta := e.sendToken(fp, "Alice@Example.org")
	if a.code != http.StatusOK || ta.Status != "pending" || ta.Identity != "alice@example.org" || ta.Fingerprint != hex.EncodeToString(fp) {
		t.Fatalf("sendtoken: %d %s", a.code, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("sendtoken Content-Type %q", ct)
	}
	link, token := e.mailedToken("alice@example.org")
	if a := e.get("/pks/v2/canonical/alice@example.org"); a.code != http.StatusNotFound {
		t.Fatalf("canonical before the token: %d, want 404", a.code)
	}
	// Asking again within the window mails nothing more: the link out is
	// the token.
	if a, ta := e.sendToken(fp, "alice@example.org"); a.code != http.StatusOK || ta.Status != "pending" {
		t.Fatalf("sendtoken again: %d %s", a.code, a.body)
	}
	if n := e.smtp.Pending(); n != 0 {
		t.Fatalf("%d more mails within the window", n)
	}

	// Without the token: 401 and the scheme to use; nothing changes.
	a = e.putCanonical("alice@example.org", key, "")
	if a.code != http.StatusUnauthorized || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("PUT without a token: %d %q %s", a.code, a.header.Get("WWW-Authenticate"), a.body)
	}

	a = e.putCanonical("alice@example.org", key, token)
	if a.code != http.StatusOK {
		t.Fatalf("PUT canonical: %d %s", a.code, a.body)
	}
	var s v2.Submission
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatalf("PUT answer is not a submission: %v\n%s", err, a.body)
	}
	if len(s.Ignored) != 1 || s.Ignored[0].Fingerprint != hex.EncodeToString(fp) {
		t.Errorf("PUT answer %s, want the key ignored (stored already)", a.body)
	}
	a = e.get("/pks/v2/canonical/alice@example.org")
	fps, uids := answered(t, a.body)
	if a.code != http.StatusOK || len(fps) != 1 || fps[0] != strings.ToUpper(hex.EncodeToString(fp)) {
		t.Fatalf("canonical after the token: %d %v", a.code, fps)
	}
	if len(uids) != 1 || uids[0] != "Alice <alice@example.org>" {
		t.Errorf("canonical answer's user IDs %q, want only the verified one", uids)
	}
	if got := e.index("alice@example.org")[0].UserIDs; got[0].Confidence != 120 && got[1].Confidence != 120 {
		t.Errorf("index confidences %+v, want 120 for the verified address", got)
	}

	// Replayed, as the bare token or as the mailed link: refused.
	for _, tok := range []string{token, link} {
		if a := e.putCanonical("alice@example.org", key, tok); a.code != http.StatusForbidden {
			t.Errorf("replayed token %q: %d %s, want 403", tok[:10], a.code, a.body)
		}
	}
	// Already verified: sendtoken says so and mails nothing.
	if a, ta := e.sendToken(fp, "alice@example.org"); a.code != http.StatusOK || ta.Status != "published" {
		t.Fatalf("sendtoken when verified: %d %s", a.code, a.body)
	}
	if n := e.smtp.Pending(); n != 0 {
		t.Fatalf("%d mails for a verified address", n)
	}

	// The whole mailed link is a token too.
	if a, _ := e.sendToken(fp, "alice@work.example"); a.code != http.StatusOK {
		t.Fatalf("sendtoken work: %d %s", a.code, a.body)
	}
	link, _ = e.mailedToken("alice@work.example")
	if a := e.putCanonical("alice@work.example", key, link); a.code != http.StatusOK {
		t.Fatalf("PUT with the link: %d %s", a.code, a.body)
	}
	if a := e.get("/pks/v2/canonical/alice@work.example"); a.code != http.StatusOK {
		t.Fatalf("canonical work: %d", a.code)
	}
	noPersonalLogs(t, e, "alice@example.org", "alice@work.example", token, link)
}

func TestPutCanonicalRefusesATokenForAnotherAddressOrKey(t *testing.T) {
	e := newEnv(t, envOptions{tokens: true})
	alice := newKey(t, false, "Alice <alice@example.org>", "Bob <bob@example.org>")
	mallory := newKey(t, false, "Mallory <alice@example.org>")
	fp := fingerprintOf(t, alice)
	for _, k := range [][]byte{alice, mallory} {
		if a, _ := e.submit(k); a.code != http.StatusOK {
			t.Fatalf("submit: %d %s", a.code, a.body)
		}
	}
	if a, _ := e.sendToken(fp, "bob@example.org"); a.code != http.StatusOK {
		t.Fatalf("sendtoken: %d %s", a.code, a.body)
	}
	_, token := e.mailedToken("bob@example.org")

	// Bob's token does not make the key canonical for alice's address,
	// although the key carries it.
	if a := e.putCanonical("alice@example.org", alice, token); a.code != http.StatusForbidden {
		t.Fatalf("token for another address: %d %s, want 403", a.code, a.body)
	}
	// Nor for another key.
	if a := e.putCanonical("bob@example.org", mallory, token); a.code != http.StatusForbidden {
		t.Fatalf("token for another key: %d %s, want 403", a.code, a.body)
	}
	for _, tok := range []string{"nonsense", strings.Repeat("A", 43)} {
		if a := e.putCanonical("bob@example.org", alice, tok); a.code != http.StatusForbidden {
			t.Fatalf("unknown token: %d %s, want 403", a.code, a.body)
		}
	}
	for _, addr := range []string{"alice@example.org", "bob@example.org"} {
		if a := e.get("/pks/v2/canonical/" + addr); a.code != http.StatusNotFound {
			t.Fatalf("canonical/%s after refused tokens: %d, want 404", addr, a.code)
		}
	}
	// A refusal used nothing up: the token still works where it belongs.
	if a := e.putCanonical("bob@example.org", alice, token); a.code != http.StatusOK {
		t.Fatalf("the token for its own key and address: %d %s", a.code, a.body)
	}
	if a := e.get("/pks/v2/canonical/alice@example.org"); a.code != http.StatusNotFound {
		t.Fatalf("canonical/alice after bob's token: %d, want 404", a.code)
	}
	// A withdrawal link's token is not a verify link's: refused, and the
	// address stays verified.
	key := identity.PGPFactor(fp)
	if err := e.svc.RequestEmail(t.Context(), identity.EmailRequest{Action: identity.EmailWithdraw, Key: key,
		Email: identity.EmailFactor("bob@example.org"), Send: e.mailer.Sender(identity.EmailWithdraw, key, "bob@example.org")}); err != nil {
		t.Fatalf("request withdrawal: %v", err)
	}
	_, withdraw := e.mailedToken("bob@example.org")
	if a := e.putCanonical("bob@example.org", alice, withdraw); a.code != http.StatusForbidden {
		t.Fatalf("withdrawal token: %d %s, want 403", a.code, a.body)
	}
	if a := e.get("/pks/v2/canonical/bob@example.org"); a.code != http.StatusOK {
		t.Fatalf("canonical/bob after a refused withdrawal token: %d, want 200", a.code)
	}
	// Bodies that are not one key, and identities that are not an
	// address.
	if a := e.putCanonical("bob@example.org", append(append([]byte{}, alice...), mallory...), token); a.code != http.StatusUnprocessableEntity {
		t.Errorf("two keys: %d %s, want 422", a.code, a.body)
	}
	if a := e.putCanonical("bob@example.org", []byte("junk"), token); a.code != http.StatusUnprocessableEntity {
		t.Errorf("junk: %d %s, want 422", a.code, a.body)
	}
	if a := e.putCanonical("Bob", alice, token); a.code != http.StatusBadRequest {
		t.Errorf("a name: %d %s, want 400", a.code, a.body)
	}
}

func TestSendTokenRefusesWhatTheKeyDoesNotCarry(t *testing.T) {
	e := newEnv(t, envOptions{tokens: true})
	key := newKey(t, false, "Alice <alice@example.org>")
	fp := fingerprintOf(t, key)
	if a, _ := e.submit(key); a.code != http.StatusOK {
		t.Fatalf("submit: %d %s", a.code, a.body)
	}
	other := fingerprintOf(t, newKey(t, false, "Carol <carol@example.org>"))
	for _, c := range []struct {
		name string
		body string
		want int
	}{
		{"address not in the key", `{"fingerprint":"` + hex.EncodeToString(fp) + `","identity":"victim@example.org"}`, http.StatusUnprocessableEntity},
		{"key not stored", `{"fingerprint":"` + hex.EncodeToString(other) + `","identity":"carol@example.org"}`, http.StatusNotFound},
		{"short fingerprint", `{"fingerprint":"ABCD","identity":"alice@example.org"}`, http.StatusBadRequest},
		{"a user ID, not an address", `{"fingerprint":"` + hex.EncodeToString(fp) + `","identity":"Alice <alice@example.org>"}`, http.StatusBadRequest},
		{"not JSON", `fingerprint=` + hex.EncodeToString(fp), http.StatusBadRequest},
	} {
		a := e.do("POST", "/pks/v2/sendtoken", []byte(c.body), "Content-Type: application/json")
		if a.code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, a.code, a.body, c.want)
		}
	}
	if n := e.smtp.Pending(); n != 0 {
		t.Fatalf("%d mails for refused requests", n)
	}
	noPersonalLogs(t, e, "alice@example.org", "victim@example.org")
}

func TestSendTokenRateLimits(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		e := newEnv(t, envOptions{tokens: true, mailRequestsPerMinute: 2})
		key := newKey(t, false, "Alice <alice@example.org>")
		fp := fingerprintOf(t, key)
		e.submit(key)
		for i := range 2 {
			if a, _ := e.sendToken(fp, "alice@example.org"); a.code != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, a.code, a.body)
			}
		}
		a, _ := e.sendToken(fp, "alice@example.org")
		if a.code != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
			t.Fatalf("past the budget: %d %q %s, want 429 with Retry-After", a.code, a.header.Get("Retry-After"), a.body)
		}
	})
	t.Run("recipient", func(t *testing.T) {
		// Keys naming someone else's address cannot flood the mailbox:
		// the per-recipient cap counts every key's mails.
		e := newEnv(t, envOptions{tokens: true, mailsPerAddress: 2})
		var fps [][]byte
		for range 3 {
			k := newKey(t, false, "Victim <victim@example.org>")
			e.submit(k)
			fps = append(fps, fingerprintOf(t, k))
		}
		for i := range 2 {
			if a, _ := e.sendToken(fps[i], "victim@example.org"); a.code != http.StatusOK {
				t.Fatalf("key %d: %d %s", i, a.code, a.body)
			}
			e.mailedToken("victim@example.org")
		}
		a, _ := e.sendToken(fps[2], "victim@example.org")
		if a.code != http.StatusTooManyRequests || a.header.Get("Retry-After") != "3600" {
			t.Fatalf("third key: %d %q %s, want 429 with Retry-After 3600", a.code, a.header.Get("Retry-After"), a.body)
		}
		if n := e.smtp.Pending(); n != 0 {
			t.Fatalf("%d mails past the cap", n)
		}
		noPersonalLogs(t, e, "victim@example.org")
	})
}

func TestSendTokenMailServerDown(t *testing.T) {
	e := newEnv(t, envOptions{tokens: true})
	key := newKey(t, false, "Alice <alice@example.org>")
	fp := fingerprintOf(t, key)
	e.submit(key)
	// Nothing listens where the mail server was.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	e.mailer.Mail = &mail.SMTP{Address: addr, From: "kith@keys.example.org"}
	a, _ := e.sendToken(fp, "alice@example.org")
	if a.code != http.StatusServiceUnavailable {
		t.Fatalf("mail server down: %d %s, want 503", a.code, a.body)
	}
	// Nothing was recorded: with the server back, a mail goes out at once
	// (no window from the failed one).
	e.mailer.Mail = &mail.SMTP{Address: e.smtp.Addr, From: "kith@keys.example.org"}
	if a, ta := e.sendToken(fp, "alice@example.org"); a.code != http.StatusOK || ta.Status != "pending" {
		t.Fatalf("mail server back: %d %s", a.code, a.body)
	}
	e.mailedToken("alice@example.org")
	noPersonalLogs(t, e, "alice@example.org")
}

func TestTokenRoutesOptions(t *testing.T) {
	e := newEnv(t, envOptions{tokens: true})
	a := e.do("OPTIONS", "/pks/v2/canonical/alice@example.org", nil)
	if a.code != http.StatusOK || !strings.Contains(a.header.Get("Allow"), "PUT") ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("OPTIONS canonical/...: %d Allow %q Allow-Headers %q", a.code, a.header.Get("Allow"), a.header.Get("Access-Control-Allow-Headers"))
	}
	a = e.do("OPTIONS", "/pks/v2/sendtoken", nil)
	if a.code != http.StatusOK || !strings.Contains(a.header.Get("Allow"), "POST") {
		t.Errorf("OPTIONS sendtoken: %d Allow %q", a.code, a.header.Get("Allow"))
	}
	if a := e.do("POST", "/pks/v2/sendtoken/", []byte("{}")); a.code != http.StatusBadRequest {
		t.Errorf("POST sendtoken/ (trailing slash): %d %s, want 400", a.code, a.body)
	}
	a = e.do("POST", "/pks/v2/sendtoken", []byte("{}"), "Origin: https://page.example")
	if a.header.Get("Access-Control-Allow-Origin") != "*" || a.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("sendtoken CORS: %v", a.header)
	}
}

// noPersonalLogs fails if the handler logged any of the strings.
func noPersonalLogs(t *testing.T, e *env, secrets ...string) {
	t.Helper()
	logs := strings.ToLower(e.logs.String())
	for _, s := range secrets {
		if strings.Contains(logs, strings.ToLower(s)) {
			t.Errorf("the logs hold %q:\n%s", s, e.logs.String())
		}
	}
}
