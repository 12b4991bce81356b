package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/gpgtest"
	"github.com/kith-keyserver/kith/web/api"
)

// logPerson is someone with an OpenPGP key of two user IDs (a name and an
// address each) and an authentication subkey, proven for their handle.
type logPerson struct {
	handle string
	fpr    string
	// names and addrs are the user IDs' names and addresses, in order.
	names, addrs []string
	user         *idUser
	// token is the key's VKS upload token.
	token string
}

// personal is everything of p that names them.
func (p *logPerson) personal() []string { return append(append([]string(nil), p.names...), p.addrs...) }

// logPrivacy drives one kith serve with a real SMTP server and checks what
// its public surfaces say.
type logPrivacy struct {
	t     *testing.T
	base  string
	dbURL string
	smtp  *mailtest.Server
}

// TestLogKeepsNoPersonalDataThroughTheBinary is the "Done when" of the
// public-log issue, through kith serve, the kith binary and gpg. Three
// people upload a key with two user IDs and an auth subkey, prove it for
// a handle with `kith id claim --pgp` (so the log holds pgp.uid-selfsig
// and pgp.auth-subkey records) and verify addresses by mail (email.verified
// records); alice then withdraws hers. At every step nothing the log
// serves (/api/v1/log, every /log/ path, each record's bytes decoded)
// names anyone's user IDs or addresses, and gpg imports no user ID from
// the signer keys the log serves; VKS and HKP email searches no longer
// find the withdrawn address (the key's user ID still names it, as HKP
// serves the key by fingerprint and the identity's JSON lists it).
// Then alice deletes her key, the operator blocks bob's whole key and one
// user ID of carol's: the same holds, verify-log passes counting the
// erased artifacts, and carol's artifact download still proves her other
// address (verify-log --artifacts checks it) but names the blocked one no
// more.
func TestLogKeepsNoPersonalDataThroughTheBinary(t *testing.T) {
	t.Parallel()
	requirePostgresBinaries(t)
	testkit.Tool(t, "ssh-keygen", "gpg", "gpgconf")
	lp := &logPrivacy{t: t, dbURL: pgtest.NewDatabase(t), smtp: mailtest.Start(t, mailtest.Options{})}
	s := startServe(t, tempDir(t), nil, "--database-url", lp.dbURL, "--hkp-email-lookup", "verified",
		"--smtp-address", lp.smtp.Addr, "--smtp-starttls=false", "--smtp-from", "keys@example.org")
	s.waitHealth(t, http.StatusOK, time.Minute)
	lp.base = "http://" + s.addr

	alice := lp.person("alice", "Alwyn Quexborough", "alwyn.quexborough@example.org", "Alwyn Q. Home", "aq@home.example")
	bob := lp.person("bob", "Barnaby Zimmerfeld", "barnaby.zimmerfeld@example.org", "Barnaby Z. Club", "bz@club.example")
	carol := lp.person("carol", "Caradoc Wintergreen", "caradoc@blocked.example", "Caradoc Keptname", "caradoc@kept.example")
	everyone := append(append(alice.personal(), bob.personal()...), carol.personal()...)
	lp.verifyAddress(alice, alice.addrs[0])
	lp.verifyAddress(bob, bob.addrs[0])
	lp.verifyAddress(carol, carol.addrs[0])
	lp.verifyAddress(carol, carol.addrs[1])
	lp.withdrawAddress(alice, alice.addrs[0])

	recs := lp.logNamesNone(everyone)
	for _, m := range []string{"pgp.uid-selfsig", "pgp.auth-subkey", "email.verified"} {
		if !anyRecord(recs, func(r api.LogRecord) bool { return r.Method == m }) {
			t.Fatalf("the log holds no %s record: the test proves nothing of them", m)
		}
	}
	if !anyRecord(recs, func(r api.LogRecord) bool { return r.Method == "email.verified" && r.Purpose == "revoke" }) {
		t.Fatal("the log holds no withdrawal (email.verified, purpose revoke): the test proves nothing of it")
	}
	lp.nowherePublic(alice, alice.addrs[0], false)
	// The identity's public document lists the key's claimed addresses,
	// never which of them a mailbox confirmed (nor that one withdrew).
	if _, body := lp.get("/users/" + alice.handle + ".json"); strings.Contains(string(body), "email.verified") {
		t.Errorf("/users/%s.json tells which address was verified by mail:\n%s", alice.handle, body)
	}

	// Alice deletes her key.
	var ch api.ChallengeResponse
	if code := postJSON(t, lp.base+"/api/v1/challenges", api.ChallengeRequest{Factor: alice.fpr, Purpose: "delete-key"}, &ch); code != http.StatusCreated {
		t.Fatalf("delete-key challenge: %d %+v", code, ch)
	}
	sig := string(alice.user.gpg.Run(ch.Statement, "--local-user", alice.fpr+"!", "--clearsign", "--output", "-"))
	var del api.KeyDeletionResponse
	if code := postJSON(t, lp.base+"/api/v1/keys/deletions", api.SignedStatement{Statement: ch.Statement, Signature: sig}, &del); code != http.StatusOK {
		t.Fatalf("deletion: %d %+v\n%s", code, del, s.stderr.String())
	}
	recs = lp.logNamesNone(everyone)
	if !anyRecord(recs, func(r api.LogRecord) bool { return r.Erased }) {
		t.Fatal("after the deletion no record of the log is marked artifacts_erased")
	}
	for _, a := range alice.personal() {
		lp.nowherePublic(alice, a, true)
	}
	afterDeletion := lp.verifyLog()

	// The operator blocks bob's key, and one user ID of carol's.
	kithExec(t, "block", "add", bob.fpr, "--reason", "abuse report 12", "--database-url", lp.dbURL)
	show := kithExec(t, "block", "show", carol.fpr, "--database-url", lp.dbURL)
	m := regexp.MustCompile(`(?m)^user-id\s+([0-9a-f]{64})\s+"` + regexp.QuoteMeta(carol.names[0]+" <"+carol.addrs[0]+">") + `"`).FindStringSubmatch(show)
	if m == nil {
		t.Fatalf("kith block show lists no user ID %s <%s>:\n%s", carol.names[0], carol.addrs[0], show)
	}
	kithExec(t, "block", "add", carol.fpr, "--user-id", m[1], "--reason", "doxxing", "--database-url", lp.dbURL)
	lp.logNamesNone(everyone)
	for _, a := range bob.personal() {
		lp.nowherePublic(bob, a, true)
	}
	for _, a := range []string{carol.names[0], carol.addrs[0]} {
		lp.nowherePublic(carol, a, true)
	}
	if afterBlocks := lp.verifyLog(); afterBlocks <= afterDeletion {
		t.Errorf("verify-log counts %d records artifact erased after the blocks, %d before them", afterBlocks, afterDeletion)
	}

	// Carol's artifacts prove her other address and no longer name the
	// blocked one.
	st := openTestStore(t, lp.dbURL)
	svc, err := newIdentityService(st, "Kith test", testHostPolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	arts, err := svc.IdentityArtifacts(context.Background(), identity.Handle(carol.handle))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(arts)
	kept := false
	for _, ra := range arts {
		for _, a := range ra.Artifacts {
			kept = kept || (a.Kind == identity.ArtifactEmail && string(a.Value) == carol.addrs[1])
			for _, gone := range []string{carol.names[0], carol.addrs[0]} {
				if bytes.Contains(a.Value, []byte(gone)) {
					t.Errorf("carol's artifact %s of record %d still names %q", a.Kind, ra.Seq, gone)
				}
			}
		}
	}
	if !kept {
		t.Fatalf("carol's artifacts hold no email artifact of %s, her address not blocked:\n%s", carol.addrs[1], raw)
	}
	file := filepath.Join(t.TempDir(), "carol-artifacts.json")
	writeJSON(t, file, arts)
	out, errOut, err := kithExecErr(t, "verify-log", "--server", lp.base, "--artifacts", file)
	if err != nil || !strings.Contains(out, "checked with their artifacts") {
		t.Fatalf("verify-log --artifacts with carol's download: %v\n%s\n%s", err, out, errOut)
	}
}

// anyRecord reports whether any record satisfies f.
func anyRecord(recs []api.LogRecord, f func(api.LogRecord) bool) bool {
	for _, r := range recs {
		if f(r) {
			return true
		}
	}
	return false
}

// person makes handle's key (two user IDs, an auth subkey) with gpg,
// uploads it through VKS and proves it for handle with the kith binary.
func (lp *logPrivacy) person(handle, name1, addr1, name2, addr2 string) *logPerson {
	t := lp.t
	t.Helper()
	p := &logPerson{handle: handle, names: []string{name1, name2}, addrs: []string{addr1, addr2}, user: newIDUser(t, lp.base)}
	g := p.user.gpg
	p.fpr = g.NewKey(name1+" <"+addr1+">", "sign")
	g.Run("", "--quick-add-uid", p.fpr, name2+" <"+addr2+">")
	g.Run("", "--quick-add-key", p.fpr, "ed25519", "auth", "0")
	code, body := lp.postJSON("/vks/v1/upload", map[string]string{"keytext": string(g.Run("", "--export", "--armor", p.fpr))})
	var up struct{ Token string }
	if err := json.Unmarshal([]byte(body), &up); code != http.StatusOK || err != nil || up.Token == "" {
		t.Fatalf("VKS upload of %s's key: %d %s", handle, code, body)
	}
	p.token = up.Token
	if out, errOut, code := p.user.kith("id", "claim", handle, "--pgp", p.fpr); code != 0 {
		t.Fatalf("kith id claim %s --pgp: exit %d\n%s\n%s", handle, code, out, errOut)
	}
	return p
}

func (lp *logPrivacy) postJSON(path string, v any) (int, string) {
	lp.t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(lp.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		lp.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (lp *logPrivacy) get(path string) (int, []byte) {
	lp.t.Helper()
	resp, err := http.Get(lp.base + path)
	if err != nil {
		lp.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// mailedLink asks for a VKS mail (request-verify or request-withdraw) for
// addr and follows its link.
func (lp *logPrivacy) mailedLink(p *logPerson, request, addr, want string) {
	t := lp.t
	t.Helper()
	if code, body := lp.postJSON("/vks/v1/"+request, map[string]any{"token": p.token, "addresses": []string{addr}}); code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", request, addr, code, body)
	}
	m := lp.smtp.Wait(t, 30*time.Second)
	link := confirmLink.FindString(m.Body)
	if len(m.To) != 1 || m.To[0] != addr || link == "" {
		t.Fatalf("mail to %v, want %s, with a link:\n%s", m.To, addr, m.Body)
	}
	resp, err := http.PostForm(link, nil)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
		t.Fatalf("following the %s link for %s: %d %s", request, addr, resp.StatusCode, page)
	}
}

func (lp *logPrivacy) verifyAddress(p *logPerson, addr string) {
	lp.t.Helper()
	lp.mailedLink(p, "request-verify", addr, "now published")
	if code, _ := lp.get("/vks/v1/by-email/" + url.PathEscape(addr)); code != http.StatusOK {
		lp.t.Fatalf("by-email %s after its verification: %d", addr, code)
	}
}

func (lp *logPrivacy) withdrawAddress(p *logPerson, addr string) {
	lp.t.Helper()
	lp.mailedLink(p, "request-withdraw", addr, "no longer published")
}

// logNamesNone waits until the log's checkpoint covers every record, then
// checks that nothing under /api/v1/log and /log/ names any of personal:
// neither the raw bodies nor any record's bytes decoded (statement,
// signature, signer keys), and that no signer key the log serves has a
// user ID, as its packets show and as gpg imports it. It returns the
// records.
func (lp *logPrivacy) logNamesNone(personal []string) []api.LogRecord {
	t := lp.t
	t.Helper()
	var recs []api.LogRecord
	var bodies [][]byte
	read := func() {
		recs, bodies = nil, nil
		for next := "/api/v1/log?limit=1000"; next != ""; {
			code, body := lp.get(next)
			var page api.LogPage
			if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil {
				t.Fatalf("GET %s: %d %v\n%s", next, code, err, body)
			}
			recs, bodies, next = append(recs, page.Records...), append(bodies, body), page.Next
		}
	}
	var size int64
	if !testkit.PollEvery(time.Minute, 20*time.Millisecond, func() bool {
		read()
		code, signed := lp.get("/log/checkpoint")
		if code != http.StatusOK {
			return false
		}
		// The checkpoint's second line is the tree size.
		lines := strings.Split(string(signed), "\n")
		if len(lines) < 2 {
			return false
		}
		size, _ = strconv.ParseInt(lines[1], 10, 64)
		return size == int64(len(recs))
	}) {
		t.Fatalf("the checkpoint covers %d records of %d", size, len(recs))
	}
	check := func(where string, b []byte) {
		t.Helper()
		for _, s := range personal {
			if bytes.Contains(bytes.ToLower(b), bytes.ToLower([]byte(s))) {
				t.Errorf("%s names %q", where, s)
			}
		}
	}
	for _, b := range bodies {
		check("/api/v1/log", b)
	}
	var armored []byte
	for _, r := range recs {
		where := "record " + strconv.FormatInt(r.Seq, 10) + " (" + r.Method + ")"
		check(where+"'s statement", r.Statement)
		check(where+"'s signature", r.Signature)
		check(where+"'s signer key", r.SignerKey)
		if r.To != nil {
			check(where+"'s to", append([]byte(r.To.Value), r.To.Data...))
		}
		if r.SignerKeyArmored == "" {
			continue
		}
		armored = append(armored, r.SignerKeyArmored...)
		blk, err := armor.Decode(strings.NewReader(r.SignerKeyArmored))
		if err != nil {
			t.Fatalf("%s: signer_key_armored: %v", where, err)
		}
		key, _ := io.ReadAll(blk.Body)
		check(where+"'s signer key", key)
		k, err := pgp.ParseKey(key)
		if err != nil {
			t.Fatalf("%s: signer key: %v", where, err)
		}
		for _, pk := range k.Packets() {
			if pk.Tag == pgp.TagUserID || pk.Tag == pgp.TagUserAttribute {
				t.Errorf("%s: its signer key carries a user ID: %q", where, pk.Body)
			}
		}
	}
	if len(armored) == 0 {
		t.Fatal("the log serves no OpenPGP signer key: the test proves nothing of them")
	}
	// gpg imports what the log serves, as anyone would.
	g := gpgtest.New(t)
	file := filepath.Join(t.TempDir(), "signer-keys.asc")
	if err := os.WriteFile(file, armored, 0o600); err != nil {
		t.Fatal(err)
	}
	g.Try("--import", file) // gpg refuses keys without user IDs: that is the point
	if listing := string(g.Run("", "--with-colons", "--list-keys")); strings.Contains(listing, "\nuid:") {
		t.Errorf("gpg --import of the log's signer keys brought back user IDs:\n%s", listing)
	}

	// Every tile the checkpoint covers, its entry bundles and the key.
	paths := []string{"/log/checkpoint", "/log/key"}
	for _, tl := range xtlog.NewTiles(tlog.TileHeight, 0, size) {
		tt := tlog.Tile{L: tl.L, N: tl.N, W: tl.W}
		paths = append(paths, "/log/"+tt.Path())
		if tl.L == 0 {
			tt.Entries = true
			paths = append(paths, "/log/"+tt.Path())
		}
	}
	for _, path := range paths {
		code, body := lp.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		check(path, body)
	}
	return recs
}

// nowherePublic checks that what (an address or a name of p's key) is
// not served by VKS or by HKP searches for it; with erased (p's key
// deleted, or what's user ID blocked) not in the identity's JSON nor in
// what HKP serves for p's fingerprint either. Until then HKP serves the
// key as its owner uploaded it, every user ID included, and the
// identity's JSON lists the addresses of the key's user IDs as claimed.
func (lp *logPrivacy) nowherePublic(p *logPerson, what string, erased bool) {
	t := lp.t
	t.Helper()
	lower := strings.ToLower(what)
	paths := []string{
		"/pks/lookup?op=index&options=mr&search=" + url.QueryEscape(what),
		"/pks/lookup?op=vindex&options=mr&search=" + url.QueryEscape(what),
	}
	if erased {
		paths = append(paths, "/users/"+p.handle+".json",
			"/pks/lookup?op=index&options=mr&search=0x"+p.fpr, "/pks/lookup?op=vindex&options=mr&search=0x"+p.fpr)
	}
	for _, path := range paths {
		_, body := lp.get(path)
		text, err := url.PathUnescape(string(body)) // machine-readable indexes escape user IDs
		if err != nil {
			text = string(body)
		}
		if strings.Contains(strings.ToLower(text), lower) {
			t.Errorf("GET %s names %q:\n%s", path, what, body)
		}
	}
	// VKS serves only verified user IDs, and nothing after erasure.
	keyPaths := []string{"/vks/v1/by-fingerprint/" + p.fpr}
	if erased {
		keyPaths = append(keyPaths, "/pks/lookup?op=get&options=mr&search=0x"+p.fpr)
	}
	for _, path := range keyPaths {
		if code, body := lp.get(path); code == http.StatusOK {
			for _, u := range uidsOf(t, string(body)) {
				if strings.Contains(strings.ToLower(u), lower) {
					t.Errorf("GET %s serves the user ID %q", path, u)
				}
			}
		}
	}
	if strings.Contains(what, "@") {
		if code, body := lp.get("/vks/v1/by-email/" + url.PathEscape(what)); code != http.StatusNotFound {
			t.Errorf("VKS by-email %s: %d, want 404\n%s", what, code, body)
		}
	}
}

// verifyLog runs kith verify-log against the server, wants it to pass
// with records reported "artifact erased", and returns how many.
func (lp *logPrivacy) verifyLog() int {
	t := lp.t
	t.Helper()
	out, errOut, err := kithExecErr(t, "verify-log", "--server", lp.base)
	m := regexp.MustCompile(`, (\d+) of them artifact erased`).FindStringSubmatch(out)
	if err != nil || m == nil || !strings.Contains(out, "artifact erased: ") {
		t.Fatalf("verify-log: %v, want it to pass counting erased artifacts\n%s\n%s", err, out, errOut)
	}
	n, _ := strconv.Atoi(m[1])
	if n == 0 {
		t.Fatalf("verify-log counts no erased artifact:\n%s", out)
	}
	return n
}
