package hkp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/recon"
)

func hashQueryBody(digests ...[16]byte) []byte { return recon.MarshalHashQueryRequest(digests) }

// readHashQueryResponse decodes a response as a peer does, and checks
// that it ends with CRLF as SKS's do.
func readHashQueryResponse(t *testing.T, b []byte) [][]byte {
	t.Helper()
	if !bytes.HasSuffix(b, []byte("\r\n")) {
		t.Fatalf("response ends with %q, want CRLF", b[max(len(b)-8, 0):])
	}
	var keys [][]byte
	err := recon.ReadHashQueryResponse(bytes.NewReader(b), recon.HashQueryLimits{MaxKeys: 1 << 20}, func(key []byte) error {
		keys = append(keys, bytes.Clone(key))
		return nil
	})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return keys
}

func TestHashQueryResponseStopsAtSizeCap(t *testing.T) {
	packets := map[string][]byte{"a": bytes.Repeat([]byte{1}, 100), "b": bytes.Repeat([]byte{2}, 100), "c": bytes.Repeat([]byte{3}, 100)}
	var ks []keys.Stored
	for _, fp := range []string{"a", "b", "c"} {
		ks = append(ks, keys.Stored{Fingerprint: []byte(fp), Size: len(packets[fp])})
	}
	n := hashQueryFit(ks, 250)
	if n != 2 {
		t.Fatalf("%d keys fit, want 2", n)
	}
	stream := func(_ context.Context, fps [][]byte, fn func(fp, packets []byte) error) error {
		for _, fp := range fps {
			if err := fn(fp, packets[string(fp)]); err != nil {
				return err
			}
		}
		return nil
	}
	var out bytes.Buffer
	if err := writeHashQueryResponse(context.Background(), &out, ks[:n], stream); err != nil {
		t.Fatal(err)
	}
	if int64(out.Len()) != hashQueryLength(ks[:n]) {
		t.Errorf("wrote %d bytes, Content-Length says %d", out.Len(), hashQueryLength(ks[:n]))
	}
	got := readHashQueryResponse(t, out.Bytes())
	if len(got) != 2 || got[1][0] != 2 {
		t.Errorf("response keys %v", got)
	}
}

// hangingUpPeer is the client end of a hashquery answer that hangs up
// (hangUp, which cancels the request's context as net/http does) once it
// has read at least after bytes.
type hangingUpPeer struct {
	got    bytes.Buffer
	after  int
	hangUp func()
}

func (p *hangingUpPeer) Write(b []byte) (int, error) {
	p.got.Write(b)
	if p.got.Len() >= p.after {
		p.hangUp()
	}
	return len(b), nil
}

// TestHashQueryAnswerStandsWhenThePeerHangsUpAfterTheLastKey: SKS reads
// the key count and the keys, then closes the connection without reading
// the trailing CRLF, which cancels the request's context while the store
// may still be reading the end of its result (PostgreSQL's stream then
// fails with the context's error). An answer whose every key was written
// is whole and must not fail; one cut before its last key still fails.
func TestHashQueryAnswerStandsWhenThePeerHangsUpAfterTheLastKey(t *testing.T) {
	packets := map[string][]byte{"a": bytes.Repeat([]byte{1}, 5000), "b": bytes.Repeat([]byte{2}, 7000), "c": bytes.Repeat([]byte{3}, 6000)}
	var ks []keys.Stored
	for _, fp := range []string{"a", "b", "c"} {
		ks = append(ks, keys.Stored{Fingerprint: []byte(fp), Size: len(packets[fp])})
	}
	// stream reads as the PostgreSQL store does: each row, then the end of
	// the result, and a read after ctx is cancelled fails with ctx's error.
	stream := func(ctx context.Context, fps [][]byte, fn func(fp, packets []byte) error) error {
		for _, fp := range fps {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(fp, packets[string(fp)]); err != nil {
				return err
			}
		}
		return ctx.Err()
	}
	whole := int(hashQueryLength(ks))
	firstKey := 4 + 4 + ks[0].Size
	for _, tc := range []struct {
		name      string
		hangUpAt  int
		wantWhole bool
	}{
		{"after the last key, before the CRLF", whole - 2, true},
		{"after the first key", firstKey, false},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		peer := &hangingUpPeer{after: tc.hangUpAt, hangUp: cancel}
		err := writeHashQueryResponse(ctx, peer, ks, stream)
		cancel()
		if tc.wantWhole {
			if err != nil {
				t.Errorf("peer hung up %s: the answer failed: %v", tc.name, err)
				continue
			}
			if got := readHashQueryResponse(t, peer.got.Bytes()); len(got) != len(ks) || peer.got.Len() != whole {
				t.Errorf("peer hung up %s: %d keys in %d bytes, want %d in %d", tc.name, len(got), peer.got.Len(), len(ks), whole)
			}
		} else if err == nil {
			t.Errorf("peer hung up %s: the answer of %d bytes (of %d) did not fail", tc.name, peer.got.Len(), whole)
		}
	}
}

func TestHashQueryServesStoredKeys(t *testing.T) {
	ts := newTestServer(t, Options{MaxHashQueryDigests: 5})
	var digests [][16]byte
	want := map[[16]byte]bool{}
	for i := 0; i < 3; i++ {
		e := newEntity(t, fmt.Sprintf("Peer Key %d", i), fmt.Sprintf("p%d@example.org", i), int64(200+i))
		ts.mustAdd(armored(t, binaryKey(t, e)))
		k, _ := pgp.ParseKey(binaryKey(t, e))
		applied, _, err := pgp.DefaultPolicy().Apply(k)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, applied.Digest())
		want[applied.Digest()] = true
	}
	unknown := [16]byte{0xff}
	post := func(body []byte) (int, []byte) {
		res, err := http.Post(ts.url+"/pks/hashquery", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	code, body := post(hashQueryBody(append(digests, unknown)...))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	got := readHashQueryResponse(t, body)
	if len(got) != 3 {
		t.Fatalf("%d keys, want 3", len(got))
	}
	for _, b := range got {
		k, err := pgp.ParseKey(b)
		if err != nil || !want[k.Digest()] {
			t.Errorf("served key %v digest not asked for", err)
		}
	}
	for name, tc := range map[string]struct {
		body []byte
		code int
	}{
		"too many digests":  {hashQueryBody(digests[0], digests[0], digests[0], digests[0], digests[0], digests[0]), http.StatusRequestEntityTooLarge},
		"count over cap":    {append(binary.BigEndian.AppendUint32(nil, 6), make([]byte, 20)...), http.StatusBadRequest},
		"garbage":           {[]byte("hello world, not a hashquery"), http.StatusBadRequest},
		"truncated":         {hashQueryBody(digests[0])[:10], http.StatusBadRequest},
		"nothing asked for": {hashQueryBody(), http.StatusOK},
	} {
		code, body := post(tc.body)
		if code != tc.code {
			t.Errorf("%s: %d %q, want %d", name, code, body, tc.code)
		}
	}
}

// TestHashQueryObeysMaxAnswerSize: op=get's answer cap (hkp.max_answer_bytes)
// bounds a hashquery answer too; it carries the keys that fit, so that a
// peer stores those and asks again for the rest.
func TestHashQueryObeysMaxAnswerSize(t *testing.T) {
	ts := newTestServer(t, Options{})
	var digests [][16]byte
	for i := 0; i < 3; i++ {
		e := newEntity(t, fmt.Sprintf("Capped Key %d", i), fmt.Sprintf("c%d@example.org", i), int64(300+i))
		ts.mustAdd(armored(t, binaryKey(t, e)))
		k, _ := pgp.ParseKey(binaryKey(t, e))
		applied, _, err := pgp.DefaultPolicy().Apply(k)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, applied.Digest())
	}
	post := func(url string) [][]byte {
		t.Helper()
		res, err := http.Post(url+"/pks/hashquery", "application/octet-stream", bytes.NewReader(hashQueryBody(digests...)))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("hashquery: %d %s", res.StatusCode, b)
		}
		return readHashQueryResponse(t, b)
	}
	all := post(ts.url)
	total := 0
	for _, k := range all {
		total += len(k)
	}
	if len(all) != 3 {
		t.Fatalf("uncapped hashquery: %d keys, want 3", len(all))
	}

	capped := newTestServerOn(t, ts.store, Options{MaxAnswerSize: total - 1})
	got := post(capped.url)
	sent := 0
	for _, k := range got {
		sent += len(k)
	}
	if len(got) == 0 || len(got) >= 3 || sent > total-1 {
		t.Errorf("hashquery under a %d-byte answer cap: %d keys of %d bytes, want 1 or 2 keys within the cap", total-1, len(got), sent)
	}
}
