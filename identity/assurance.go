// assurance.go: the rules that say, from the evidence alone, which factors
// of an identity are proven, which are only claimed, and which no longer
// count. Nothing of this is stored: it is recomputed from the records each
// time, so a change of rules changes every answer at once.

package identity

import (
	"sort"
	"time"
)

// Level is how well a factor is linked to an identity.
type Level int

// The levels, weakest first.
const (
	// LevelNone: records mention the factor but link nothing (say, a
	// possession proof that no proven factor authorised).
	LevelNone Level = iota
	// LevelRevoked: the link was revoked.
	LevelRevoked
	// LevelExpired: the link's evidence has expired.
	LevelExpired
	// LevelClaimed: a proven factor or a key names it, but its
	// possession is not proven (an email in a self-signed user ID, an SSH
	// key a proven factor added without the key's own signature, an
	// OpenPGP authentication subkey the SSH key did not sign). Anyone can
	// make a claim from public data: claims are shown as such, never
	// served as keys, and never keep the factor's holder from proving it.
	LevelClaimed
	// LevelProven: possession proven by the factor's own signature or
	// login, and authorised by the identity (a proven factor's signed
	// consent, or a binding by a proven OpenPGP key), and neither revoked
	// nor expired.
	LevelProven
)

// String returns the level's name as the API shows it.
func (l Level) String() string {
	switch l {
	case LevelRevoked:
		return "revoked"
	case LevelExpired:
		return "expired"
	case LevelClaimed:
		return "claimed"
	case LevelProven:
		return "proven"
	}
	return "none"
}

// FactorStatus is one factor's standing in an identity.
type FactorStatus struct {
	Factor Factor
	Level  Level
	// Label is the note to show with the factor (for an SSH key, the
	// comment of its served line).
	Label string
	// Via are the records that establish Level (for a revocation, the
	// revocation record).
	Via []int64
	// Parent is the OpenPGP key that implies the factor (an auth subkey's
	// SSH key, a user ID's email), or zero.
	Parent Factor
	// Records are all the identity's records that mention the factor.
	Records []int64
}

// Assessment is what the assurance rules make of one identity's evidence.
type Assessment struct {
	Handle Handle
	// Factors are in the order the evidence first names them.
	Factors []FactorStatus
}

// Status returns f's standing, and false if no record mentions f.
func (a *Assessment) Status(f Factor) (FactorStatus, bool) {
	for _, s := range a.Factors {
		if s.Factor.Same(f) {
			return s, true
		}
	}
	return FactorStatus{}, false
}

// Proven reports whether f is proven for the identity.
func (a *Assessment) Proven(f Factor) bool {
	s, ok := a.Status(f)
	return ok && s.Level == LevelProven
}

// Linked reports whether f is proven or claimed for the identity, so that
// no other identity may take it.
func (a *Assessment) Linked(f Factor) bool {
	s, ok := a.Status(f)
	return ok && s.Level >= LevelClaimed
}

// Of returns the statuses of the given kind at or above min.
func (a *Assessment) Of(kind FactorKind, min Level) []FactorStatus {
	var out []FactorStatus
	for _, s := range a.Factors {
		if s.Factor.Kind == kind && s.Level >= min {
			out = append(out, s)
		}
	}
	return out
}

// IsChallenge reports whether m proves possession of a factor by a
// signature or a login.
func (m Method) IsChallenge() bool {
	return m == MethodPGPChallenge || m == MethodSSHChallenge || m == MethodOIDCLogin
}

// linkState is one factor's state during the replay.
type linkState struct {
	f       Factor
	order   int
	proven  int64 // possession record that made it proven, 0 if not
	authz   int64 // authorisation record since the last revocation, 0 if none
	revoked int64 // latest revocation record, 0 if none
	// revokedSince: the identity revoked the link and has not authorised
	// it again since; nothing a key carries brings it back.
	revokedSince bool
	// possession is the latest possession record (a challenge by the
	// factor with purpose add) since the last revocation, 0 if none: with
	// a key-carried claim from a proven key it proves the factor.
	possession int64
	expires    time.Time
	label      string
	records    []int64
	// implied links (auth subkey, user ID email): the record and parent
	implied       int64
	impliedMethod Method
	impliedParent Factor
	impliedExp    time.Time
	impliedLabel  string
	// mailed: the email.verified record that proves an email by mail
	// for the key mailParent, 0 if none or withdrawn
	mailed     int64
	mailParent Factor
}

// Assess applies the assurance rules to h's records at time now. records
// are the records naming h plus the records a key carries itself
// (Handle empty) for keys named there, in any order; other records are
// ignored. The rules, replayed in log order:
//
//   - A challenge record (pgp.challenge, ssh.challenge, oidc.login) linking
//     From to the identity with purpose claim makes From proven.
//   - One linking From to To with purpose add, whose From is proven at
//     that point, authorises To: To is claimed.
//   - One linking From to the identity with purpose add makes From proven
//     if From was authorised since its last revocation; otherwise it
//     records possession, which proves a key-carried claim (below).
//   - A revocation naming the identity and To, signed by a factor proven
//     at that point, revokes To: proven, authorisation and possession end,
//     and no key-carried record counts for To until the identity
//     authorises To again with a new signed statement. A revocation
//     without a handle revokes the key-carried record it names.
//   - A key-carried record (pgp.auth-subkey, pgp.auth-subkey-signed,
//     pgp.uid-selfsig) from an OpenPGP key P is a claim: anyone can bind
//     a public SSH key or write an email into a key of their own. Its To
//     is claimed while P is proven or claimed. An SSH key is proven
//     through P only when P is proven and the SSH key itself signed:
//     the binding embeds its signature (pgp.auth-subkey-signed), or it
//     signed a possession challenge for this identity. A user ID's email
//     is only claimed, unless verified by mail (below).
//   - An email.verified record (no handle) from a key P proves its email
//     while P is proven for the identity, until a later email.verified
//     record of P withdraws it (purpose revoke) or the identity revokes
//     the email.
//   - A record whose Expires is not after now has expired.
func Assess(h Handle, records []Evidence, now time.Time) *Assessment {
	recs := make([]*Evidence, 0, len(records))
	for i := range records {
		recs = append(recs, &records[i])
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })

	states := map[string]*linkState{}
	var order []*linkState
	get := func(f Factor) *linkState {
		k := string(f.Kind) + " " + f.Value
		s := states[k]
		if s == nil {
			s = &linkState{f: f, order: len(order)}
			states[k] = s
			order = append(order, s)
		}
		if len(s.f.Data) == 0 && len(f.Data) > 0 {
			s.f.Data = f.Data
		}
		return s
	}
	expired := func(t time.Time) bool { return !t.IsZero() && !t.After(now) }
	isProven := func(f Factor) bool {
		s := states[string(f.Kind)+" "+f.Value]
		return s != nil && s.proven != 0 && !expired(s.expires)
	}
	byseq := map[int64]*Evidence{}
	for _, e := range recs {
		byseq[e.Seq] = e
	}

	for _, e := range recs {
		switch {
		case e.Handle == h && e.Method.IsChallenge():
			from := get(e.From)
			from.records = append(from.records, e.Seq)
			if !e.To.IsZero() {
				to := get(e.To)
				to.records = append(to.records, e.Seq)
				if e.Purpose == PurposeAdd && isProven(e.From) && !expired(e.Expires) {
					to.authz, to.revokedSince = e.Seq, false
					if to.label == "" {
						to.label = e.Label
					}
				}
				continue
			}
			switch e.Purpose {
			case PurposeClaim:
				from.proven, from.expires, from.label = e.Seq, e.Expires, e.Label
			case PurposeAdd:
				if from.authz != 0 {
					from.proven, from.expires = e.Seq, e.Expires
					if e.Label != "" {
						from.label = e.Label
					}
				} else if !from.revokedSince && !expired(e.Expires) {
					from.possession = e.Seq
					if e.Label != "" {
						from.label = e.Label
					}
				}
			}
		case e.Handle == h && e.Method == MethodRevocation:
			if e.To.IsZero() || !isProven(e.From) {
				get(e.From).records = append(get(e.From).records, e.Seq)
				continue
			}
			to := get(e.To)
			to.records = append(to.records, e.Seq)
			to.proven, to.authz, to.possession, to.revoked, to.revokedSince = 0, 0, 0, e.Seq, true
		case e.Handle == h && e.Method == MethodHostRelease:
			s := get(e.From)
			s.records = append(s.records, e.Seq)
			s.proven, s.authz, s.possession, s.revoked, s.revokedSince = 0, 0, 0, e.Seq, true
		case e.Handle == "" && e.Method.KeyCarried():
			to := get(e.To)
			to.records = append(to.records, e.Seq)
			to.implied, to.impliedMethod, to.impliedParent, to.impliedExp, to.impliedLabel = e.Seq, e.Method, e.From, e.Expires, e.Label
		case e.Handle == "" && e.Method == MethodEmailVerified:
			to := get(e.To)
			to.records = append(to.records, e.Seq)
			switch {
			case e.Purpose == "":
				to.mailed, to.mailParent = e.Seq, e.From
			case to.mailParent.Same(e.From):
				to.mailed = 0
			}
		case e.Handle == "" && e.Method == MethodRevocation:
			if r := byseq[e.Revokes]; r != nil && !r.To.IsZero() {
				if s := states[string(r.To.Kind)+" "+r.To.Value]; s != nil && s.implied == r.Seq {
					s.implied = 0
					s.records = append(s.records, e.Seq)
				}
			}
		}
	}

	a := &Assessment{Handle: h}
	for _, s := range order {
		st := FactorStatus{Factor: s.f, Records: s.records, Label: s.label}
		switch {
		case s.proven != 0 && expired(s.expires):
			st.Level, st.Via = LevelExpired, []int64{s.proven}
		case s.proven != 0:
			st.Level, st.Via = LevelProven, []int64{s.proven}
			if s.authz != 0 {
				st.Via = []int64{s.authz, s.proven}
			}
		case s.authz != 0:
			st.Level, st.Via = LevelClaimed, []int64{s.authz}
		case s.revoked != 0:
			st.Level, st.Via = LevelRevoked, []int64{s.revoked}
		}
		// A link the key carries itself counts unless the identity revoked
		// it, and can only raise the level.
		if s.implied != 0 && !s.revokedSince {
			lvl, via := LevelNone, []int64{s.implied}
			parent := states[string(s.impliedParent.Kind)+" "+s.impliedParent.Value]
			switch {
			case expired(s.impliedExp):
				lvl = LevelExpired
			case parent == nil:
			case s.f.Kind == KindSSH && isProven(s.impliedParent) && s.impliedMethod == MethodPGPAuthSubkeySigned:
				lvl = LevelProven
			case s.f.Kind == KindSSH && isProven(s.impliedParent) && s.possession != 0:
				lvl, via = LevelProven, []int64{s.implied, s.possession}
			case parent.proven != 0 && !expired(parent.expires) || parent.authz != 0:
				lvl = LevelClaimed
			}
			if lvl > st.Level {
				st.Level, st.Via, st.Parent = lvl, via, s.impliedParent
				if st.Label == "" || s.proven == 0 {
					st.Label = s.impliedLabel
				}
			}
		}
		// An address verified by mail for a key proven here is proven,
		// unless the identity revoked it.
		if s.mailed != 0 && !s.revokedSince && isProven(s.mailParent) && st.Level < LevelProven {
			st.Level, st.Via, st.Parent = LevelProven, []int64{s.mailed}, s.mailParent
			if st.Label == "" {
				st.Label = "verified by mail"
			}
		}
		a.Factors = append(a.Factors, st)
	}
	return a
}

// Justification returns the records that establish f's level, with what
// they stand on, in log order: f's Via records, and for each of them that
// links another factor to f (an authorisation, a key-carried binding, a
// mail verification for a key), that factor's own justification, and
// likewise f's Parent's; so that the records lead from f to the identity.
// records are the records Assess was given. Nil if no record mentions f.
func (a *Assessment) Justification(f Factor, records []Evidence) []int64 {
	bySeq := make(map[int64]*Evidence, len(records))
	for i := range records {
		bySeq[records[i].Seq] = &records[i]
	}
	seen := map[int64]bool{}
	visited := map[string]bool{}
	var walk func(f Factor)
	walk = func(f Factor) {
		k := string(f.Kind) + " " + f.Value
		if visited[k] {
			return
		}
		visited[k] = true
		st, ok := a.Status(f)
		if !ok {
			return
		}
		for _, seq := range st.Via {
			seen[seq] = true
			if e := bySeq[seq]; e != nil && !e.To.IsZero() && e.To.Same(f) && !e.From.Same(f) {
				walk(e.From)
			}
		}
		if !st.Parent.IsZero() {
			walk(st.Parent)
		}
	}
	walk(f)
	if len(seen) == 0 {
		return nil
	}
	out := make([]int64, 0, len(seen))
	for seq := range seen {
		out = append(out, seq)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
