package hkp

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/pgp"
)

func TestParseLookupNormalisesSearch(t *testing.T) {
	fp40 := "0123456789ABCDEF0123456789ABCDEF01234567"
	fp64 := "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
	for _, tc := range []struct {
		name, query string
		kind        string // short, long, fp, email, words, digest
		value       string
	}{
		{"short key ID", "op=get&search=0xDEADBEEF", "short", "deadbeef"},
		{"long key ID lower", "op=get&search=0xdeadbeefcafebabe", "long", "deadbeefcafebabe"},
		{"long key ID 0X", "op=get&search=0XDEADBEEFCAFEBABE", "long", "deadbeefcafebabe"},
		{"v4 fingerprint", "op=get&search=0x" + fp40, "fp", fp40},
		{"v6 fingerprint", "op=get&search=0x" + fp64, "fp", fp64},
		{"fingerprint without 0x", "op=index&search=" + fp40, "fp", fp40},
		{"fingerprint with spaces", "op=index&search=" + url.QueryEscape("0123 4567 89AB CDEF 0123  4567 89AB CDEF 0123 4567"), "fp", fp40},
		{"email", "op=index&search=Alice@Example.org", "email", "alice@example.org"},
		{"email in brackets", "op=index&search=%3Calice%40example.org%3E", "email", "alice@example.org"},
		{"words", "op=index&search=Alice+Example", "words", "alice example"},
		{"words with punctuation and duplicates", "op=index&search=" + url.QueryEscape("Smith, John (work) smith"), "words", "john smith work"},
		{"name with address", "op=index&search=" + url.QueryEscape("Alice <alice@example.org>"), "words", "alice example org"},
		{"hget digest", "op=hget&search=00112233445566778899AABBCCDDEEFF", "digest", "00112233445566778899aabbccddeeff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tc.query)
			l, err := parseLookup(v)
			if err != nil {
				t.Fatal(err)
			}
			q := l.query
			var kind, value string
			switch {
			case l.op == "hget":
				kind, value = "digest", hexs(l.digest[:])
			case q.HasShortKeyID:
				kind, value = "short", hexs([]byte{byte(q.ShortKeyID >> 24), byte(q.ShortKeyID >> 16), byte(q.ShortKeyID >> 8), byte(q.ShortKeyID)})
			case q.KeyID != 0:
				var b []byte
				for i := 7; i >= 0; i-- {
					b = append(b, byte(q.KeyID>>(8*i)))
				}
				kind, value = "long", hexs(b)
			case q.Fingerprint != nil:
				kind, value = "fp", hexs(q.Fingerprint)
			case q.Email != "":
				kind, value = "email", q.Email
			case q.Words != nil:
				kind = "words"
				for i, w := range q.Words {
					if i > 0 {
						value += " "
					}
					value += w
				}
			}
			if kind != tc.kind || !equalFoldHex(value, tc.value) {
				t.Errorf("got %s %q, want %s %q", kind, value, tc.kind, tc.value)
			}
		})
	}
}

func hexs(b []byte) string {
	const d = "0123456789abcdef"
	var out []byte
	for _, c := range b {
		out = append(out, d[c>>4], d[c&15])
	}
	return string(out)
}

func equalFoldHex(a, b string) bool { return bytes.EqualFold([]byte(a), []byte(b)) }

func TestParseLookupRejectsBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		notImpl     bool
	}{
		{"missing op", "search=0xDEADBEEF", false},
		{"unknown op", "op=frobnicate&search=x", true},
		{"missing search", "op=get", false},
		{"empty search", "op=index&search=+++", false},
		{"odd hex", "op=get&search=0xABC", false},
		{"bad hex", "op=get&search=0xZZZZZZZZ", false},
		{"hex of wrong length", "op=get&search=0x0123456789", false},
		{"no words", "op=index&search=%21%21%21", false},
		{"hget not a digest", "op=hget&search=alice", false},
		{"too many words", "op=index&search=a+b+c+d+e+f+g+h+i+j+k+l+m+n+o+p+q+r", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tc.query)
			_, err := parseLookup(v)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := errors.Is(err, errNotImplemented); got != tc.notImpl {
				t.Errorf("not implemented = %v, want %v (%v)", got, tc.notImpl, err)
			}
		})
	}
}

func TestCacheKeyIsNormalised(t *testing.T) {
	key := func(q string) string {
		v, _ := url.ParseQuery(q)
		l, err := parseLookup(v)
		if err != nil {
			t.Fatal(err)
		}
		return l.cacheKey()
	}
	same := [][]string{
		{"op=get&search=0xDEADBEEFCAFEBABE&options=mr", "op=get&options=mr&search=0xdeadbeefcafebabe", "op=GET&search=0XDEADBEEFCAFEBABE&options=MR"},
		{"op=index&search=Alice+Smith", "op=index&search=smith+ALICE", "op=index&search=Alice,Smith"},
		{"op=index&search=alice@example.org&options=mr&fingerprint=on", "op=index&search=%3CAlice@Example.org%3E&options=mr"},
	}
	for _, group := range same {
		for _, q := range group[1:] {
			if key(q) != key(group[0]) {
				t.Errorf("%q and %q have different cache keys", q, group[0])
			}
		}
	}
	different := []string{
		"op=get&search=0xDEADBEEFCAFEBABE",
		"op=get&search=0xDEADBEEFCAFEBABE&options=mr",
		"op=index&search=0xDEADBEEFCAFEBABE",
		"op=index&search=0xDEADBEEFCAFEBABE&fingerprint=on",
		"op=vindex&search=0xDEADBEEFCAFEBABE",
		"op=get&search=0xCAFEBABE",
	}
	var keys []string
	for _, q := range different {
		keys = append(keys, key(q))
	}
	slices.Sort(keys)
	if len(slices.Compact(keys)) != len(different) {
		t.Errorf("distinct requests share cache keys: %q", keys)
	}
}

func TestLookupFindsKeyByEverySearchForm(t *testing.T) {
	ts := newTestServer(t, Options{})
	alice := newEntity(t, "Alice Liddell", "alice@example.org", 100)
	if err := alice.AddSigningSubkey(laterConfig(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ts.mustAdd(armored(t, binaryKey(t, alice)))
	ts.mustAdd(armored(t, binaryKey(t, newEntity(t, "Bob Other", "bob@example.org", 101))))
	fp := fpHex(alice)
	sub := alice.Subkeys[1].PublicKey
	spaced := ""
	for i := 0; i < len(fp); i += 4 {
		spaced += fp[i:i+4] + " "
	}
	for _, search := range []string{
		"0x" + fp,
		"0x" + strings.ToLower(fp),
		fp,
		spaced,
		"0x" + fp[24:],
		"0x" + fp[32:],
		fmt.Sprintf("0x%X", sub.Fingerprint),
		fmt.Sprintf("0x%016X", sub.KeyId),
		fmt.Sprintf("0x%08X", uint32(sub.KeyId)),
		"alice@example.org",
		"ALICE@example.org",
		"<alice@example.org>",
		"alice",
		"Liddell ALICE",
	} {
		for _, op := range []string{"get", "index"} {
			r := ts.lookup("op=" + op + "&options=mr&search=" + url.QueryEscape(search))
			if r.code != http.StatusOK {
				t.Errorf("%s %q: %d %s", op, search, r.code, r.body)
				continue
			}
			if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("X-HKP-Results-Count") != "1" ||
				r.header.Get("Cache-Control") != "max-age=300" {
				t.Errorf("%s %q: headers %v", op, search, r.header)
			}
			switch op {
			case "get":
				if ct := r.header.Get("Content-Type"); ct != "application/pgp-keys" {
					t.Errorf("get Content-Type %q", ct)
				}
				k, err := pgp.ParseKey([]byte(r.body))
				if err != nil || fmt.Sprintf("%X", k.Fingerprint()) != fp {
					t.Errorf("get %q: %v", search, err)
				}
			case "index":
				if !strings.HasPrefix(r.body, "info:1:1\npub:"+fp+":22:255:1614834367::\nuid:Alice Liddell <alice@example.org>:1614834367::\n") {
					t.Errorf("index %q:\n%s", search, r.body)
				}
			}
		}
	}
}

func TestLookupAnswersNotFoundWith404(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.mustAdd(armored(t, binaryKey(t, newEntity(t, "Carol", "carol@example.org", 110))))
	for _, q := range []string{
		"op=get&options=mr&search=0xDEADBEEFDEADBEEF",
		"op=get&options=mr&search=0xDEADBEEF",
		"op=index&options=mr&search=nobody@example.org",
		"op=index&search=zebra",
		"op=vindex&search=0x0123456789ABCDEF0123456789ABCDEF01234567",
		"op=hget&search=00000000000000000000000000000000",
	} {
		r := ts.lookup(q)
		if r.code != http.StatusNotFound || r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d %v %q", q, r.code, r.header, r.body)
		}
	}
}

func TestLookupRejectsBadRequestsWith4xx(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/pks/lookup?op=frobnicate&search=x", http.StatusNotImplemented},
		{"GET", "/pks/lookup?op=x-kith-secret&search=x", http.StatusNotImplemented},
		{"GET", "/pks/lookup?search=alice", http.StatusBadRequest},
		{"GET", "/pks/lookup?op=get", http.StatusBadRequest},
		{"GET", "/pks/lookup?op=get&search=0xZZZ", http.StatusBadRequest},
		{"GET", "/pks/lookup?op=get&search=0x123", http.StatusBadRequest},
		{"GET", "/pks/lookup?op=index&search=%2B%2B%2B", http.StatusBadRequest},
		{"GET", "/pks/lookup?op=hget&search=nothex", http.StatusBadRequest},
		{"GET", "/pks/lookup?op=get&search=" + strings.Repeat("a", 2000), http.StatusBadRequest},
		{"GET", "/pks/lookup?op=get&search=%ff%fe", http.StatusBadRequest},
		{"POST", "/pks/lookup?op=get&search=alice", http.StatusMethodNotAllowed},
		{"GET", "/pks/add", http.StatusMethodNotAllowed},
		{"GET", "/pks/nothing", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, ts.url+tc.path, nil)
		r := ts.do(req)
		if r.code != tc.code {
			t.Errorf("%s %s: %d %q, want %d", tc.method, tc.path, r.code, r.body, tc.code)
		}
	}
}

func TestLookupCapsBroadSearches(t *testing.T) {
	ts := newTestServer(t, Options{})
	var bins [][]byte
	for i := 0; i < 150; i++ {
		bins = append(bins, binaryKey(t, newEntity(t, fmt.Sprintf("Cohort Member %d", i), fmt.Sprintf("m%d@cohort.example", i), int64(1000+i))))
	}
	r := ts.add(armored(t, bins...), "Accept", "application/json")
	if r.code != 200 || !strings.Contains(r.body, `"inserted": 150`) {
		t.Fatalf("add: %d %s", r.code, truncate(r.body, 300))
	}
	before := ts.keyCount()

	r = ts.lookup("op=index&options=mr&search=cohort")
	if r.code != http.StatusOK || !strings.HasPrefix(r.body, "info:1:100\n") || strings.Count(r.body, "\npub:") != 100 ||
		r.header.Get("X-HKP-Results-Truncated") != "true" || r.header.Get("X-HKP-Results-Count") != "100" {
		t.Errorf("mr index: %d %v %s", r.code, r.header, truncate(r.body, 200))
	}
	r = ts.lookup("op=index&search=cohort+member")
	if r.code != http.StatusOK || !strings.Contains(r.body, "More than 100 keys match") || strings.Count(r.body, "<strong>pub</strong>") != 100 {
		t.Errorf("html index: %d %s", r.code, truncate(r.body, 400))
	}
	// The HTML index wears the site's stylesheet and header.
	if !strings.Contains(r.body, `<link rel="stylesheet" href="/static/kith.css">`) || !strings.Contains(r.body, `<header class="site">`) {
		t.Errorf("html index does not look like the site: %s", truncate(r.body, 400))
	}
	r = ts.lookup("op=get&options=mr&search=cohort")
	if r.code != http.StatusBadRequest || !strings.Contains(r.body, "too many keys match") {
		t.Errorf("get: %d %s", r.code, truncate(r.body, 200))
	}
	if ts.keyCount() != before {
		t.Error("lookups changed the store")
	}
}

func TestVIndexListsSubkeysAndSignatures(t *testing.T) {
	ts := newTestServer(t, Options{})
	e := newEntity(t, `Dora & Co "Explorer"`, "dora@example.org", 120)
	ts.mustAdd(armored(t, binaryKey(t, e)))
	r := ts.lookup("op=vindex&search=dora@example.org")
	if r.code != http.StatusOK || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %v", r.code, r.header)
	}
	for _, want := range []string{
		"Dora &amp; Co &#34;Explorer&#34; &lt;dora@example.org&gt;",
		"<strong>sub</strong>  cv25519/",
		"sig3          self",
		"sbind         self",
		"Fingerprint=" + pgp.GroupFingerprint(fpHex(e)),
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("vindex lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "<dora@") {
		t.Error("user ID not escaped")
	}
}

func TestHGetServesKeyByDigest(t *testing.T) {
	ts := newTestServer(t, Options{})
	e := newEntity(t, "Eve", "eve@example.org", 130)
	ts.mustAdd(armored(t, binaryKey(t, e)))
	k, _ := pgp.ParseKey(binaryKey(t, e))
	applied, _, err := pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	r := ts.lookup("op=hget&search=" + applied.DigestHex())
	if r.code != 200 || r.header.Get("Content-Type") != "application/pgp-keys" {
		t.Fatalf("%d %s", r.code, r.body)
	}
	got, err := pgp.ParseKey([]byte(r.body))
	if err != nil || got.Digest() != applied.Digest() {
		t.Errorf("hget served another key: %v", err)
	}
}

// Lookup answers name their header fields in canonical form, as
// Header.Set would: writeAnswer sets them without canonicalizing, for
// every answer (found, cached, several keys, truncated, not found,
// refused).
func TestLookupHeaderNamesAreCanonical(t *testing.T) {
	ts := newTestServer(t, Options{MaxResults: 1})
	a := newEntity(t, "Grace Hopper", "grace@example.org", 420)
	b := newEntity(t, "Grace Other", "other@example.org", 421)
	ts.mustAdd(armored(t, binaryKey(t, a), binaryKey(t, b)))
	for _, q := range []string{
		"op=get&options=mr&search=0x" + fpHex(a),
		"op=get&options=mr&search=0x" + fpHex(a), // cached
		"op=index&options=mr&search=grace",       // truncated at one key
		"op=vindex&search=hopper",
		"op=hget&search=00000000000000000000000000000000",
		"op=index&search=nobody-at-all",
		"op=nonsense&search=x",
	} {
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pks/lookup?"+q, nil))
		if len(rec.Header()) < 2 {
			t.Errorf("%s: %d header fields", q, len(rec.Header()))
		}
		for name := range rec.Header() {
			if name != http.CanonicalHeaderKey(name) {
				t.Errorf("%s: header field %q is not in canonical form", q, name)
			}
		}
	}
}
