package hkp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
)

// rywRounds is how many write-then-read rounds each read-your-writes test
// makes; rywPerKey is how many of them one key takes (it gains a user ID
// each round).
const (
	rywRounds = 200
	rywPerKey = 20
)

// readYourWrites writes a new user ID each round with write and reads it
// back at once through ts, the cache warm with the answers the write
// outdates. ts's store delivers no notifications, so only the write's own
// invalidation can make the answers fresh.
func readYourWrites(t *testing.T, ts *testServer, write func(bin []byte)) {
	t.Helper()
	var fp, get string
	var e *openpgp.Entity
	for i := range rywRounds {
		if i%rywPerKey == 0 {
			e = newEntity(t, fmt.Sprintf("Ryw Key%d", i), fmt.Sprintf("key%d@ryw.example", i), int64(1000+i))
			write(binaryKey(t, e))
			fp = "op=index&options=mr&search=0x" + fpHex(e)
			get = "op=get&options=mr&search=0x" + fpHex(e)
		}
		word := fmt.Sprintf("round%dword", i)
		email := fmt.Sprintf("r%d@ryw.example", i)
		byWord := "op=index&options=mr&search=" + word
		byEmail := "op=index&options=mr&search=" + email
		queries := []string{fp, get, byWord, byEmail}
		for _, q := range queries {
			ts.lookup(q)
			if !ts.cachedAnswer(q) {
				t.Fatalf("round %d: %s not cached; the test no longer tests the cache", i, q)
			}
		}
		uid := fmt.Sprintf("Ryw %s <%s>", word, email)
		if err := e.AddUserId("Ryw "+word, "", email, laterConfig(time.Duration(i+1)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		write(binaryKey(t, e))
		for _, q := range []string{fp, byWord, byEmail} {
			if r := ts.lookup(q); r.code != 200 || !strings.Contains(r.body, "uid:"+uid+":") {
				t.Fatalf("round %d: %s right after the write: stale %d\n%s", i, q, r.code, r.body)
			}
		}
		r := ts.lookup(get)
		k, err := pgp.ParseKey([]byte(r.body))
		if err != nil {
			t.Fatalf("round %d: get: %d %v", i, r.code, err)
		}
		if n := len(k.Describe().UserIDs); n != i%rywPerKey+2 {
			t.Fatalf("round %d: get right after the write: stale key with %d user IDs", i, n)
		}
	}
}

// TestReadYourWritesThroughAdd uploads through /pks/add and looks up on
// the same node at once.
func TestReadYourWritesThroughAdd(t *testing.T) {
	ts := newTestServerOn(t, deafStore{pgtest.NewStore(t)}, Options{})
	readYourWrites(t, ts, func(bin []byte) {
		t.Helper()
		if r := ts.add(armored(t, bin)); r.code != 200 || strings.Contains(r.body, "rejected  ") {
			t.Fatalf("add: %d %s", r.code, r.body)
		}
	})
}

// TestReadYourWritesThroughKeysService writes through the keys Service
// but not through HKP, as the web upload and recon do, and looks up
// through the HKP handler the Service tells at once.
func TestReadYourWritesThroughKeysService(t *testing.T) {
	ts := newTestServerOn(t, deafStore{pgtest.NewStore(t)}, Options{})
	readYourWrites(t, ts, func(bin []byte) {
		t.Helper()
		k, err := pgp.ParseKey(bin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.keys.Upload(context.Background(), k, keys.UploadOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
