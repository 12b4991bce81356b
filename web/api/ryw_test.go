package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/web/api"
)

// goKey is an Ed25519 SSH key that signs in process, as ssh-keygen -Y
// sign does, so that a loop of hundreds of writes is not hundreds of
// ssh-keygen runs.
type goKey struct {
	pub    string // public key line
	signer gossh.Signer
}

func newGoKey(t testing.TB, comment string) goKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey())))
	return goKey{pub: line + " " + comment, signer: s}
}

// sign returns an armored SSHSIG of msg in namespace ns (PROTOCOL.sshsig).
func (k goKey) sign(t testing.TB, msg, ns string) string {
	t.Helper()
	digest := sha512.Sum512([]byte(msg))
	signed := append([]byte("SSHSIG"), gossh.Marshal(struct {
		Namespace, Reserved, Hash string
		Digest                    []byte
	}{ns, "", "sha512", digest[:]})...)
	sig, err := k.signer.Sign(rand.Reader, signed)
	if err != nil {
		t.Fatal(err)
	}
	blob := append([]byte("SSHSIG"), gossh.Marshal(struct {
		Version                   uint32
		PublicKey                 []byte
		Namespace, Reserved, Hash string
		Signature                 []byte
	}{1, k.signer.PublicKey().Marshal(), ns, "", "sha512", gossh.Marshal(sig)})...)
	b64 := base64.StdEncoding.EncodeToString(blob)
	var out strings.Builder
	out.WriteString("-----BEGIN SSH SIGNATURE-----\n")
	for len(b64) > 70 {
		out.WriteString(b64[:70] + "\n")
		b64 = b64[70:]
	}
	out.WriteString(b64 + "\n-----END SSH SIGNATURE-----\n")
	return out.String()
}

// rywIterations is how many add-and-revoke rounds the read-your-writes
// tests make.
const rywIterations = 200

// rywPerHandle is how many rounds one identity takes.
const rywPerHandle = 25

// addKey adds key to handle with both signatures (by authorising).
func (k *kith) addKey(handle string, key, by goKey) {
	k.t.Helper()
	s := k.challenge(handle, key.pub, "add")
	if st, code := k.call("POST", "/api/v1/identities/"+handle+"/factors", api.AddRequest{
		Statement: s, Signature: key.sign(k.t, s, "kith"), By: by.pub, BySignature: by.sign(k.t, s, "kith"),
	}, nil); st != 200 {
		k.t.Fatalf("add: %d %s", st, code)
	}
}

// revokeKey revokes key of handle by authorising.
func (k *kith) revokeKey(handle string, key, by goKey) {
	k.t.Helper()
	s := k.challenge(handle, key.pub, "revoke")
	if st, code := k.call("POST", "/api/v1/identities/"+handle+"/revocations", api.RevokeRequest{
		Statement: s, By: by.pub, Signature: by.sign(k.t, s, "kith"),
	}, nil); st != 200 {
		k.t.Fatalf("revoke: %d %s", st, code)
	}
}

// claimKey claims handle with key.
func (k *kith) claimKey(handle string, key goKey) {
	k.t.Helper()
	s := k.challenge(handle, key.pub, "claim")
	if st, code := k.call("POST", "/api/v1/identities", claim(s, key.sign(k.t, s, "kith")), nil); st != 201 {
		k.t.Fatalf("claim: %d %s", st, code)
	}
}

// getFrom fetches url and returns status and body.
func getFrom(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestReadYourWritesOnOneNode writes through the API and reads back from
// the same node at once, with the cache on and warm before every write:
// each answer must show the write, never the cached answer it replaced.
func TestReadYourWritesOnOneNode(t *testing.T) {
	k := newKithWith(t, api.Options{ChallengesPerMinute: -1})
	var handle string
	var first goKey
	for i := range rywIterations {
		if i%rywPerHandle == 0 {
			// A new identity now and then: a lookup reads the whole
			// history, which would make a long loop quadratic.
			handle, first = fmt.Sprintf("alice%d", i/rywPerHandle), newGoKey(t, "first")
			k.claimKey(handle, first)
		}
		keys, doc := "/users/"+handle+".keys", "/users/"+handle+".json"
		key := newGoKey(t, fmt.Sprintf("key%d", i))
		// Warm the cache with the answers the write must replace.
		if st, body := k.get(keys); st != 200 || strings.Contains(body, keyOnly(key.pub)) {
			t.Fatalf("round %d, before the add: %d\n%s", i, st, body)
		}
		k.get(doc)
		k.addKey(handle, key, first)
		if st, body := k.get(keys); st != 200 || !strings.Contains(body, keyOnly(key.pub)) {
			t.Fatalf("round %d: the key just added is missing from %s (stale): %d\n%s", i, keys, st, body)
		}
		if _, body := k.get(doc); !strings.Contains(body, keyOnly(key.pub)) {
			t.Fatalf("round %d: the key just added is missing from %s (stale)\n%s", i, doc, body)
		}
		k.revokeKey(handle, key, first)
		if st, body := k.get(keys); st != 200 || strings.Contains(body, keyOnly(key.pub)) {
			t.Fatalf("round %d: the key just revoked is still in %s (stale): %d\n%s", i, keys, st, body)
		}
		if !k.h.Listening() {
			t.Fatalf("round %d: the cache went off; the test no longer tests it", i)
		}
	}
}

// TestReadYourWritesAcrossNodes writes on one node and reads from another
// on the same database: the other node's answer must turn fresh within
// the notification delay and, once fresh, never be stale again.
func TestReadYourWritesAcrossNodes(t *testing.T) {
	k := newKithWith(t, api.Options{ChallengesPerMinute: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hb := newHandler(ctx, t, k.store, api.Options{Watcher: k.store})
	waitListening(t, hb)
	b := httptest.NewServer(hb)
	defer b.Close()
	keysB := b.URL + "/users/alice.keys"

	first := newGoKey(t, "first")
	k.claimKey("alice", first)
	// fresh waits until node B's answer satisfies ok, then checks that
	// it stays so.
	fresh := func(round int, what string, ok func(string) bool) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("round %d: node B %s", round, what), func() bool {
			st, body := getFrom(t, keysB)
			return st == 200 && ok(body)
		})
		for range 5 {
			if st, body := getFrom(t, keysB); st != 200 || !ok(body) {
				t.Fatalf("round %d: node B was fresh (%s), then stale again: %d\n%s", round, what, st, body)
			}
		}
	}
	fresh(-1, "answering for the claimed handle", func(string) bool { return true })
	const rounds = rywIterations / 4
	for i := range rounds {
		key := newGoKey(t, fmt.Sprintf("key%d", i))
		has := func(body string) bool { return strings.Contains(body, keyOnly(key.pub)) }
		hasNot := func(body string) bool { return !has(body) && strings.Contains(body, keyOnly(first.pub)) }
		fresh(i, "without the key yet", hasNot) // and cached
		k.addKey("alice", key, first)
		fresh(i, "listing the key added on node A", has)
		k.revokeKey("alice", key, first)
		fresh(i, "no longer listing the key revoked on node A", hasNot)
		if !hb.Listening() {
			t.Fatalf("round %d: node B's cache went off; the test no longer tests it", i)
		}
	}
}
