// reading.go: records made under an earlier reading of user IDs. Until
// pgp.UserIDAddress, Kith took a user ID's address from its last <...>,
// so a user ID such as "CEO <ceo@example.org> <mallory@example.org>"
// linked its key to mallory@example.org (pgp.uid-selfsig) and could be
// verified by that mailbox (email.verified), while gpg reads
// ceo@example.org from it. Today that user ID carries no address: the
// verifier reads none, so such a record no longer verifies. An honest
// server wrote it, though, and the log is append-only: such a record is
// reported as made under the earlier reading (ErrEarlierReading), which
// a log audit counts as unchecked, never as verified, and never as a
// forgery that fails the log.

package verify

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// ErrEarlierReading marks a record linking a key to an address that the
// key named only in a user ID which carries no address today (see
// pgp.UserIDAddress): consistent with the key under the reading Kith
// used when the record was made, but not verified under today's. Such a
// record is neither verified nor failed; the link it records no longer
// counts.
var ErrEarlierReading = errors.New("made under an earlier reading of user IDs")

// earlierReading reports whether the whole key of e, at e's time, has a
// valid self-signed user ID that carries no address today and names e's
// address in its last angle brackets: the user ID an earlier reading
// took e.To from. For a pgp.uid-selfsig record the user ID and its self-signatures
// must be exactly the record's statement and signature.
func earlierReading(e *identity.Evidence) bool {
	if e.To.Kind != identity.KindEmail || e.To.Value == "" {
		return false
	}
	k, whole, err := recordKeyPackets(e)
	if err != nil || !whole {
		return false
	}
	applied, _, err := policyAt(e.Created).Apply(k)
	if err != nil {
		return false
	}
	d := applied.Describe()
	if d.Revoked || (!d.Expires.IsZero() && !d.Expires.After(e.Created)) {
		return false
	}
	for _, u := range d.UserIDs {
		if u.Email != "" || u.Revoked || (!u.Expires.IsZero() && !u.Expires.After(e.Created)) ||
			lastBracketed(u.Text) != e.To.Value {
			continue
		}
		stmt, sigs := componentPackets(applied, pgp.Packet{Tag: pgp.TagUserID, Body: []byte(u.Text)})
		sigs = selfSignatures(sigs, d)
		if len(sigs) == 0 {
			continue
		}
		if e.Method != identity.MethodPGPUIDSelfSig || string(stmt) == string(e.Statement) && string(sigs) == string(e.Signature) {
			return true
		}
	}
	return false
}

// lastBracketed returns, lower-cased, what the last "<" of uid and the
// first ">" after it enclose ("" when there is no such pair): where the
// earlier reading took a user ID's address from. An address in other
// brackets of the user ID was never read as its address, so a record of
// it is not excused.
func lastBracketed(uid string) string {
	i := strings.LastIndexByte(uid, '<')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(uid[i:], '>')
	if j < 0 {
		return ""
	}
	return strings.ToLower(uid[i+1 : i+j])
}

// orEarlierReading returns err, or an ErrEarlierReading in its place
// when e was made under the earlier reading of user IDs.
func orEarlierReading(e *identity.Evidence, err error) error {
	if err != nil && earlierReading(e) {
		return fmt.Errorf("%w: the key's user ID naming <%s> carries no address today (two readings of it)", ErrEarlierReading, e.To.Value)
	}
	return err
}
