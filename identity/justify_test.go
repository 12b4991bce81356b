package identity

import (
	"slices"
	"testing"
	"time"
)

// TestJustificationLeadsToTheIdentity: a factor's justification holds
// the records that prove it and those that link what authorised or
// carries it to the identity, and nothing for a factor no record names.
func TestJustificationLeadsToTheIdentity(t *testing.T) {
	now := time.Now()
	pgpKey := Factor{Kind: KindPGP, Value: "AB"}
	k1, k2, sub := Factor{Kind: KindSSH, Value: "k1"}, Factor{Kind: KindSSH, Value: "k2"}, Factor{Kind: KindSSH, Value: "sub"}
	recs := []Evidence{
		{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
		{Seq: 2, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k1, To: k2},
		{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k2},
		{Seq: 4, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k1, To: pgpKey},
		{Seq: 5, Method: MethodPGPChallenge, Purpose: PurposeAdd, Handle: "a", From: pgpKey},
		{Seq: 6, Method: MethodPGPAuthSubkeySigned, From: pgpKey, To: sub},
	}
	a := Assess("a", recs, now)
	for _, tt := range []struct {
		f    Factor
		want []int64
	}{
		{k1, []int64{1}},
		{k2, []int64{1, 2, 3}},
		{pgpKey, []int64{1, 4, 5}},
		{sub, []int64{1, 4, 5, 6}},
		{Factor{Kind: KindSSH, Value: "none"}, nil},
	} {
		if got := a.Justification(tt.f, recs); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.f, got, tt.want)
		}
	}
}
