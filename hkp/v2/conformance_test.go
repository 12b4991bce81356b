package v2_test

// Conformance of the v2 routes with draft-ietf-openpgp-hkp. The quoted
// requirements are the draft's words as adopted from
// draft-gallagher-openpgp-hkp-10; the section numbers are that text's.

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// debianSample returns the first n keys of the Debian keyring and every
// role key, each as read, concatenated: real keys of every age and
// algorithm.
func debianSample(t *testing.T, n int) []byte {
	t.Helper()
	var out bytes.Buffer
	rd := pgp.NewReader(bytes.NewReader(testkit.File(t, testkit.DebianKeyring)))
	for i := 0; i < n; i++ {
		k, err := rd.Next()
		if err != nil {
			t.Fatalf("debian keyring key %d: %v", i, err)
		}
		out.Write(k.Bytes())
	}
	if b, err := os.ReadFile("/usr/share/keyrings/debian-role-keys.gpg"); err == nil {
		out.Write(b)
	}
	return out.Bytes()
}

// TestDebianKeysThroughEveryLookup submits real Debian keys over v2 and
// asks for each by every typed lookup, checking status, content type and
// body against the draft and against what real gpg reads of the answer.
func TestDebianKeysThroughEveryLookup(t *testing.T) {
	e := newEnv(t, envOptions{})
	sample := debianSample(t, 25)

	// §5.2.4: "The body of the POST or PUT request contains a certificate
	// bundle as specified in Section 9, which MUST NOT be ASCII-armored."
	a, sub := e.submit(sample)
	if a.code != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("submission: %d %s %s", a.code, a.header.Get("Content-Type"), a.body)
	}
	if len(sub.Inserted) < 25 {
		t.Fatalf("submission inserted %d keys, want at least 25: %s", len(sub.Inserted), a.body)
	}
	// §7.2: "Each certificate object MUST contain 'version' and
	// 'fingerprint' fields".
	for _, s := range sub.Inserted {
		if s.Version != 4 || len(s.Fingerprint) != 40 || s.Fingerprint != strings.ToLower(s.Fingerprint) {
			t.Errorf("inserted entry %+v", s)
		}
	}
	// A resubmission brings nothing new: every key is ignored, with a
	// comment saying why.
	if a, again := e.submit(sample); a.code != http.StatusOK || len(again.Ignored) != len(sub.Inserted) ||
		len(again.Inserted)+len(again.Updated) != 0 || again.Ignored[0].Comment == "" {
		t.Errorf("resubmission: %d %s", a.code, a.body)
	}

	stored := map[string][]byte{}
	for _, s := range sub.Inserted {
		fp, _ := hex.DecodeString(s.Fingerprint)
		found, _, err := e.st.FindKeys(t.Context(), keysByFingerprint(fp))
		if err != nil || len(found) != 1 {
			t.Fatalf("stored %s: %v", s.Fingerprint, err)
		}
		stored[strings.ToUpper(s.Fingerprint)] = found[0].Packets
	}

	for i, s := range sub.Inserted {
		fpr := strings.ToUpper(s.Fingerprint)
		// §7.1: a keyserver "MUST return non-armored (binary)
		// certificate bundles in response to lookup requests"; the
		// hexadecimal digits are not case sensitive (§5.1.2).
		for _, path := range []string{
			"/pks/v2/certs/by-vfingerprint/04/" + fpr,
			"/pks/v2/certs/by-vfingerprint/04/" + s.Fingerprint,
			"/pks/v2/certs/by-vfingerprint/04" + fpr,
		} {
			a := e.get(path)
			if a.code != http.StatusOK || a.header.Get("Content-Type") != v2.MediaType {
				t.Fatalf("%s: %d %s %s", path, a.code, a.header.Get("Content-Type"), a.body)
			}
			if !bytes.Equal(a.body, stored[fpr]) || bytes.HasPrefix(a.body, []byte("-----BEGIN")) {
				t.Errorf("%s: the answer is not the stored key in binary", path)
			}
		}
		// §5.1.3: the Key ID is "16 hexadecimal digits, without a
		// preceding 0x".
		a := e.get("/pks/v2/certs/by-keyid/" + fpr[24:])
		if fps, _ := answered(t, a.body); a.code != http.StatusOK || !slices.Contains(fps, fpr) {
			t.Errorf("by-keyid %s: %d, keys %v", fpr[24:], a.code, fps)
		}
		if i >= 5 {
			continue // every route for five keys is enough; the rest above
		}
		// Real gpg reads the answer as exactly this key.
		if fps, _ := gpgShow(t, e.get("/pks/v2/certs/by-vfingerprint/04/"+fpr).body); !slices.Equal(fps, []string{fpr}) {
			t.Errorf("gpg reads %v from by-vfingerprint/04/%s", fps, fpr)
		}
		// §5.1.9: an identity lookup matches "the email address between
		// angle brackets" of a user ID; "Text lookups SHOULD NOT be case
		// sensitive".
		addr := firstAddress(t, stored[fpr])
		a = e.get("/pks/v2/certs/by-identity/" + strings.ToUpper(addr))
		if fps, _ := gpgShow(t, a.body); a.code != http.StatusOK || !slices.Contains(fps, fpr) {
			t.Errorf("by-identity %s: %d, gpg reads %v", addr, a.code, fps)
		}
		// §7.1: "MUST set Content-Type: application/json for JSON
		// responses"; §7.1.1: "The only required fields are the version
		// and fingerprint of any key material, and the uidString of any
		// User IDs", timestamps "in UTC as per Section 5.6 of [RFC3339]".
		ix := e.index(addr)
		k := findIndexed(ix, s.Fingerprint)
		if k == nil {
			t.Fatalf("index/%s lacks %s", addr, s.Fingerprint)
		}
		if k.Version != 4 || k.Algorithm.Code == 0 || !rfc3339UTC(k.Creation) || len(k.UserIDs) == 0 {
			t.Errorf("index entry %+v", k)
		}
		for _, u := range k.UserIDs {
			if u.UIDString == "" || u.Confidence != v2.ConfidenceClaimed {
				t.Errorf("user ID %+v: nothing is verified, so every confidence is that of a claim", u)
			}
		}
		for _, sk := range k.Subkeys {
			if sk.Version != 4 || len(sk.Fingerprint) != 40 || !rfc3339UTC(sk.Creation) {
				t.Errorf("subkey %+v", sk)
			}
		}
		// §5.1.8: HEAD answers "the same header fields that it would have
		// responded with if a GET request had been made".
		h := e.do("HEAD", "/pks/v2/certs/by-vfingerprint/04/"+fpr, nil)
		g := e.get("/pks/v2/certs/by-vfingerprint/04/" + fpr)
		if h.code != g.code || h.header.Get("Content-Type") != g.header.Get("Content-Type") ||
			h.header.Get("Access-Control-Allow-Origin") != "*" || len(h.body) != 0 {
			t.Errorf("HEAD: %d %v, GET: %d %v", h.code, h.header, g.code, g.header)
		}
	}

	// "If no certificates match the request, the keyserver SHOULD return
	// an appropriate HTTP error code such as 404" (§5.1.5).
	for _, path := range []string{
		"/pks/v2/certs/by-vfingerprint/04/" + strings.Repeat("AB", 20),
		"/pks/v2/certs/by-keyid/ABABABABABABABAB",
		"/pks/v2/certs/by-identity/nobody@example.invalid",
		"/pks/v2/index/nobody@example.invalid",
		"/pks/v2/canonical/nobody@example.invalid",
	} {
		if a := e.get(path); a.code != http.StatusNotFound || a.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d, want 404 with CORS", path, a.code)
		}
	}
}

// TestCanonicalAnswersOnlyVerifiedAddresses: anyone can write anyone's
// address into a key. Mallory's key claims Alice's address; the
// authoritative lookup never answers it, and answers Alice's key only
// once a mail sent to the address for her key was followed, with only
// the verified user ID (as VKS by-email). The index shows each user ID's
// confidence from the evidence.
func TestCanonicalAnswersOnlyVerifiedAddresses(t *testing.T) {
	e := newEnv(t, envOptions{})
	alice := newKey(t, false, "Alice <alice@example.org>", "Alice at work <alice@work.example>")
	mallory := newKey(t, false, "Alice <alice@example.org>", "Mallory <mallory@example.net>")
	// Mallory's key is the newer: by date alone it would come first.
	if a, sub := e.submit(append(append([]byte{}, alice...), mallory...)); a.code != http.StatusOK || len(sub.Inserted) != 2 {
		t.Fatalf("submission: %d %s", a.code, a.body)
	}
	aliceFP, malloryFP := fingerprintOf(t, alice), fingerprintOf(t, mallory)
	aliceHex, malloryHex := strings.ToUpper(hex.EncodeToString(aliceFP)), strings.ToUpper(hex.EncodeToString(malloryFP))

	// §5.1.4: "A keyserver MUST return either the canonical bundle of the
	// identity being searched for, or a 404 Not Found error." A claim is
	// not canonical.
	if a := e.get("/pks/v2/canonical/alice@example.org"); a.code != http.StatusNotFound {
		t.Errorf("canonical before verification: %d, want 404", a.code)
	}

	e.verifyByMail(aliceFP, "alice@example.org")

	a := e.get("/pks/v2/canonical/Alice@Example.org")
	if a.code != http.StatusOK || a.header.Get("Content-Type") != v2.MediaType {
		t.Fatalf("canonical after verification: %d %s", a.code, a.body)
	}
	fps, uids := gpgShow(t, a.body)
	if !slices.Equal(fps, []string{aliceHex}) || !slices.Equal(uids, []string{"Alice <alice@example.org>"}) {
		t.Errorf("canonical answered %v with user IDs %q: want only Alice's key with only the verified user ID", fps, uids)
	}
	for _, path := range []string{"/pks/v2/canonical/alice@work.example", "/pks/v2/canonical/mallory@example.net", "/pks/v2/canonical/Alice"} {
		if a := e.get(path); a.code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404: nothing verified there", path, a.code)
		}
	}

	// by-identity answers every key naming the address, the verified one
	// first (§5.1.1: sorted by confidence).
	a = e.get("/pks/v2/certs/by-identity/alice@example.org")
	if fps, _ := answered(t, a.body); a.code != http.StatusOK || !slices.Equal(fps, []string{aliceHex, malloryHex}) {
		t.Errorf("by-identity: %d %v, want Alice's key then Mallory's", a.code, fps)
	}
	ix := e.index("alice@example.org")
	if len(ix) != 2 || ix[0].Fingerprint != strings.ToLower(aliceHex) {
		t.Fatalf("index: %+v", ix)
	}
	want := map[string]map[string]int{
		strings.ToLower(aliceHex):   {"Alice <alice@example.org>": v2.ConfidenceVerified, "Alice at work <alice@work.example>": v2.ConfidenceClaimed},
		strings.ToLower(malloryHex): {"Alice <alice@example.org>": v2.ConfidenceClaimed, "Mallory <mallory@example.net>": v2.ConfidenceClaimed},
	}
	for _, k := range ix {
		for _, u := range k.UserIDs {
			if c, ok := want[k.Fingerprint][u.UIDString]; !ok || c != u.Confidence {
				t.Errorf("key %s user ID %q: confidence %d, want %d", k.Fingerprint, u.UIDString, u.Confidence, c)
			}
		}
	}

	// With hkp.email_lookup = "verified" an address finds only the keys
	// verified for it, on every route.
	strict := newEnv(t, envOptions{verifiedOnly: true})
	strict.submit(append(append([]byte{}, alice...), mallory...))
	if a := strict.get("/pks/v2/certs/by-identity/alice@example.org"); a.code != http.StatusNotFound {
		t.Errorf("verified-only, nothing verified: %d", a.code)
	}
	strict.verifyByMail(aliceFP, "alice@example.org")
	a = strict.get("/pks/v2/certs/by-identity/alice@example.org")
	if fps, _ := answered(t, a.body); a.code != http.StatusOK || !slices.Equal(fps, []string{aliceHex}) {
		t.Errorf("verified-only by-identity: %d %v", a.code, fps)
	}
	if ix := strict.index("alice@example.org"); len(ix) != 1 || ix[0].Fingerprint != strings.ToLower(aliceHex) {
		t.Errorf("verified-only index: %+v", ix)
	}
}

// TestIdentityMatchesWholeUserIDsOnly: §5.1.9: identity lookups "MUST only
// return results if the 'identifier' path component exactly matches" the
// address between angle brackets, or the whole text of a user ID without
// one.
func TestIdentityMatchesWholeUserIDsOnly(t *testing.T) {
	e := newEnv(t, envOptions{})
	k := newKey(t, false, "Release Signing Key", "Bob <bob@example.org>")
	if a, _ := e.submit(k); a.code != http.StatusOK {
		t.Fatalf("submission: %d %s", a.code, a.body)
	}
	fp := strings.ToUpper(hex.EncodeToString(fingerprintOf(t, k)))
	for _, id := range []string{"release%20signing%20key", "bob@example.org", "BOB@example.org"} {
		if fps, _ := answered(t, e.get("/pks/v2/certs/by-identity/"+id).body); !slices.Equal(fps, []string{fp}) {
			t.Errorf("by-identity/%s: %v, want the key", id, fps)
		}
	}
	for _, id := range []string{"release", "signing%20key", "bob", "example.org", "bob@example.or", "Bob%20%3Cbob@example.org%3E"} {
		if a := e.get("/pks/v2/certs/by-identity/" + id); a.code != http.StatusNotFound {
			t.Errorf("by-identity/%s: %d, want 404 (no exact match)", id, a.code)
		}
	}
}

// TestV6KeysByVersionedFingerprintNeverByKeyID: §5.1.3: "certificates with
// versions greater than 4 MUST NOT be returned in response to a
// certs/by-keyid request"; by-vfingerprint answers a v6 key under version
// 06 only.
func TestV6KeysByVersionedFingerprintNeverByKeyID(t *testing.T) {
	e := newEnv(t, envOptions{})
	k := newKey(t, true, "Vera <vera@example.org>")
	a, sub := e.submit(k)
	if a.code != http.StatusOK || len(sub.Inserted) != 1 || sub.Inserted[0].Version != 6 || len(sub.Inserted[0].Fingerprint) != 64 {
		t.Fatalf("v6 submission: %d %s", a.code, a.body)
	}
	fp := strings.ToUpper(sub.Inserted[0].Fingerprint)
	if a := e.get("/pks/v2/certs/by-vfingerprint/06/" + fp); a.code != http.StatusOK || !bytes.Equal(fingerprintOf(t, a.body), fingerprintOf(t, k)) {
		t.Errorf("by-vfingerprint/06: %d", a.code)
	}
	if a := e.get("/pks/v2/certs/by-vfingerprint/06" + fp); a.code != http.StatusOK {
		t.Errorf("by-vfingerprint/06 in one segment: %d", a.code)
	}
	// A v6 key ID is the fingerprint's first 8 octets.
	if a := e.get("/pks/v2/certs/by-keyid/" + fp[:16]); a.code != http.StatusNotFound {
		t.Errorf("by-keyid of a v6 key: %d, want 404", a.code)
	}
	if ix := e.index("vera@example.org"); len(ix) != 1 || ix[0].Version != 6 || ix[0].Fingerprint != strings.ToLower(fp) {
		t.Errorf("index of a v6 key: %+v", ix)
	}
}

// TestMalformedIdentifiersAre400: a request that names no key the draft
// can name is the client's error, never the server's.
func TestMalformedIdentifiersAre400(t *testing.T) {
	e := newEnv(t, envOptions{})
	fp := strings.Repeat("AB", 20)
	for _, path := range []string{
		"/pks/v2/certs/by-vfingerprint/04/" + fp[:39],
		"/pks/v2/certs/by-vfingerprint/04/" + fp + "AB",
		"/pks/v2/certs/by-vfingerprint/04/" + strings.Repeat("ZZ", 20),
		"/pks/v2/certs/by-vfingerprint/4/" + fp,
		"/pks/v2/certs/by-vfingerprint/05/" + fp,
		"/pks/v2/certs/by-vfingerprint/06/" + fp,
		"/pks/v2/certs/by-vfingerprint/0x04" + fp,
		"/pks/v2/certs/by-vfingerprint/" + fp,
		"/pks/v2/certs/by-vfingerprint/04/%00%01",
		"/pks/v2/certs/by-vfingerprint/" + strings.Repeat("A", 5000),
		"/pks/v2/certs/by-keyid/zz",
		"/pks/v2/certs/by-keyid/0xABABABABABABABAB",
		"/pks/v2/certs/by-keyid/ABABABABABABABA",
		"/pks/v2/certs/by-keyid/ABABABABABABABABA",
		"/pks/v2/certs/by-keyid/-BABABABABABABAB",
		"/pks/v2/certs/by-keyid/%C3%A9BABABABABABABA",
		"/pks/v2/certs/by-identity/%00",
		"/pks/v2/index/a%0Ab@example.org",
		"/pks/v2/canonical/%FF%FE",
		"/pks/v2/index/" + strings.Repeat("a", 2000),
	} {
		a := e.get(path)
		if a.code != http.StatusBadRequest || a.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d, want 400 with CORS", path[:min(len(path), 80)], a.code)
		}
	}
}

// TestSubmissionTakesTheOneUploadPath: submissions pass the key policy,
// the per-client budget, the admission's cap and the size cap, and say
// per key what happened.
func TestSubmissionTakesTheOneUploadPath(t *testing.T) {
	e := newEnv(t, envOptions{maxBody: 64 << 10, uploadsPerMinute: 8, maxConcurrentUploads: 1})
	k := newKey(t, false, "Carol <carol@example.org>")

	// An oversized body is refused before it is read (its length), and
	// while it is read (chunked, no length).
	big := bytes.Repeat([]byte{0x99}, 65<<10)
	if a := e.do("POST", "/pks/v2/certs", big, "Content-Type: "+v2.MediaType); a.code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized submission: %d", a.code)
	}
	req, _ := http.NewRequest("POST", e.url+"/pks/v2/certs", struct{ *bytes.Reader }{bytes.NewReader(big)})
	req.Header.Set("Content-Type", v2.MediaType)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized chunked submission: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	// §4.2: "422 Unprocessable content": "Submission was not well
	// formed".
	if a := e.do("POST", "/pks/v2/certs", []byte("\x00not a certificate"), "Content-Type: "+v2.MediaType); a.code != http.StatusUnprocessableEntity {
		t.Errorf("junk submission: %d", a.code)
	}
	if a := e.do("POST", "/pks/v2/certs", []byte(`{"keytext":"x"}`), "Content-Type: application/json"); a.code != http.StatusUnsupportedMediaType {
		t.Errorf("JSON submission: %d", a.code)
	}
	// §5.2.5: the advanced submission's part "MUST be named 'keytext'";
	// armored text is read there too.
	var armored bytes.Buffer
	kk, _ := pgp.ParseKey(k)
	if err := pgp.WriteArmored(&armored, kk); err != nil {
		t.Fatal(err)
	}
	body := "--b\r\nContent-Disposition: form-data; name=\"keytext\"\r\n\r\n" + armored.String() + "\r\n--b--\r\n"
	a := e.do("POST", "/pks/v2/certs", []byte(body), "Content-Type: multipart/form-data; boundary=b")
	if a.code != http.StatusOK || !strings.Contains(string(a.body), `"inserted": [`) || !strings.Contains(string(a.body), hex.EncodeToString(fingerprintOf(t, k))) {
		t.Errorf("multipart submission: %d %s", a.code, a.body)
	}
	// A key the policy refuses (a user ID without its self-signature is
	// dropped; a key with nothing left is refused) is invalid, with why.
	bare := onlyPrimary(t, newKey(t, false, "Dave <dave@example.org>"))
	if a, sub := e.submit(bare); a.code != http.StatusOK || len(sub.Invalid) != 1 || sub.Invalid[0].Comment == "" {
		t.Errorf("refused key: %d %s", a.code, a.body)
	}
	// While the upload path admits no more requests (past
	// keys.UploadAdmitWait), a submission is read and gets 503 and
	// Retry-After.
	adm, ok := e.ks.Admit(t.Context())
	if !ok {
		t.Fatal("no upload slot")
	}
	if a := e.do("POST", "/pks/v2/certs", k, "Content-Type: "+v2.MediaType); a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Errorf("busy: %d %v", a.code, a.header)
	}
	adm.Done()
	// The client's upload budget (8 a minute here) is spent: 429.
	for i := 0; i < 3; i++ {
		e.submit(k)
	}
	if a := e.do("POST", "/pks/v2/certs", k, "Content-Type: "+v2.MediaType); a.code != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Errorf("past the budget: %d", a.code)
	}
}

// TestCORSAndFeatureDetection: §7.1: a keyserver "MUST set the HTTP
// header Access-Control-Allow-Origin: *" on v2 answers; any origin may
// preflight, and no answer allows credentials. §5.1.7: OPTIONS on a
// supported category answers 200 with "an Allow: response header that
// includes the value GET"; otherwise "an error code such as 501 Not
// Implemented"; a GET without an identifier "an error code such as 403
// Forbidden".
func TestCORSAndFeatureDetection(t *testing.T) {
	e := newEnv(t, envOptions{})
	cors := func(what string, a answer) {
		t.Helper()
		if a.header.Get("Access-Control-Allow-Origin") != "*" || a.header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("%s: CORS headers %v", what, a.header)
		}
	}
	for _, c := range []string{"certs/by-vfingerprint", "certs/by-keyid", "certs/by-identity", "index", "canonical"} {
		a := e.do("OPTIONS", "/pks/v2/"+c, nil, "Origin: https://evil.example", "Access-Control-Request-Method: GET")
		if a.code != http.StatusOK || !strings.Contains(a.header.Get("Allow"), "GET") {
			t.Errorf("OPTIONS %s: %d %v", c, a.code, a.header)
		}
		cors("OPTIONS "+c, a)
		a = e.do("OPTIONS", "/pks/v2/"+c+"/x", nil, "Origin: null", "Access-Control-Request-Method: GET",
			"Access-Control-Request-Headers: content-type")
		if a.code != http.StatusOK || !strings.Contains(a.header.Get("Access-Control-Allow-Methods"), "GET") {
			t.Errorf("preflight %s/x: %d %v", c, a.code, a.header)
		}
		cors("preflight "+c, a)
		for _, p := range []string{"/pks/v2/" + c, "/pks/v2/" + c + "/"} {
			a = e.get(p)
			if a.code != http.StatusForbidden {
				t.Errorf("GET %s: %d, want 403", p, a.code)
			}
			cors("GET "+p, a)
		}
	}
	// §5.2.6: OPTIONS on the submission category answers "an Allow:
	// response header that includes the value POST" and "one or more
	// Accept: response headers".
	a := e.do("OPTIONS", "/pks/v2/certs", nil, "Origin: https://evil.example", "Access-Control-Request-Method: POST")
	if a.code != http.StatusOK || !strings.Contains(a.header.Get("Allow"), "POST") || !slices.Contains(a.header.Values("Accept"), v2.MediaType) {
		t.Errorf("OPTIONS certs: %d %v", a.code, a.header)
	}
	cors("OPTIONS certs", a)
	// §4.2: "501 Not implemented": "The requested category/operation is
	// not supported". The prefix log is not wired here; sendtoken and PUT
	// canonical are not served.
	for _, r := range []struct{ method, path string }{
		{"OPTIONS", "/pks/v2/prefixlog"}, {"GET", "/pks/v2/prefixlog/2026-01-01"}, {"OPTIONS", "/pks/v2/not-a-category"},
		{"POST", "/pks/v2/sendtoken"}, {"PUT", "/pks/v2/canonical/alice@example.org"}, {"GET", "/pks/v2/certs/by-fingerprint/AB"},
		{"DELETE", "/pks/v2/certs/by-keyid/ABABABABABABABAB"},
	} {
		a := e.do(r.method, r.path, nil, "Origin: https://evil.example")
		if a.code != http.StatusNotImplemented {
			t.Errorf("%s %s: %d, want 501", r.method, r.path, a.code)
		}
		cors(r.method+" "+r.path, a)
	}
	cors("404", e.get("/pks/v2/certs/by-keyid/ABABABABABABABAB"))
	cors("400", e.get("/pks/v2/certs/by-keyid/zz"))
}

// TestEmailLookupsShareTheBudget: every v2 lookup by an address counts
// against the client's email_lookups_per_minute, the budget the other
// protocols' email lookups share; lookups by key do not.
func TestEmailLookupsShareTheBudget(t *testing.T) {
	e := newEnv(t, envOptions{lookupsPerMinute: 3})
	for _, p := range []string{"certs/by-identity", "index", "canonical"} {
		if a := e.get("/pks/v2/" + p + "/nobody@example.org"); a.code != http.StatusNotFound {
			t.Fatalf("%s: %d", p, a.code)
		}
	}
	for i := 0; i < 5; i++ {
		if a := e.get("/pks/v2/certs/by-keyid/ABABABABABABABAB"); a.code != http.StatusNotFound {
			t.Fatalf("by-keyid: %d", a.code)
		}
	}
	a := e.get("/pks/v2/certs/by-identity/nobody@example.org")
	if a.code != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" || a.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("fourth lookup by address: %d %v", a.code, a.header)
	}
}

func keysByFingerprint(fp []byte) keys.Query { return keys.Query{Fingerprint: fp, Limit: 1} }

// firstAddress returns the address of the first user ID of the key that
// carries one.
func firstAddress(t *testing.T, packets []byte) string {
	t.Helper()
	k, err := pgp.ParseKey(packets)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range k.Packets() {
		if p.Tag == pgp.TagUserID {
			if a := pgp.UserIDAddress(string(p.Body)); a != "" {
				return a
			}
		}
	}
	t.Fatalf("key %X has no address", k.Fingerprint())
	return ""
}

func findIndexed(ix []v2.IndexKey, fp string) *v2.IndexKey {
	for i := range ix {
		if ix[i].Fingerprint == fp {
			return &ix[i]
		}
	}
	return nil
}

func rfc3339UTC(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil && strings.HasSuffix(s, "Z")
}

// onlyPrimary returns the key's primary key packet alone.
func onlyPrimary(t *testing.T, b []byte) []byte {
	t.Helper()
	k, err := pgp.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return pgp.NewKey(k.Packets()[:1]).Bytes()
}

// TestProviderCorroborationIsPartialConfidence: a user-ID address that a
// provider verified for the identity the key is linked to is more than a
// claim, and less than a followed mail link: the index gives it partial
// confidence (60), and the authoritative lookup still does not answer it.
// The identity's records (an OpenID login, its provider's email
// assertion, the key linked by its own signature) are written as the
// service writes them after checking the login and signatures, which
// other packages test; here they are appended directly.
func TestProviderCorroborationIsPartialConfidence(t *testing.T) {
	e := newEnv(t, envOptions{})
	k := newKey(t, false, "Erin <erin@example.org>", "Erin at work <erin@work.example>")
	if a, _ := e.submit(k); a.code != http.StatusOK {
		t.Fatalf("submission: %d %s", a.code, a.body)
	}
	fp := fingerprintOf(t, k)
	key := identity.PGPFactor(fp)
	acct := identity.OIDCFactor("https://accounts.example", "erin-1")
	now := time.Now()
	err := e.st.Update(t.Context(), func(ctx context.Context, tx identity.Tx) error {
		if _, err := tx.CreateIdentity(ctx, "erin", now); err != nil {
			return err
		}
		for _, r := range []*identity.Evidence{
			{Method: identity.MethodOIDCLogin, Purpose: identity.PurposeClaim, Handle: "erin", From: acct, Created: now},
			{Method: identity.MethodOIDCEmailVerified, Handle: "erin", From: acct, To: identity.EmailFactor("erin@example.org"), Created: now},
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeAdd, Handle: "erin", From: acct, To: key, Created: now},
			{Method: identity.MethodPGPChallenge, Purpose: identity.PurposeAdd, Handle: "erin", From: key, Created: now},
		} {
			if err := tx.Append(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The key's own records (its user IDs' claims), as the upload path
	// writes them for a linked key.
	if err := e.svc.SyncKey(t.Context(), fp); err != nil {
		t.Fatal(err)
	}
	ix := e.index("erin@example.org")
	if len(ix) != 1 {
		t.Fatalf("index: %+v", ix)
	}
	got := map[string]int{}
	for _, u := range ix[0].UserIDs {
		got[u.UIDString] = u.Confidence
	}
	if got["Erin <erin@example.org>"] != v2.ConfidenceCorroborated || got["Erin at work <erin@work.example>"] != v2.ConfidenceClaimed {
		t.Errorf("confidences %v: want the provider's address partial, the other a claim", got)
	}
	if a := e.get("/pks/v2/canonical/erin@example.org"); a.code != http.StatusNotFound {
		t.Errorf("canonical of a corroborated address: %d, want 404: only a followed mail link is authoritative", a.code)
	}
	e.verifyByMail(fp, "erin@example.org")
	for _, u := range e.index("erin@example.org")[0].UserIDs {
		if u.UIDString == "Erin <erin@example.org>" && u.Confidence != v2.ConfidenceVerified {
			t.Errorf("after the mail link: %+v, want complete confidence", u)
		}
	}
}

// TestByVFingerprintPrefersThePrimaryKey: anyone can bind another
// person's public key to a key of their own as an encryption subkey (no
// back-signature is needed for one). Such a key, stored before its
// victim's, must not be the answer for the victim's fingerprint: the key
// whose primary key has it is.
func TestByVFingerprintPrefersThePrimaryKey(t *testing.T) {
	e := newEnv(t, envOptions{})
	victimKey, malloryKey, victimFP, err := keygen.GraftedSubkey()
	if err != nil {
		t.Fatal(err)
	}
	fp := strings.ToUpper(hex.EncodeToString(victimFP))
	// Mallory's key first, so that it is the older row.
	if a, sub := e.submit(malloryKey); a.code != http.StatusOK || len(sub.Inserted) != 1 {
		t.Fatalf("mallory's key: %d %s", a.code, a.body)
	}
	if a := e.get("/pks/v2/certs/by-vfingerprint/04/" + fp); a.code != http.StatusOK {
		t.Fatalf("the grafted subkey is not stored (the test needs it): %d %s", a.code, a.body)
	}
	if a, sub := e.submit(victimKey); a.code != http.StatusOK || len(sub.Inserted) != 1 {
		t.Fatalf("victor's key: %d %s", a.code, a.body)
	}
	a := e.get("/pks/v2/certs/by-vfingerprint/04/" + fp)
	if fps, _ := answered(t, a.body); a.code != http.StatusOK || len(fps) != 1 || fps[0] != fp {
		t.Errorf("by-vfingerprint of victor's key: %d, keys %v, want only %s", a.code, fps, fp)
	}
}
