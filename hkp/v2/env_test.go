package v2_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	v2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// env is the v2 Handler on a real store, the real upload path and
// identity service, mailing verification links through a real SMTP
// server, behind a loopback HTTP server.
type env struct {
	t      *testing.T
	st     *postgres.Store
	svc    *identity.Service
	ks     *keys.Service
	smtp   *mailtest.Server
	mailer *maillink.Mailer
	url    string
	// logs holds the handler's logs (JSON lines).
	logs *testkit.SyncBuffer
}

type envOptions struct {
	// lookupsPerMinute and uploadsPerMinute: the shared budgets (zero:
	// none).
	lookupsPerMinute, uploadsPerMinute int
	maxBody                            int64
	maxConcurrentUploads               int
	verifiedOnly                       bool
	// tokens serves sendtoken and PUT canonical; mailRequestsPerMinute
	// is their budget (zero: none), mailsPerAddress the service's cap
	// (zero: its default).
	tokens                bool
	mailRequestsPerMinute int
	mailsPerAddress       int
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, st: pgtest.NewStore(t), smtp: mailtest.Start(t, mailtest.Options{})}
	svc, err := identity.NewService(e.st, &verify.Verifier{Keys: e.st}, identity.ServiceOptions{Server: "Kith <http://test>",
		MailsPerAddress: o.mailsPerAddress})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.ks = keys.NewService(e.st, keys.Options{Policy: pgp.DefaultPolicy(), Identities: svc,
		MaxConcurrentUploads: o.maxConcurrentUploads, Logger: slog.New(slog.DiscardHandler)})
	limit := func(n int) *ratelimit.Limiter {
		if n == 0 {
			return nil
		}
		return ratelimit.New(n, nil)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.mailer = &maillink.Mailer{PublicURL: srv.URL, Server: "Kith <" + srv.URL + ">",
		Mail: &mail.SMTP{Address: e.smtp.Addr, From: "kith@keys.example.org"}}
	e.logs = &testkit.SyncBuffer{}
	opts := v2.Options{Uploads: e.ks, UploadLimit: limit(o.uploadsPerMinute),
		EmailLookupLimit: limit(o.lookupsPerMinute), MaxBodySize: o.maxBody, VerifiedOnly: o.verifiedOnly,
		Corroborations: svc, Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if o.tokens {
		opts.Emails, opts.Mailer, opts.MailRequestLimit = svc, e.mailer, limit(o.mailRequestsPerMinute)
	}
	v2.NewHandler(e.st, e.st, opts).Register(mux)
	return e
}

// answer is one HTTP answer.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

// do sends a request with the given headers ("Name: value").
func (e *env) do(method, path string, body []byte, headers ...string) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, b}
}

func (e *env) get(path string) answer { e.t.Helper(); return e.do("GET", path, nil) }

// submit posts binary keys to /pks/v2/certs and reads the answer.
func (e *env) submit(body []byte) (answer, v2.Submission) {
	e.t.Helper()
	a := e.do("POST", "/pks/v2/certs", body, "Content-Type: "+v2.MediaType)
	var s v2.Submission
	if a.code == http.StatusOK {
		if err := json.Unmarshal(a.body, &s); err != nil {
			e.t.Fatalf("submission answer is not JSON: %v\n%s", err, a.body)
		}
	}
	return a, s
}

// index reads a JSON index.
func (e *env) index(identity string) []v2.IndexKey {
	e.t.Helper()
	a := e.get("/pks/v2/index/" + identity)
	if a.code != http.StatusOK {
		e.t.Fatalf("index/%s: %d %s", identity, a.code, a.body)
	}
	var out []v2.IndexKey
	if err := json.Unmarshal(a.body, &out); err != nil {
		e.t.Fatalf("index/%s is not JSON: %v\n%s", identity, err, a.body)
	}
	return out
}

var linkRE = regexp.MustCompile(`http://\S+/email/confirm/\S+`)

// verifyByMail verifies addr for the key as its holder does: a verify
// link is mailed through the real SMTP server and followed.
func (e *env) verifyByMail(fp []byte, addr string) {
	e.t.Helper()
	key := identity.PGPFactor(fp)
	err := e.svc.RequestEmail(context.Background(), identity.EmailRequest{Action: identity.EmailVerify, Key: key,
		Email: identity.EmailFactor(addr), Send: e.mailer.Sender(identity.EmailVerify, key, addr)})
	if err != nil {
		e.t.Fatalf("request verification of %s: %v", addr, err)
	}
	m := e.smtp.Wait(e.t, 30*time.Second)
	if len(m.To) != 1 || m.To[0] != addr {
		e.t.Fatalf("mail to %v, want %s", m.To, addr)
	}
	link := linkRE.FindString(m.Body)
	parts := strings.Split(strings.TrimPrefix(link, e.url+"/email/confirm/"), "/")
	if len(parts) != 2 {
		e.t.Fatalf("no confirm link in the mail:\n%s", m.Body)
	}
	if _, err := e.svc.ConfirmEmail(context.Background(), key, parts[1]); err != nil {
		e.t.Fatalf("follow the link for %s: %v", addr, err)
	}
}

// newKey returns a fresh key's public packets in binary, with the user
// IDs ("Name <addr>") in order; v6 makes an RFC 9580 v6 key.
func newKey(t *testing.T, v6 bool, uids ...string) []byte {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	if v6 {
		cfg = &packet.Config{V6Keys: true, Algorithm: packet.PubKeyAlgoEd25519}
	}
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
	if err := ent.Serialize(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fingerprintOf returns the fingerprint of the one key in b.
func fingerprintOf(t *testing.T, b []byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k.Fingerprint()
}

// answered returns the fingerprints (upper-case hex) and user IDs of the
// keys in a binary answer, as Kith's reader sees them.
func answered(t *testing.T, body []byte) (fps []string, uids []string) {
	t.Helper()
	ks, err := pgp.ReadKeys(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("answer is not keys: %v", err)
	}
	for _, k := range ks {
		fps = append(fps, strings.ToUpper(hex.EncodeToString(k.Fingerprint())))
		for _, p := range k.Packets() {
			if p.Tag == pgp.TagUserID {
				uids = append(uids, string(p.Body))
			}
		}
	}
	return fps, uids
}

// gpgShow lists the fingerprints and user IDs real gpg reads from a
// binary answer (gpg --show-keys, which imports nothing).
func gpgShow(t *testing.T, body []byte) (fps []string, uids []string) {
	t.Helper()
	gpg := testkit.Tool(t, "gpg")
	cmd := exec.Command(gpg, "--homedir", t.TempDir(), "--batch", "--with-colons", "--show-keys")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gpg --show-keys: %v", err)
	}
	prev := ""
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, ":")
		switch {
		case f[0] == "fpr" && prev == "pub" && len(f) > 9:
			fps = append(fps, f[9])
		case f[0] == "uid" && len(f) > 9:
			uids = append(uids, f[9])
		}
		if f[0] != "" {
			prev = f[0]
		}
	}
	return fps, uids
}
