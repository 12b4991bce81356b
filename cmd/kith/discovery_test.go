package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
)

// curl runs the real curl against the server and returns the HTTP
// status and the body.
func curl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	bin := testkit.Tool(t, "curl")
	out, err := exec.Command(bin, append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %q: %v", args, err)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	var code int
	if _, err := fmt.Sscan(s[i+1:], &code); err != nil {
		t.Fatalf("curl %q: no status in %q", args, s)
	}
	return code, s[:i]
}

// armoredKey makes a fresh key with the user IDs ("Name <addr>").
func armoredKey(t *testing.T, uids ...string) string {
	t.Helper()
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
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	w, _ := armor.Encode(&b, "PGP PUBLIC KEY BLOCK", nil)
	ent.Serialize(w)
	w.Close()
	return b.String()
}

func uidsOf(t *testing.T, armored string) []string {
	t.Helper()
	keys, err := pgp.ReadKeys(strings.NewReader(armored))
	if err != nil {
		t.Fatalf("not keys: %v\n%s", err, armored)
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

var confirmLink = regexp.MustCompile(`http://\S+/email/confirm/[0-9A-F]+/[A-Za-z0-9_-]+`)

// TestEmailVerificationFlowThroughTheBinary: upload, request-verify, the
// mail at a real SMTP server, the link followed, by-email answering,
// withdrawal, by-email 404, and the log verifying; every step with curl
// against kith serve.
func TestEmailVerificationFlowThroughTheBinary(t *testing.T) {
	requirePostgresBinaries(t)
	smtp := mailtest.Start(t, mailtest.Options{})
	dir := tempDir(t)
	s := startServe(t, dir, nil, "--database-url", pgtest.NewDatabase(t),
		"--smtp-address", smtp.Addr, "--smtp-starttls=false", "--smtp-from", "keys@example.org")
	s.waitHealth(t, 200, 60*time.Second)
	base := "http://" + s.addr
	jsonPost := func(path string, v any) (int, string) {
		b, _ := json.Marshal(v)
		return curl(t, "-H", "Content-Type: application/json", "--data-binary", string(b), base+path)
	}

	key := armoredKey(t, "Alice <alice@example.org>", "Alice <alice@home.example>")
	code, body := jsonPost("/vks/v1/upload", map[string]string{"keytext": key})
	if code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	var up struct {
		KeyFpr string            `json:"key_fpr"`
		Status map[string]string `json:"status"`
		Token  string            `json:"token"`
	}
	if err := json.Unmarshal([]byte(body), &up); err != nil || up.Status["alice@example.org"] != "unpublished" {
		t.Fatalf("upload answer %s (%v)", body, err)
	}
	if code, _ := curl(t, base+"/vks/v1/by-email/alice@example.org"); code != 404 {
		t.Errorf("by-email before verification: %d", code)
	}
	code, body = jsonPost("/vks/v1/request-verify", map[string]any{"token": up.Token, "addresses": []string{"alice@example.org"}})
	if code != 200 || !strings.Contains(body, `"pending"`) {
		t.Fatalf("request-verify: %d %s", code, body)
	}
	m := smtp.Wait(t, 30*time.Second)
	if m.From != "keys@example.org" || m.To[0] != "alice@example.org" || !strings.Contains(m.Body, groupFour(up.KeyFpr)) {
		t.Fatalf("mail from %s to %v:\n%s", m.From, m.To, m.Body)
	}
	link := confirmLink.FindString(m.Body)
	if !strings.HasPrefix(link, base) {
		t.Fatalf("no link to %s in:\n%s", base, m.Body)
	}
	if code, page := curl(t, link); code != 200 || !strings.Contains(page, "<form") {
		t.Fatalf("link page: %d %s", code, page)
	}
	if code, page := curl(t, "-X", "POST", link); code != 200 || !strings.Contains(page, "now published") {
		t.Fatalf("follow the link: %d %s", code, page)
	}
	if code, page := curl(t, "-X", "POST", link); code != 410 {
		t.Errorf("the link a second time: %d %s", code, page)
	}
	code, body = curl(t, base+"/vks/v1/by-email/alice%40example.org")
	if got := uidsOf(t, body); code != 200 || len(got) != 1 || got[0] != "Alice <alice@example.org>" {
		t.Fatalf("by-email: %d, user IDs %q", code, got)
	}
	for _, path := range []string{"/vks/v1/by-fingerprint/" + up.KeyFpr, "/vks/v1/by-keyid/" + up.KeyFpr[24:]} {
		code, body := curl(t, base+path)
		if got := uidsOf(t, body); code != 200 || len(got) != 1 {
			t.Errorf("%s: %d, user IDs %q", path, code, got)
		}
	}
	for path, want := range map[string]int{
		"/vks/v1/by-fingerprint/" + strings.ToLower(up.KeyFpr): 400,
		"/vks/v1/by-keyid/XYZ":                                 400,
		"/vks/v1/by-email/alice@home.example":                  404,
		"/vks/v1/by-email/nobody":                              400,
	} {
		if code, _ := curl(t, base+path); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
	if code, body := jsonPost("/vks/v1/request-verify", map[string]any{"token": up.Token, "addresses": []string{"ceo@example.org"}}); code != 400 || !strings.Contains(body, `"error"`) {
		t.Errorf("an address not in the key: %d %s", code, body)
	}
	if code, body := curl(t, "-H", "Content-Type: application/json", "--data-binary", "{", base+"/vks/v1/upload"); code != 400 || !strings.Contains(body, `"error"`) {
		t.Errorf("bad JSON: %d %s", code, body)
	}

	// Withdraw.
	code, body = jsonPost("/vks/v1/request-withdraw", map[string]any{"token": up.Token, "addresses": []string{"alice@example.org"}})
	if code != 200 {
		t.Fatalf("request-withdraw: %d %s", code, body)
	}
	m = smtp.Wait(t, 30*time.Second)
	link = confirmLink.FindString(m.Body)
	if code, page := curl(t, "-X", "POST", link); code != 200 || !strings.Contains(page, "no longer published") {
		t.Fatalf("withdraw: %d %s", code, page)
	}
	if code, _ := curl(t, base+"/vks/v1/by-email/alice@example.org"); code != 404 {
		t.Errorf("by-email after withdrawal: %d", code)
	}

	// The records verify offline: publicly, what is public (the address,
	// the statement naming it and the whole key are private artifacts).
	out, errOut, err := runKith(t, "verify-log", "--server", base)
	if err != nil {
		t.Fatalf("verify-log: %v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(out+errOut, "0 records verified, 2 unchecked") {
		t.Errorf("verify-log: %s %s", out, errOut)
	}
	if _, body := curl(t, base+"/api/v1/log?limit=100"); strings.Contains(body, "alice@example.org") {
		t.Errorf("the public log names the verified address:\n%s", body)
	}
	if strings.Contains(s.stderr.String(), up.Token) || strings.Contains(s.stderr.String(), link[strings.LastIndexByte(link, '/')+1:]) {
		t.Error("a token reached the log")
	}
}

// TestVerificationMailGoesToTheOutboxWithoutSMTP: with no mail server
// configured, the mail is an .eml file in DATA_DIR/outbox whose path is
// logged, and its link works.
func TestVerificationMailGoesToTheOutboxWithoutSMTP(t *testing.T) {
	requirePostgresBinaries(t)
	dir := tempDir(t)
	data := filepath.Join(dir, "data")
	s := startServe(t, dir, nil, "--database-url", pgtest.NewDatabase(t), "--data-dir", data)
	s.waitHealth(t, 200, 60*time.Second)
	base := "http://" + s.addr
	b, _ := json.Marshal(map[string]string{"keytext": armoredKey(t, "Bob <bob@example.org>")})
	code, body := curl(t, "-H", "Content-Type: application/json", "--data-binary", string(b), base+"/vks/v1/upload")
	if code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	var up struct{ Token string }
	json.Unmarshal([]byte(body), &up)
	b, _ = json.Marshal(map[string]any{"token": up.Token, "addresses": []string{"bob@example.org"}})
	if code, body := curl(t, "-H", "Content-Type: application/json", "--data-binary", string(b), base+"/vks/v1/request-verify"); code != 200 {
		t.Fatalf("request-verify: %d %s", code, body)
	}
	files, _ := filepath.Glob(filepath.Join(data, "outbox", "*.eml"))
	if len(files) != 1 {
		t.Fatalf("outbox files: %v", files)
	}
	if !strings.Contains(s.stderr.String(), files[0]) {
		t.Errorf("the outbox file's path is not logged:\n%s", s.stderr.String())
	}
	eml, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	link := confirmLink.FindString(string(eml))
	if code, page := curl(t, "-X", "POST", link); code != 200 {
		t.Fatalf("follow the outbox link %q: %d %s", link, code, page)
	}
	if code, _ := curl(t, base+"/vks/v1/by-email/bob@example.org"); code != 200 {
		t.Errorf("by-email: %d", code)
	}
}

func groupFour(s string) string {
	var parts []string
	for i := 0; i < len(s); i += 4 {
		parts = append(parts, s[i:min(i+4, len(s))])
	}
	return strings.Join(parts, " ")
}

// TestRecipientCapHoldsAcrossTwoNodes: two kith serve nodes on one
// database, fresh keys naming one address in several spellings, and
// request-verify alternating between the nodes: the address receives
// smtp.mails_per_address_per_hour mails (the default, 3) and then either
// node answers 429 saying no more than that; another address still gets
// its mail.
func TestRecipientCapHoldsAcrossTwoNodes(t *testing.T) {
	requirePostgresBinaries(t)
	smtp := mailtest.Start(t, mailtest.Options{})
	db := pgtest.NewDatabase(t)
	var bases [2]string
	for i := range bases {
		s := startServe(t, tempDir(t), nil, "--database-url", db,
			"--smtp-address", smtp.Addr, "--smtp-starttls=false", "--smtp-from", "keys@example.org")
		s.waitHealth(t, 200, 60*time.Second)
		bases[i] = "http://" + s.addr
	}
	jsonPost := func(base, path string, v any) (int, string) {
		b, _ := json.Marshal(v)
		return curl(t, "-H", "Content-Type: application/json", "--data-binary", string(b), base+path)
	}
	// requestVerify uploads a fresh key with the user IDs to a node and
	// asks that node to mail addr.
	requestVerify := func(node int, addr string, uids ...string) (int, string) {
		t.Helper()
		code, body := jsonPost(bases[node], "/vks/v1/upload", map[string]string{"keytext": armoredKey(t, uids...)})
		var up struct{ Token string }
		if code != 200 || json.Unmarshal([]byte(body), &up) != nil {
			t.Fatalf("upload to node %d: %d %s", node, code, body)
		}
		return jsonPost(bases[node], "/vks/v1/request-verify", map[string]any{"token": up.Token, "addresses": []string{addr}})
	}
	spellings := []string{"victim@example.net", "Victim@Example.NET", "VICTIM@example.NET"}
	for i := range 3 {
		if code, body := requestVerify(i%2, spellings[i], "Victim <"+spellings[i]+">"); code != 200 || !strings.Contains(body, `"pending"`) {
			t.Fatalf("mail %d, through node %d: %d %s", i+1, i%2, code, body)
		}
	}
	const refusal = `victim@example.net: this address has had the most mails this server sends an hour: ask again later`
	for i := 3; i < 5; i++ {
		code, body := requestVerify(i%2, "victim@example.net", "Someone Else <victim@example.net>")
		if code != 429 || !strings.Contains(body, refusal) {
			t.Errorf("mail %d, through node %d: %d %s, want 429 %q", i+1, i%2, code, body, refusal)
		}
	}
	if code, body := requestVerify(1, "other@example.net", "Other <other@example.net>"); code != 200 {
		t.Errorf("another address: %d %s", code, body)
	}
	// Mails are sent before the request is answered: what arrived is
	// every mail that went out.
	to := map[string]int{}
	for smtp.Pending() > 0 {
		m := smtp.Wait(t, time.Second)
		to[strings.ToLower(strings.Join(m.To, ","))]++
	}
	if to["victim@example.net"] != 3 || to["other@example.net"] != 1 || len(to) != 2 {
		t.Errorf("mails sent: %v, want 3 to victim@example.net and 1 to other@example.net", to)
	}
}

// TestIDEmailVerifiesAndWithdrawsAnAddress: `kith id email verify` and
// `withdraw` upload gpg's key and have the server mail the address a
// link; following it publishes (by-email 200) and withdraws it (404).
func TestIDEmailVerifiesAndWithdrawsAnAddress(t *testing.T) {
	requirePostgresBinaries(t)
	smtp := mailtest.Start(t, mailtest.Options{})
	dir := tempDir(t)
	s := startServe(t, dir, nil, "--database-url", pgtest.NewDatabase(t),
		"--smtp-address", smtp.Addr, "--smtp-starttls=false", "--smtp-from", "keys@example.org")
	s.waitHealth(t, 200, 60*time.Second)
	base := "http://" + s.addr
	u := newIDUser(t, base)
	fpr := u.gpg.NewKey("Erin <erin@example.org>", "sign")
	follow := func(subject string) {
		t.Helper()
		m := smtp.Wait(t, 30*time.Second)
		if m.To[0] != "erin@example.org" || !strings.HasPrefix(m.Subject, subject) {
			t.Fatalf("mail to %v: %q", m.To, m.Subject)
		}
		if code, page := curl(t, "-X", "POST", confirmLink.FindString(m.Body)); code != 200 {
			t.Fatalf("follow: %d %s", code, page)
		}
	}

	out, errOut, code := u.kith("id", "email", "verify", "erin@example.org", "--pgp", fpr)
	if code != 0 || !strings.Contains(out, "a mail went to erin@example.org: open its link and confirm to publish") {
		t.Fatalf("kith id email verify: %d\n%s%s", code, out, errOut)
	}
	follow("Verify erin@example.org")
	if code, _ := curl(t, base+"/vks/v1/by-email/erin@example.org"); code != 200 {
		t.Fatalf("by-email after verification: %d", code)
	}
	if out, _, _ := u.kith("id", "email", "verify", "erin@example.org", "--pgp", fpr); !strings.Contains(out, "already published") {
		t.Errorf("verifying again: %s", out)
	}
	if _, errOut, code := u.kith("id", "email", "verify", "ceo@example.org", "--pgp", fpr); code == 0 || !strings.Contains(errOut, "has no user ID with this address") {
		t.Errorf("an address the key lacks: %d %s", code, errOut)
	}
	out, errOut, code = u.kith("id", "email", "withdraw", "erin@example.org", "--pgp", fpr)
	if code != 0 || !strings.Contains(out, "confirm to withdraw") {
		t.Fatalf("kith id email withdraw: %d\n%s%s", code, out, errOut)
	}
	follow("Withdraw erin@example.org")
	if code, _ := curl(t, base+"/vks/v1/by-email/erin@example.org"); code != 404 {
		t.Errorf("by-email after the withdrawal: %d", code)
	}
}
