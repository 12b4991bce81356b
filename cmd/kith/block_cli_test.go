package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestBlockUserIDCleansTheKeyAndKeepsIt: kith block show lists a key's
// user IDs and certifications with their hashes; blocking one user ID by
// its hash takes it out of the stored key, which stays; a hash the key
// does not carry and bad command lines are refused with a reason.
func TestBlockUserIDCleansTheKeyAndKeepsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, err := keygen.New(5150).Range(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	k := policyKeys(t, raw)[0]
	d := k.Describe()
	if len(d.UserIDs) < 2 {
		t.Fatalf("the generated key has %d user IDs, want 2 or more", len(d.UserIDs))
	}
	fp := d.FingerprintHex()
	dbURL := pgtest.NewDatabase(t)
	st := openTestStore(t, dbURL)
	if _, err := st.AddKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	victim := d.UserIDs[1].Text
	sum := sha256.Sum256([]byte(victim))
	hash := hex.EncodeToString(sum[:])

	out, errOut, err := runKith(t, "block", "show", fp, "--database-url", dbURL)
	if err != nil || !strings.Contains(out, hash) || !strings.Contains(out, "user-id") {
		t.Fatalf("block show: %v %s\n%s", err, errOut, out)
	}
	bad := strings.Repeat("ab", 32)
	for _, args := range [][]string{
		{"block", "add", fp, "--user-id", bad, "--reason", "x"},
		{"block", "add", fp},
		{"block", "add", "0xNOTHEX", "--reason", "x"},
		{"block", "add", fp, "--user-id", hash, "--keep-revocations", "--reason", "x"},
		{"block", "frobnicate"},
	} {
		if _, errOut, err := runKith(t, append(args, "--database-url", dbURL)...); err == nil {
			t.Errorf("kith %s succeeded; want a refusal", strings.Join(args, " "))
		} else if errOut == "" && err.Error() == "" {
			t.Errorf("kith %s: no reason given", strings.Join(args, " "))
		}
	}
	if out, errOut, err := runKith(t, "block", "add", fp, "--user-id", hash, "--reason", "personal data", "--by", "op", "--database-url", dbURL); err != nil ||
		!strings.Contains(out, "without the blocked packet") {
		t.Fatalf("block add --user-id: %v %s\n%s", err, errOut, out)
	}
	ks, _, err := st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint(), Limit: 1})
	if err != nil || len(ks) != 1 {
		t.Fatalf("the cleaned key: %d keys, %v", len(ks), err)
	}
	for _, u := range ks[0].UserIDs {
		if u.Text == victim {
			t.Fatal("the blocked user ID is still stored")
		}
	}
	if len(ks[0].UserIDs) != len(d.UserIDs)-1 {
		t.Fatalf("the cleaned key has %d user IDs, want %d", len(ks[0].UserIDs), len(d.UserIDs)-1)
	}
	if list, _, _ := runKith(t, "block", "list", "--database-url", dbURL); !strings.Contains(list, "packet "+hash) || !strings.Contains(list, "personal data") {
		t.Fatalf("block list:\n%s", list)
	}
	// kith load of the full key again stores it without the user ID and
	// says so.
	file := filepath.Join(t.TempDir(), "key.asc")
	if err := os.WriteFile(file, armored(t, k), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := runKith(t, "load", "--database-url", dbURL, file); err != nil || !strings.Contains(out, "1 stored in part") {
		t.Fatalf("kith load of the blocked user ID: %v %s\n%s", err, errOut, out)
	}
	ks, _, _ = st.FindKeys(ctx, keys.Query{Fingerprint: k.Fingerprint(), Limit: 1})
	if len(ks[0].UserIDs) != len(d.UserIDs)-1 {
		t.Fatal("kith load brought the blocked user ID back")
	}
}
