package postgres_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/keys/bulk"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/testkit"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestKeyRowsReadAsRowsScanReadsThem: the rows of every key read (the
// Debian keyring, generated keys of every algorithm the generator makes,
// and rows edited to hold what uploads rarely do: a key without user
// IDs, a user ID without a creation time, times before 2000 and with
// fractions of a second) come out of decodeKeyRow exactly as rows.Scan
// reads them, with user IDs and without, with the answer's size summed
// or not, with packets and without.
func TestKeyRowsReadAsRowsScanReadsThem(t *testing.T) {
	if _, err := os.Stat(testkit.DebianKeyring); err != nil {
		testkit.Missing(t, "%s missing", testkit.DebianKeyring)
	}
	_, s, db := openWithConn(t)
	ctx := context.Background()
	typical, err := keygen.TypicalKeys(150, 7)
	if err != nil {
		t.Fatal(err)
	}
	typ := filepath.Join(t.TempDir(), "typical.pgp")
	if err := os.WriteFile(typ, bytes.Join(typical, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bulk.Load(ctx, keys.NewService(s, keys.Options{}), 2, []string{testkit.DebianKeyring, typ}, nil); err != nil {
		t.Fatal(err)
	}
	for _, edit := range []string{
		`DELETE FROM user_ids WHERE key_ref = (SELECT min(id) FROM keys)`,
		`UPDATE user_ids SET created_at = NULL WHERE key_ref = (SELECT min(id) + 1 FROM keys)`,
		`UPDATE keys SET expires_at = '1999-12-31 23:59:59.25+00', created_at = '1970-01-01 00:00:00.000001+00' WHERE id = (SELECT min(id) + 2 FROM keys)`,
		`UPDATE user_ids SET expires_at = '1969-07-20 20:17:40.5+00', revoked = true WHERE key_ref = (SELECT min(id) + 3 FROM keys)`,
	} {
		if _, err := db.Exec(ctx, edit); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		userIDs, sum bool
		readUpTo     int64
	}{{true, true, 1 << 40}, {true, false, 1 << 40}, {false, true, 1 << 40}, {false, false, -1}, {true, true, 0}} {
		decoded, scanned, decodable, err := postgres.ReadKeysBothWays(ctx, s, c.userIDs, c.sum, c.readUpTo)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !decodable {
			t.Errorf("%+v: the rows are not in the form decodeKeyRow reads", c)
		}
		if len(decoded) < 300 {
			t.Fatalf("%+v: read %d keys", c, len(decoded))
		}
		noUIDs, withPackets := 0, 0
		for i := range decoded {
			if !reflect.DeepEqual(decoded[i], scanned[i]) {
				t.Fatalf("%+v: key %d read\n%+v\nby rows.Scan\n%+v", c, i, decoded[i], scanned[i])
			}
			if len(decoded[i].UserIDs) == 0 {
				noUIDs++
			}
			if decoded[i].Packets != nil {
				withPackets++
			}
		}
		wantNoUIDs := len(decoded) // none read
		if c.userIDs {
			wantNoUIDs = 1 // the key whose user IDs were deleted
		}
		if noUIDs != wantNoUIDs {
			t.Errorf("%+v: %d keys without user IDs, want %d", c, noUIDs, wantNoUIDs)
		}
		if want := len(decoded); c.readUpTo <= 0 && withPackets != 0 || c.readUpTo > 0 && withPackets != want {
			t.Errorf("%+v: %d of %d keys with packets", c, withPackets, want)
		}
	}
}
