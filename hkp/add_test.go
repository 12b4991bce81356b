package hkp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/pgp"
)

func TestAddStoresKeysAndReportsEachOne(t *testing.T) {
	ts := newTestServer(t, Options{})
	alice := newEntity(t, "Alice", "alice@example.org", 1)
	bob := newEntity(t, "Bob", "bob@example.org", 2)
	// A key whose only self-signature is broken: flip a byte of the
	// signature value.
	mallory := binaryKey(t, newEntity(t, "Mallory", "mallory@example.org", 3))
	bad := breakSignatures(t, mallory)

	r := ts.add(armored(t, binaryKey(t, alice), bad, binaryKey(t, bob)), "Accept", "application/json")
	if r.code != http.StatusOK {
		t.Fatalf("add: %d %s", r.code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var resp AddResponse
	if err := json.Unmarshal([]byte(r.body), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Inserted != 2 || resp.Rejected != 1 || len(resp.Keys) != 3 {
		t.Fatalf("answer %+v", resp)
	}
	if k := resp.Keys[1]; k.Result != "rejected" || k.Reason != "no valid self-signature" || k.Fingerprint == "" {
		t.Errorf("broken key: %+v", k)
	}
	if k := resp.Keys[0]; k.Result != "inserted" || k.Fingerprint != fpHex(alice) {
		t.Errorf("alice: %+v", k)
	}
	if n := ts.keyCount(); n != 2 {
		t.Errorf("%d keys stored, want 2", n)
	}

	// The same upload again changes nothing; the text answer says so.
	r = ts.add(armored(t, binaryKey(t, alice), binaryKey(t, bob)))
	if r.code != http.StatusOK || !strings.Contains(r.body, "0 inserted, 0 updated, 2 unchanged, 0 rejected") ||
		!strings.Contains(r.body, "unchanged  "+fpHex(alice)) {
		t.Errorf("re-upload: %d %q", r.code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}

	// A new user ID is an update.
	if err := alice.AddUserId("Alice Work", "", "alice@work.example", laterConfig(24*60*60*1e9)); err != nil {
		t.Fatal(err)
	}
	r = ts.add(armored(t, binaryKey(t, alice)), "Accept", "application/json")
	if r.code != http.StatusOK || !strings.Contains(r.body, `"result": "updated"`) {
		t.Errorf("update: %d %s", r.code, r.body)
	}
}

func TestAddAcceptsRawAndBinaryBodies(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, tc := range []struct {
		name, ct string
		body     []byte
	}{
		{"binary pgp-keys", "application/pgp-keys", binaryKey(t, newEntity(t, "Raw Binary", "rb@example.org", 10))},
		{"armored pgp-keys", "application/pgp-keys", []byte(armored(t, binaryKey(t, newEntity(t, "Raw Armored", "ra@example.org", 11))))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.url+"/pks/add?options=mr", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ct)
			r := ts.do(req)
			if r.code != http.StatusOK || !strings.Contains(r.body, `"inserted": 1`) {
				t.Errorf("%d %s", r.code, r.body)
			}
		})
	}
}

func TestAddStripsUnsignedUserID(t *testing.T) {
	ts := newTestServer(t, Options{})
	e := newEntity(t, "Honest Abe", "abe@example.org", 20)
	bin := binaryKey(t, e)
	// Graft a user ID without any signature after the primary key.
	k, err := pgp.ParseKey(bin)
	if err != nil {
		t.Fatal(err)
	}
	var grafted []byte
	for i, p := range k.Packets() {
		grafted = append(grafted, newPacket(p.Tag, p.Body)...)
		if i == 0 {
			grafted = append(grafted, newPacket(pgp.TagUserID, []byte("Barack Obama <president@whitehouse.example>"))...)
		}
	}
	r := ts.add(armored(t, grafted), "Accept", "application/json")
	if r.code != http.StatusOK {
		t.Fatalf("add: %d %s", r.code, r.body)
	}
	var resp AddResponse
	json.Unmarshal([]byte(r.body), &resp)
	if len(resp.Keys) != 1 || resp.Keys[0].Result != "inserted" || resp.Keys[0].Dropped["unbound-user-id"] != 1 {
		t.Errorf("answer %s", r.body)
	}
	for _, q := range []string{"op=index&options=mr&search=president@whitehouse.example", "op=index&options=mr&search=obama", "op=index&search=barack+obama"} {
		if r := ts.lookup(q); r.code != http.StatusNotFound {
			t.Errorf("%s: %d %s", q, r.code, r.body)
		}
	}
	r = ts.lookup("op=index&options=mr&search=0x" + fpHex(e))
	if r.code != 200 || strings.Contains(r.body, "Obama") || !strings.Contains(r.body, "uid:Honest Abe <abe@example.org>:") {
		t.Errorf("index: %d %s", r.code, r.body)
	}
	r = ts.lookup("op=get&options=mr&search=0x" + fpHex(e))
	served, err := pgp.ParseKey([]byte(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range served.Packets() {
		if p.Tag == pgp.TagUserID && strings.Contains(string(p.Body), "Obama") {
			t.Error("the grafted user ID is served")
		}
	}
	if d := served.Describe(); len(d.UserIDs) != 1 || len(d.Subkeys) != 1 {
		t.Errorf("served key lost parts: %d user IDs, %d subkeys", len(d.UserIDs), len(d.Subkeys))
	}
}

func TestAddRefusesUnusableInputWithoutStoring(t *testing.T) {
	ts := newTestServer(t, Options{})
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0xff}, 200)
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		code int
	}{
		{"binary garbage as keytext", func() *http.Request {
			return formRequest(ts.url, "keytext="+string(garbage))
		}, http.StatusUnprocessableEntity},
		{"text that holds no key", func() *http.Request {
			return formRequest(ts.url, "keytext=hello+world")
		}, http.StatusUnprocessableEntity},
		{"armor with broken base64", func() *http.Request {
			return formRequest(ts.url, "keytext="+strings.ReplaceAll("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!****\n-----END PGP PUBLIC KEY BLOCK-----\n", "\n", "%0A"))
		}, http.StatusUnprocessableEntity},
		{"no keytext", func() *http.Request { return formRequest(ts.url, "other=1") }, http.StatusBadRequest},
		{"empty body", func() *http.Request { return formRequest(ts.url, "") }, http.StatusBadRequest},
		{"malformed form", func() *http.Request { return formRequest(ts.url, "keytext=%zz") }, http.StatusBadRequest},
		{"6 MiB body", func() *http.Request {
			return formRequest(ts.url, "keytext="+strings.Repeat("A", 6<<20))
		}, http.StatusRequestEntityTooLarge},
		{"6 MiB body without length", func() *http.Request {
			req := formRequest(ts.url, "keytext="+strings.Repeat("A", 6<<20))
			req.ContentLength = -1
			req.Body = io.NopCloser(struct{ io.Reader }{strings.NewReader("keytext=" + strings.Repeat("A", 6<<20))})
			return req
		}, http.StatusRequestEntityTooLarge},
		{"secret key only", func() *http.Request {
			return formRequest(ts.url, "keytext="+urlEscape(armoredSecret(t)))
		}, http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(tc.req())
			if r.code != tc.code {
				t.Errorf("%d %q, want %d", r.code, truncate(r.body, 200), tc.code)
			}
			if r.code >= 500 {
				t.Errorf("server error %d", r.code)
			}
		})
	}
	if n := ts.keyCount(); n != 0 {
		t.Errorf("%d keys stored after bad uploads", n)
	}
}

func formRequest(base, body string) *http.Request {
	req, _ := http.NewRequest("POST", base+"/pks/add", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteString("%")
			b.WriteString(strings.ToUpper(hexs([]byte{c})))
		}
	}
	return b.String()
}

// armoredSecret returns an armored secret key (no public key block).
func armoredSecret(t *testing.T) string {
	e := newEntity(t, "Secret", "secret@example.org", 30)
	var bin bytes.Buffer
	if err := e.SerializePrivate(&bin, nil); err != nil {
		t.Fatal(err)
	}
	return armored(t, bin.Bytes())
}

// breakSignatures flips the last byte of every signature packet of bin.
func breakSignatures(t *testing.T, bin []byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(bin)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, p := range k.Packets() {
		body := append([]byte(nil), p.Body...)
		if p.Tag == pgp.TagSignature {
			body[len(body)-1] ^= 0x55
			body[len(body)-3] ^= 0x55
		}
		out = append(out, newPacket(p.Tag, body)...)
	}
	return out
}
