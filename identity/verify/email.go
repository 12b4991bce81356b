// email.go: re-verifying email.verified records. The record is the
// server's attestation that a mailed link was followed; what anyone can
// re-check offline is that its statement says what the record says and,
// for a verification, that the key it carries had a valid self-signed
// user ID with the address when the record was made.

package verify

import (
	"fmt"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// emailRecord checks an email.verified record.
func emailRecord(e *identity.Evidence) error {
	if e.Handle != "" {
		return fmt.Errorf("an email.verified record must not name an identity")
	}
	if e.From.Kind != identity.KindPGP || e.To.Kind != identity.KindEmail {
		return fmt.Errorf("an email.verified record links an OpenPGP key to an email, not %s to %s", e.From, e.To)
	}
	if e.Purpose != "" && e.Purpose != identity.PurposeRevoke {
		return fmt.Errorf("an email.verified record with purpose %q", e.Purpose)
	}
	// The statement and the address are artifacts in records that commit
	// to them: without them, what is public is checked (the key's public
	// part is From's and names no one), and the rest waits for them.
	links, whole, err := carriedLinks(e)
	if err != nil && (len(e.SignerKey) > 0 || e.Purpose == "") {
		return err
	}
	if err := withheld(e); err != nil {
		return err
	}
	f, err := identity.ParseEmailStatement(e.Statement)
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	action := identity.EmailVerify
	if e.Purpose == identity.PurposeRevoke {
		action = identity.EmailWithdraw
	}
	switch {
	case f["action"] != string(action):
		return fmt.Errorf("statement is for %q, record for %q", f["action"], action)
	case f["key"] != e.From.Value:
		return fmt.Errorf("statement names key %q, record %s", f["key"], e.From.Value)
	case f["email"] != e.To.Value:
		return fmt.Errorf("statement names email %q, record %s", f["email"], e.To.Value)
	case f["server"] == "":
		return fmt.Errorf("statement names no server")
	}
	if rec, err := time.Parse(time.RFC3339, f["recorded"]); err != nil || !rec.Equal(e.Created.Truncate(time.Second)) {
		return fmt.Errorf("statement's recorded time %q is not the record's %s", f["recorded"], e.Created.Format(time.RFC3339))
	}
	if action == identity.EmailWithdraw {
		return nil
	}
	if !whole {
		return fmt.Errorf("%w: the whole key of a verification is needed to check its user ID", ErrWithheld)
	}
	for _, l := range links {
		if l.Method == identity.MethodPGPUIDSelfSig && l.To.Same(e.To) {
			return nil
		}
	}
	return orEarlierReading(e, fmt.Errorf("the key %s carried no valid self-signed user ID with %s when the record was made", e.From.Value, e.To.Value))
}
