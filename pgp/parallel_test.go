package pgp

import (
	"bytes"
	"context"
	"testing"
)

// TestProcessParallelGroupsAgreeWithApply: keys checked in groups whose
// Ed25519 signatures are one batch come out exactly as Apply makes each
// alone, whatever keys with broken self-signatures (one that costs a
// user ID or subkey, one that leaves no valid self-signature) stand
// among them.
func TestProcessParallelGroupsAgreeWithApply(t *testing.T) {
	var stream bytes.Buffer
	var inputs [][]byte
	for i := range 3 * applyGroupKeys {
		e := genEntity(t, "Key", "key@example.org", int64(i+1))
		b := entityBytes(t, e)
		packets := mustParse(t, b).Packets()
		switch i {
		case 5, applyGroupKeys + 3:
			// Break the last self-signature's S: the key loses what it
			// bound (or is refused, if that was all).
			for j := len(packets) - 1; j >= 0; j-- {
				if packets[j].Tag == TagSignature {
					body := append([]byte(nil), packets[j].Body...)
					body[len(body)-3] ^= 0x20
					packets[j] = Packet{Tag: TagSignature, Body: body}
					break
				}
			}
			b = NewKey(packets).Bytes()
		case 2 * applyGroupKeys:
			// Every self-signature broken: no valid one is left.
			for j, p := range packets {
				if p.Tag == TagSignature {
					body := append([]byte(nil), p.Body...)
					body[len(body)-3] ^= 0x20
					packets[j] = Packet{Tag: TagSignature, Body: body}
				}
			}
			b = NewKey(packets).Bytes()
		}
		inputs = append(inputs, b)
		stream.Write(b)
	}
	var got []Result
	err := Policy{}.ProcessParallel(context.Background(), NewReader(bytes.NewReader(stream.Bytes())), 2, func(r Result) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(inputs) {
		t.Fatalf("%d results for %d keys", len(got), len(inputs))
	}
	refused := 0
	for i, r := range got {
		want, wantRep, wantErr := Policy{}.Apply(mustParse(t, inputs[i]))
		if r.Index != i || (r.Err == nil) != (wantErr == nil) || r.Report != wantRep {
			t.Fatalf("key %d: got index %d, %v, %v; alone: %v, %v", i, r.Index, r.Err, r.Report, wantErr, wantRep)
		}
		if wantErr != nil {
			refused++
			continue
		}
		if !bytes.Equal(r.Key.Bytes(), want.Bytes()) {
			t.Fatalf("key %d: packets differ from Apply's", i)
		}
	}
	if refused != 1 || got[5].Report.Count(DropBadSelfSignature) != 1 || got[applyGroupKeys+3].Report.Count(DropBadSelfSignature) != 1 {
		t.Fatalf("the broken keys were not caught: %d refused, reports %v, %v", refused, got[5].Report, got[applyGroupKeys+3].Report)
	}
}
