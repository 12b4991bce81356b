// record.go: re-verifying evidence records offline, from the log alone:
// every signature against the key material the record carries, every
// statement against the record's fields, and the hash chain. The API,
// the pages and `kith verify-log` all verify with this one code.

package verify

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/ssh"
)

// ErrNotVerifiable marks a record whose proof cannot be re-checked
// offline (an ID token needs its provider's keys); VerifyLog reports it
// without counting it as a failure.
var ErrNotVerifiable = errors.New("not verifiable offline")

// Record re-verifies one record's proof from the bytes it carries. It
// does not check the record's place in the chain (see LogVerifier), nor
// a server-issued revocation of a key-carried link, which needs the
// record it revokes.
func Record(e *identity.Evidence) error {
	switch {
	case e.Method == identity.MethodRevocation && e.Purpose == "":
		return verifyKeyRevocation(e, nil)
	case e.From.Kind == identity.KindOIDC && (e.Method == identity.MethodOIDCLogin || e.Method == identity.MethodRevocation):
		return oidcRecord(e)
	case e.Method == identity.MethodOIDCEmailVerified:
		_, err := LoginRecord(e)
		return err
	case e.Method == identity.MethodSSHChallenge, e.Method == identity.MethodPGPChallenge, e.Method == identity.MethodRevocation:
		if err := checkStatement(e); err != nil {
			return err
		}
		return verifySignature(e)
	case e.Method.KeyCarried():
		return verifyKeyLink(e)
	}
	return fmt.Errorf("%w: method %s", ErrNotVerifiable, e.Method)
}

// checkStatement checks that the signed statement says what the record
// says: its handle, purpose and factor.
func checkStatement(e *identity.Evidence) error {
	c, err := identity.ParseStatement(e.Statement)
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	if c.Handle != e.Handle {
		return fmt.Errorf("statement names handle %q, record %q", c.Handle, e.Handle)
	}
	if c.Purpose != e.Purpose {
		return fmt.Errorf("statement is for %q, record for %q", c.Purpose, e.Purpose)
	}
	want := e.From
	if !e.To.IsZero() {
		want = e.To
	}
	if !c.Factor.Same(want) {
		return fmt.Errorf("statement names %s, record %s", c.Factor, want)
	}
	if e.Method == identity.MethodRevocation && (c.Purpose != identity.PurposeRevoke || e.To.IsZero()) {
		return fmt.Errorf("a revocation's statement must be a revoke statement naming the factor")
	}
	if e.Method.IsChallenge() && c.Purpose == identity.PurposeRevoke {
		return fmt.Errorf("a %s record with a revoke statement", e.Method)
	}
	return nil
}

// verifySignature checks the record's signature by From with SignerKey.
func verifySignature(e *identity.Evidence) error {
	switch e.From.Kind {
	case identity.KindSSH:
		if !bytes.Equal(e.SignerKey, e.From.Data) {
			return fmt.Errorf("signer key is not the key of %s", e.From)
		}
		pub, err := ssh.ParsePublicKey(e.SignerKey)
		if err != nil {
			return fmt.Errorf("signer key: %w", err)
		}
		if fp := ssh.FingerprintOf(pub).String(); fp != e.From.Value {
			return fmt.Errorf("signer key has fingerprint %s, record names %s", fp, e.From.Value)
		}
		if e.Method != identity.MethodSSHChallenge && e.Method != identity.MethodRevocation {
			return fmt.Errorf("method %s with an SSH signer", e.Method)
		}
		return ssh.VerifySSHSIGBy(e.Signature, e.Statement, ssh.Namespace, pub)
	case identity.KindPGP:
		k, err := signerPGPKey(e)
		if err != nil {
			return err
		}
		if e.Method != identity.MethodPGPChallenge && e.Method != identity.MethodRevocation {
			return fmt.Errorf("method %s with an OpenPGP signer", e.Method)
		}
		_, err = verifyPGP(k, e.Statement, e.Signature)
		return err
	}
	return fmt.Errorf("%w: %s signer", ErrNotVerifiable, e.From.Kind)
}

// signerPGPKey parses the record's OpenPGP signer key and checks that it
// is From's.
func signerPGPKey(e *identity.Evidence) (*pgp.Key, error) {
	k, err := pgp.ParseKey(e.SignerKey)
	if err != nil {
		return nil, fmt.Errorf("signer key: %w", err)
	}
	if f := identity.PGPFactor(k.Fingerprint()); !f.Same(e.From) {
		return nil, fmt.Errorf("signer key is %s, record names %s", f, e.From)
	}
	return k, nil
}

// verifyKeyLink checks that the key From carried, when the record was
// made, exactly the link the record holds.
func verifyKeyLink(e *identity.Evidence) error {
	if e.Handle != "" {
		return fmt.Errorf("a %s record must not name an identity", e.Method)
	}
	links, err := carriedLinks(e)
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Method == e.Method && l.To.Same(e.To) && bytes.Equal(l.To.Data, e.To.Data) &&
			bytes.Equal(l.Statement, e.Statement) && bytes.Equal(l.Signature, e.Signature) {
			return nil
		}
	}
	return fmt.Errorf("the key %s does not carry this %s link to %s with these signatures", e.From.Value, e.Method, e.To)
}

// carriedLinks returns the links the record's signer key carried when the
// record was made.
func carriedLinks(e *identity.Evidence) ([]identity.KeyLink, error) {
	k, err := signerPGPKey(e)
	if err != nil {
		return nil, err
	}
	return keyLinks(k, e.Created)
}

// verifyKeyRevocation checks a server-issued revocation: the key it
// carries must no longer hold the revoked record's link. revoked is the
// record it names, nil when not at hand.
func verifyKeyRevocation(e *identity.Evidence, revoked *identity.Evidence) error {
	if e.Handle != "" || e.Revokes == 0 {
		return fmt.Errorf("a revocation without a statement must name a key-carried record and no identity")
	}
	if revoked == nil {
		return nil
	}
	if revoked.Handle != "" || !revoked.From.Same(e.From) || !revoked.To.Same(e.To) {
		return fmt.Errorf("it revokes record %d, which is not a link carried by %s", e.Revokes, e.From.Value)
	}
	links, err := carriedLinks(e)
	if err != nil {
		return err
	}
	for _, l := range links {
		if identity.SameLink(revoked, l) {
			return fmt.Errorf("the key still carries the link of record %d", e.Revokes)
		}
	}
	return nil
}

// Failure is one record that does not verify.
type Failure struct {
	Seq    int64
	Reason string
	// Warning marks what could not be checked offline, not a failure.
	Warning bool
}

// LogVerifier re-verifies a log record by record, in order: the chain
// (sequence, previous hash, own hash) and each record's proof. The zero
// LogVerifier starts at the log's first record.
type LogVerifier struct {
	prevSeq  int64
	prevHash []byte
	// keyLinks remembers key-carried records, for their revocations.
	keyLinks map[int64]*identity.Evidence
	count    int
}

// Add verifies the next record and returns what is wrong with it.
func (v *LogVerifier) Add(e *identity.Evidence) []Failure {
	var out []Failure
	if err := identity.CheckLink(e, v.prevSeq, v.prevHash); err != nil {
		var ce *identity.ChainError
		reason := err.Error()
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		out = append(out, Failure{Seq: e.Seq, Reason: "chain: " + reason})
	}
	var err error
	if e.Method == identity.MethodRevocation && e.Purpose == "" {
		err = verifyKeyRevocation(e, v.keyLinks[e.Revokes])
		if err == nil && v.keyLinks[e.Revokes] == nil {
			err = fmt.Errorf("it revokes record %d, which is not a key-carried link earlier in the log", e.Revokes)
		}
	} else {
		err = Record(e)
	}
	switch {
	case errors.Is(err, ErrNotVerifiable):
		out = append(out, Failure{Seq: e.Seq, Reason: err.Error(), Warning: true})
	case err != nil:
		out = append(out, Failure{Seq: e.Seq, Reason: err.Error()})
	}
	if e.Method.KeyCarried() {
		if v.keyLinks == nil {
			v.keyLinks = map[int64]*identity.Evidence{}
		}
		light := *e
		light.SignerKey, light.Statement = nil, nil
		v.keyLinks[e.Seq] = &light
	}
	v.prevSeq, v.prevHash = e.Seq, bytes.Clone(e.Hash)
	v.count++
	return out
}

// Count returns how many records were added.
func (v *LogVerifier) Count() int { return v.count }

// Head returns the last record's sequence number and hash.
func (v *LogVerifier) Head() (int64, []byte) { return v.prevSeq, v.prevHash }
