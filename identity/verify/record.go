// record.go: re-verifying evidence records offline, from the log alone:
// every signature against the key material the record carries, every
// statement against the record's fields, and the hash chain. The API,
// the pages and `kith verify-log` all verify with this one code.

package verify

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/oidc"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/ssh"
)

// ErrNotVerifiable marks a record whose proof cannot be re-checked
// offline: a method this package has no check for, or a signer it cannot
// check. A log with such a record does not verify.
var ErrNotVerifiable = errors.New("not verifiable offline")

// Record re-verifies one record's proof from the bytes it carries. It
// does not check the record's place in the log (see LogVerifier), nor
// a server-issued revocation of a key-carried link, which needs the
// record it revokes.
func Record(e *identity.Evidence) error {
	check := checkFor(e)
	if check == nil {
		return fmt.Errorf("%w: no check for method %q", ErrNotVerifiable, e.Method)
	}
	return check(e)
}

// checkFor returns the check of e's kind of record, nil when there is
// none. Each method of evidence has its case here; a new method is one
// case and its check function.
func checkFor(e *identity.Evidence) func(*identity.Evidence) error {
	switch e.Method {
	case identity.MethodRevocation:
		switch {
		case e.Purpose == "":
			return func(e *identity.Evidence) error { return verifyKeyRevocation(e, nil) }
		case e.From.Kind == identity.KindOIDC:
			return oidcRecord
		}
		return signedStatement
	case identity.MethodOIDCLogin:
		return oidcRecord
	case identity.MethodOIDCEmailVerified:
		return func(e *identity.Evidence) error { _, err := LoginRecord(e); return err }
	case identity.MethodSSHChallenge, identity.MethodPGPChallenge:
		return signedStatement
	case identity.MethodPGPAuthSubkey, identity.MethodPGPAuthSubkeySigned, identity.MethodPGPUIDSelfSig:
		return verifyKeyLink
	case identity.MethodOIDCKeySet:
		return keySetRecord
	case identity.MethodEmailVerified:
		return emailRecord
	case identity.MethodSSHCAKey:
		return caKeyRecord
	case identity.MethodSSHCertificate:
		return certificateRecord
	case identity.MethodOIDCDeviceApproval:
		return deviceApprovalRecord
	case identity.MethodHostRelease:
		return hostReleaseRecord
	}
	return nil
}

// hostReleaseRecord checks a host.release record's form: one SSH key of a
// host identity, and the statement that says so, stamped with the
// record's own time. That the operator released the name is the
// operator's word; what the log guarantees is that everyone sees it.
func hostReleaseRecord(e *identity.Evidence) error {
	if _, ok := e.Handle.Host(); !ok || e.From.Kind != identity.KindSSH || !e.To.IsZero() || e.Purpose != "" || len(e.Signature) != 0 {
		return fmt.Errorf("a %s record must release one SSH key of a host identity, unsigned", e.Method)
	}
	rest, ok := bytes.CutPrefix(e.Statement, []byte(identity.HostReleaseStatementTitle+"\n\nserver: "))
	server, _, found := bytes.Cut(rest, []byte("\n"))
	if !ok || !found {
		return fmt.Errorf("the statement is not a host release")
	}
	if want := identity.HostReleaseStatement(string(server), e.Handle, e.From, e.Created); !bytes.Equal(e.Statement, want) {
		return fmt.Errorf("the statement does not release %s from %s at the record's time", e.From, e.Handle)
	}
	return nil
}

// keySetRecord checks an oidc.jwks record's form: a provider, its issuer
// in the statement, and a public signing key. That the provider published
// the key is the server's word, which anyone can compare with the
// provider's key set; what the log guarantees is that everyone sees the
// same key before any token it verifies.
func keySetRecord(e *identity.Evidence) error {
	if e.From.Kind != identity.KindOIDCProvider || e.Handle != "" || !e.To.IsZero() || e.Purpose != "" {
		return fmt.Errorf("an %s record must come from a provider and name nothing else", e.Method)
	}
	want := fmt.Sprintf("%s\n\nissuer: %s\n", identity.KeySetStatementTitle, e.From.Value)
	if !bytes.HasPrefix(e.Statement, []byte(want)) {
		return fmt.Errorf("the statement does not name the provider %s", e.From.Value)
	}
	if err := oidc.CheckSigningJWK(e.SignerKey); err != nil {
		return err
	}
	return nil
}

// signedStatement checks a record whose proof is From's signature over a
// challenge statement that says what the record says.
func signedStatement(e *identity.Evidence) error {
	if err := checkStatement(e); err != nil {
		return err
	}
	return verifySignature(e)
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
	// A deletion statement names the account that approves it; each of
	// the deletion's revocations keeps it and revokes one factor (To).
	want := e.From
	if !e.To.IsZero() && c.Purpose != identity.PurposeDelete {
		want = e.To
	}
	if !c.Factor.Same(want) {
		return fmt.Errorf("statement names %s, record %s", c.Factor, want)
	}
	if e.Method == identity.MethodRevocation && (c.Purpose != identity.PurposeRevoke && c.Purpose != identity.PurposeDelete || e.To.IsZero()) {
		return fmt.Errorf("a revocation's statement must be a revoke statement naming the factor, or a delete statement")
	}
	if e.Method != identity.MethodRevocation && c.Purpose == identity.PurposeDelete {
		return fmt.Errorf("a %s record with a delete statement", e.Method)
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
		return ssh.VerifySignatureBy(e.Signature, e.Statement, ssh.Namespace, pub)
	case identity.KindPGP:
		// The key's public part suffices: its primary key and subkeys with
		// their bindings, which is all a signature is checked against. (The
		// primary key's expiry, which only its user IDs state, is checked
		// only with the whole key.)
		k, _, err := recordKey(e)
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

// signerPGPKey parses an OpenPGP key a record carries (its SignerKey, or
// the whole key it commits to) and checks that it is From's.
func signerPGPKey(e *identity.Evidence, b []byte) (*pgp.Key, error) {
	k, err := pgp.ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("signer key: %w", err)
	}
	if f := identity.PGPFactor(k.Fingerprint()); !f.Same(e.From) {
		return nil, fmt.Errorf("signer key is %s, record names %s", f, e.From)
	}
	return k, nil
}

// recordKey returns the OpenPGP key a record's proof is checked with, as
// the policy keeps it at the record's time, and whether it is the whole
// key. A record made before keys were private artifacts carries the
// whole key as its SignerKey. A later one carries only the key's public
// part (no user IDs) and commits to the whole key
// (identity.ArtifactPGPKey): recordKey returns the whole key when it was
// revealed, after checking that SignerKey is exactly its public part, and
// otherwise the public part, after checking that it names no one.
func recordKey(e *identity.Evidence) (*pgp.Key, bool, error) {
	k, whole, err := recordKeyPackets(e)
	if err != nil {
		return nil, false, err
	}
	p := policyAt(e.Created)
	p.AllowNoSelfSignature = !whole
	applied, _, err := p.Apply(k)
	if err != nil {
		return nil, false, fmt.Errorf("signer key: %w", err)
	}
	return applied, whole, nil
}

// recordKeyPackets is recordKey before the policy.
func recordKeyPackets(e *identity.Evidence) (*pgp.Key, bool, error) {
	if !e.Committed(identity.ArtifactPGPKey) {
		k, err := signerPGPKey(e, e.SignerKey)
		return k, true, err
	}
	if whole, ok := e.Artifact(identity.ArtifactPGPKey); ok {
		pub, err := PublicKey(whole)
		if err != nil {
			return nil, false, fmt.Errorf("revealed key: %w", err)
		}
		if !bytes.Equal(pub, e.SignerKey) {
			return nil, false, fmt.Errorf("the signer key is not the public part of the revealed key")
		}
		k, err := signerPGPKey(e, whole)
		return k, true, err
	}
	k, err := signerPGPKey(e, e.SignerKey)
	if err != nil {
		return nil, false, err
	}
	if !bytes.Equal(k.WithoutUserIDs().Bytes(), e.SignerKey) {
		return nil, false, fmt.Errorf("the signer key carries user IDs, which a record keeps private")
	}
	return k, false, nil
}

// verifyKeyLink checks that the key From carried, when the record was
// made, exactly the link the record holds: with the whole key, every
// link; with the public part alone, an auth subkey's binding (and that
// the record's expiry is no later than the subkey's own), while a user
// ID's link needs its artifacts (ErrWithheld).
func verifyKeyLink(e *identity.Evidence) error {
	if e.Handle != "" {
		return fmt.Errorf("a %s record must not name an identity", e.Method)
	}
	links, whole, err := carriedLinks(e)
	if err != nil {
		return err
	}
	if !whole {
		if e.Method == identity.MethodPGPUIDSelfSig {
			return withheld(e)
		}
		for _, l := range links {
			if sameLinkPackets(e, l) && (l.Expires.IsZero() || !e.Expires.IsZero() && !e.Expires.After(l.Expires)) {
				return nil
			}
		}
		return fmt.Errorf("the public part of key %s does not carry this %s link to %s with these signatures", e.From.Value, e.Method, e.To)
	}
	if err := withheld(e); err != nil {
		return err
	}
	for _, l := range links {
		if sameLinkPackets(e, l) && e.Expires.Equal(identity.TruncateTime(l.Expires)) {
			return nil
		}
	}
	return orEarlierReading(e, fmt.Errorf("the key %s does not carry this %s link to %s with these signatures and this expiry", e.From.Value, e.Method, e.To))
}

// sameLinkPackets reports whether the record holds link l: its method,
// factor and the very packets that sign it.
func sameLinkPackets(e *identity.Evidence, l identity.KeyLink) bool {
	return l.Method == e.Method && l.To.Same(e.To) && bytes.Equal(l.To.Data, e.To.Data) &&
		bytes.Equal(l.Statement, e.Statement) && bytes.Equal(l.Signature, e.Signature)
}

// carriedLinks returns the links the record's signer key carried when the
// record was made, and whether they were read from the whole key (see
// recordKey).
func carriedLinks(e *identity.Evidence) ([]identity.KeyLink, bool, error) {
	k, whole, err := recordKeyPackets(e)
	if err != nil {
		return nil, false, err
	}
	links, err := linksAt(k, e.Created, whole)
	return links, whole, err
}

// verifyKeyRevocation checks a server-issued revocation: the key it
// carries must no longer hold the revoked record's link. revoked is the
// record it names, nil when not at hand. A revocation whose key was no
// longer stored carries none: the key carried nothing then.
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
	if len(e.SignerKey) == 0 {
		return nil
	}
	links, whole, err := carriedLinks(e)
	if err != nil {
		return err
	}
	// A user ID's address is an artifact: the revoked link is known only
	// once the record it revokes was revealed.
	known := revoked.To.Kind != identity.KindEmail || revoked.To.Value != ""
	if !whole || !known {
		// Even the public part shows an auth subkey's binding gone;
		// anything else needs the artifacts.
		if revoked.Method != identity.MethodPGPUIDSelfSig && !slices.ContainsFunc(links, func(l identity.KeyLink) bool { return sameLinkTo(revoked, l) }) {
			return nil
		}
		if err := withheld(e); err != nil {
			return err
		}
		return fmt.Errorf("%w: the record it revokes (%d) keeps its link private", ErrWithheld, e.Revokes)
	}
	for _, l := range links {
		if identity.SameLink(revoked, l) {
			return fmt.Errorf("the key still carries the link of record %d", e.Revokes)
		}
	}
	return nil
}

// sameLinkTo reports whether link l links the record's factor by its
// method, whatever its expiry.
func sameLinkTo(e *identity.Evidence, l identity.KeyLink) bool {
	return l.Method == e.Method && l.To.Same(e.To) && bytes.Equal(l.To.Data, e.To.Data)
}

// Failure is one record that does not verify.
type Failure struct {
	Seq    int64
	Reason string
	// Unchecked marks a record whose proof is a private artifact it only
	// commits to (ErrWithheld), or one made under an earlier reading of
	// user IDs (ErrEarlierReading): neither verified nor failed.
	Unchecked bool
	// Erased marks an unchecked record whose artifacts the server erased
	// (ErrErased).
	Erased bool
}

// LogVerifier re-verifies a log record by record, in order: the chain
// (sequence, previous hash, own hash) and each record's proof. The zero
// LogVerifier starts at the log's first record.
type LogVerifier struct {
	prevSeq  int64
	prevHash []byte
	// keyLinks remembers key-carried records, for their revocations.
	keyLinks map[int64]*identity.Evidence
	// keySets holds the provider keys of oidc.jwks records so far, by
	// issuer and then JWK thumbprint (RFC 7638): one key is one key,
	// whatever JSON a record wrote it in.
	keySets map[string]map[string]bool
	// caKeys holds the CA keys of ssh.ca-key records so far.
	caKeys map[string]bool
	// approval is the last oidc.device-approval record, light, for the
	// certificate it approves, which follows it.
	approval *identity.Evidence
	// replay tells whether a key was proven for an identity at a record.
	replay    replay
	count     int
	unchecked int
	erased    int
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
	case err == nil:
		err = v.checkProviderKey(e)
	case errors.Is(err, ErrWithheld):
		// The provider key is public even when the token is not.
		if kerr := v.checkProviderKey(e); kerr != nil {
			err = kerr
		}
	}
	if err == nil && e.Method == identity.MethodSSHCertificate {
		err = v.checkCertificate(e)
	}
	switch {
	case errors.Is(err, ErrWithheld), errors.Is(err, ErrEarlierReading):
		out = append(out, Failure{Seq: e.Seq, Reason: err.Error(), Unchecked: true, Erased: errors.Is(err, ErrErased)})
		v.unchecked++
		if errors.Is(err, ErrErased) {
			v.erased++
		}
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
	if e.Method == identity.MethodOIDCKeySet && err == nil {
		if v.keySets == nil {
			v.keySets = map[string]map[string]bool{}
		}
		if v.keySets[e.From.Value] == nil {
			v.keySets[e.From.Value] = map[string]bool{}
		}
		if t, terr := oidc.JWKThumbprint(e.SignerKey); terr == nil {
			v.keySets[e.From.Value][t] = true
		}
	}
	if e.Method == identity.MethodOIDCDeviceApproval && (err == nil || errors.Is(err, ErrWithheld)) {
		v.approval = &identity.Evidence{Seq: e.Seq, Method: e.Method, Handle: e.Handle, From: e.From, To: e.To, Statement: e.Statement}
	}
	if e.Method == identity.MethodSSHCAKey && err == nil {
		if v.caKeys == nil {
			v.caKeys = map[string]bool{}
		}
		v.caKeys[string(e.SignerKey)] = true
	}
	v.replay.add(e)
	v.prevSeq, v.prevHash = e.Seq, bytes.Clone(e.Hash)
	v.count++
	return out
}

// checkProviderKey checks that the provider key a record's ID token was
// verified with is one an earlier oidc.jwks record published, never only
// the key the record carries itself (which anyone forging a record would
// make up).
func (v *LogVerifier) checkProviderKey(e *identity.Evidence) error {
	if e.From.Kind != identity.KindOIDC || len(e.SignerKey) == 0 {
		return nil
	}
	issuer, _, _ := strings.Cut(e.From.Value, " ")
	if t, err := oidc.JWKThumbprint(e.SignerKey); err != nil || !v.keySets[issuer][t] {
		return fmt.Errorf("its ID token is checked with a key of %s that no earlier oidc.jwks record published", issuer)
	}
	return nil
}

// checkCertificate checks what an ssh.certificate record stands on in
// the log: its CA key was published by an earlier ssh.ca-key record, and
// its key (or, for a certificate a device login approved, the approving
// account, whose approval record comes right before it) was proven for
// the identity when it was issued.
func (v *LogVerifier) checkCertificate(e *identity.Evidence) error {
	ca, err := certificateCA(e)
	if err != nil {
		return err
	}
	if !v.caKeys[string(ca)] {
		return fmt.Errorf("its certificate is signed by a CA key that no earlier ssh.ca-key record published")
	}
	if !e.To.IsZero() {
		if err := checkApproved(e, v.approval); err != nil {
			return err
		}
	}
	if on := identity.CertificateStandsOn(e); !v.replay.proven(e.Handle, on, e.Created) {
		return fmt.Errorf("%s was not proven for %q when the certificate was issued", on, e.Handle)
	}
	return nil
}

// Count returns how many records were added.
func (v *LogVerifier) Count() int { return v.count }

// Unchecked returns how many of them were unchecked (their proofs are
// private artifacts, or they were made under an earlier reading of user
// IDs).
func (v *LogVerifier) Unchecked() int { return v.unchecked }

// Erased returns how many of the unchecked records were so because the
// server erased their artifacts.
func (v *LogVerifier) Erased() int { return v.erased }

// Head returns the last record's sequence number and hash.
func (v *LogVerifier) Head() (int64, []byte) { return v.prevSeq, v.prevHash }
