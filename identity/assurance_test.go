package identity

import (
	"testing"
	"time"
)

func TestAssessAppliesTheRules(t *testing.T) {
	now := time.Now()
	pgpKey := Factor{Kind: KindPGP, Value: "AB"}
	k1, k2, k3 := Factor{Kind: KindSSH, Value: "k1"}, Factor{Kind: KindSSH, Value: "k2"}, Factor{Kind: KindSSH, Value: "k3"}
	sub := Factor{Kind: KindSSH, Value: "sub"}
	mail := Factor{Kind: KindEmail, Value: "a@example.org"}
	stranger := Factor{Kind: KindSSH, Value: "stranger"}
	past := now.Add(-time.Hour)
	tests := []struct {
		name string
		recs []Evidence
		want map[string]Level
	}{
		{"claim proves its factor", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
		}, map[string]Level{"k1": LevelProven}},
		{"add needs consent and possession", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
			{Seq: 2, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k1, To: k2},
			{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k2},
			{Seq: 4, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k1, To: k3},
		}, map[string]Level{"k1": LevelProven, "k2": LevelProven, "k3": LevelClaimed}},
		{"possession without consent links nothing", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
			{Seq: 2, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k2},
		}, map[string]Level{"k1": LevelProven, "k2": LevelNone}},
		{"consent by an unproven factor counts for nothing", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
			{Seq: 2, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: stranger, To: k2},
			{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k2},
		}, map[string]Level{"k2": LevelNone}},
		{"revocation by a proven factor", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
			{Seq: 2, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k1, To: k2},
			{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: k2},
			{Seq: 4, Method: MethodRevocation, Purpose: PurposeRevoke, Handle: "a", From: k2, To: k1, Revokes: 1},
		}, map[string]Level{"k1": LevelRevoked, "k2": LevelProven}},
		{"revocation by an unproven factor is ignored", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "a", From: k1},
			{Seq: 2, Method: MethodRevocation, Purpose: PurposeRevoke, Handle: "a", From: stranger, To: k1, Revokes: 1},
		}, map[string]Level{"k1": LevelProven}},
		{"an auth subkey the SSH key did not sign and an email are only claims", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodPGPUIDSelfSig, From: pgpKey, To: mail},
		}, map[string]Level{"AB": LevelProven, "sub": LevelClaimed, "a@example.org": LevelClaimed}},
		{"an auth subkey whose binding the SSH key signed follows its key", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkeySigned, From: pgpKey, To: sub},
		}, map[string]Level{"AB": LevelProven, "sub": LevelProven}},
		{"an auth subkey is proven by the SSH key's own challenge", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: sub},
		}, map[string]Level{"sub": LevelProven}},
		{"a possession challenge before the key carries the subkey also counts", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: sub},
			{Seq: 3, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
		}, map[string]Level{"sub": LevelProven}},
		{"a proven auth subkey ends when the key stops carrying it", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: sub},
			{Seq: 4, Method: MethodRevocation, From: pgpKey, To: sub, Revokes: 2},
		}, map[string]Level{"sub": LevelNone}},
		{"the identity's revocation wins over a newer key-carried record", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkeySigned, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodRevocation, Purpose: PurposeRevoke, Handle: "a", From: pgpKey, To: sub, Revokes: 2},
			{Seq: 4, Method: MethodRevocation, From: pgpKey, To: sub, Revokes: 2},
			{Seq: 5, Method: MethodPGPAuthSubkeySigned, From: pgpKey, To: sub},
			{Seq: 6, Method: MethodSSHChallenge, Purpose: PurposeAdd, Handle: "a", From: sub},
		}, map[string]Level{"sub": LevelRevoked}},
		{"a new signed consent after the revocation brings the link back", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodRevocation, Purpose: PurposeRevoke, Handle: "a", From: pgpKey, To: sub, Revokes: 2},
			{Seq: 4, Method: MethodPGPChallenge, Purpose: PurposeAdd, Handle: "a", From: pgpKey, To: sub},
		}, map[string]Level{"sub": LevelClaimed}},
		{"a stranger's key carrying the SSH key claims it at most", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: k1},
			{Seq: 3, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "b", From: k1},
		}, map[string]Level{"k1": LevelClaimed}},
		{"auth subkey of a revoked key is not proven", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodRevocation, Purpose: PurposeRevoke, Handle: "a", From: pgpKey, To: pgpKey, Revokes: 1},
		}, map[string]Level{"AB": LevelRevoked, "sub": LevelNone}},
		{"auth subkey the key dropped", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub},
			{Seq: 3, Method: MethodRevocation, From: pgpKey, To: sub, Revokes: 2},
		}, map[string]Level{"sub": LevelNone}},
		{"expired auth subkey", []Evidence{
			{Seq: 1, Method: MethodPGPChallenge, Purpose: PurposeClaim, Handle: "a", From: pgpKey},
			{Seq: 2, Method: MethodPGPAuthSubkey, From: pgpKey, To: sub, Expires: past},
		}, map[string]Level{"sub": LevelExpired}},
		{"another identity's records do not count", []Evidence{
			{Seq: 1, Method: MethodSSHChallenge, Purpose: PurposeClaim, Handle: "b", From: k1},
		}, map[string]Level{"k1": LevelNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Assess("a", tt.recs, now)
			for v, want := range tt.want {
				got := LevelNone
				for _, s := range a.Factors {
					if s.Factor.Value == v {
						got = s.Level
					}
				}
				if got != want {
					t.Errorf("%s: %s, want %s", v, got, want)
				}
			}
		})
	}
}
