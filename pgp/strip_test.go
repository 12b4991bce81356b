package pgp

import (
	"slices"
	"testing"
)

func TestWithUserIDsKeepsOnlyTheChosenAddresses(t *testing.T) {
	e := genEntity(t, "Alice", "alice@example.org", 1)
	if err := e.AddUserId("Alice", "", "alice@work.example", sigConfig(testTime)); err != nil {
		t.Fatal(err)
	}
	if err := e.AddUserId("No Address", "", "", sigConfig(testTime)); err != nil {
		t.Fatal(err)
	}
	k, _ := mustApply(t, mustParse(t, entityBytes(t, e)))
	if n := len(userIDs(k)); n != 3 {
		t.Fatalf("%d user IDs to start with", n)
	}
	cut := k.WithUserIDs(func(email string) bool { return email == "alice@work.example" })
	again, rep := mustApply(t, mustParse(t, cut.Bytes()))
	if got := userIDs(again); !slices.Equal(got, []string{"Alice <alice@work.example>"}) {
		t.Errorf("user IDs %q", got)
	}
	if rep.Total() != 0 {
		t.Errorf("the cut key lost packets to the policy: %s", rep)
	}
	if len(again.Describe().Subkeys) != len(k.Describe().Subkeys) {
		t.Error("subkeys were lost")
	}
	none := k.WithUserIDs(func(string) bool { return false })
	for _, p := range none.Packets() {
		if p.Tag == TagUserID {
			t.Errorf("a user ID is left: %q", p.Body)
		}
	}
	if none.Packets()[0].Tag != TagPublicKey || len(none.Packets()) < 2 {
		t.Errorf("the primary key or its subkeys went: %d packets", len(none.Packets()))
	}
}
