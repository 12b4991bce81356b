// profile.go: an identity's public profile (/u/{handle}) and the views of
// factors and evidence that it shares with the account page.

package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// factorView is one factor of an identity as pages show it.
type factorView struct {
	Kind  string // pgp, ssh, oidc, email
	Title string // what it is, in words
	Value string
	// Key is an SSH key's authorized_keys line.
	Key string
	// Link is the factor's page (a key page), if any.
	Link  string
	Level string
	Label string
	// Parent says which key carries the factor, if one does.
	Parent string
	// Corroborated: an email claimed by a linked key that a provider of
	// the identity verified.
	Corroborated bool
	// VerifiedBy are the providers' issuers that verified this email.
	VerifiedBy []string
	Evidence   []evidenceView
	// Unlinkable: the account page offers to unlink it.
	Unlinkable bool
	// Current: the account the viewer's session logged in with.
	Current bool
}

// Active reports whether the factor counts for its identity now: not
// revoked and not expired.
func (f factorView) Active() bool {
	return f.Level != identity.LevelRevoked.String() && f.Level != identity.LevelExpired.String()
}

// inactiveCount is how many factors no longer count.
func inactiveCount(fs []factorView) int {
	n := 0
	for _, f := range fs {
		if !f.Active() {
			n++
		}
	}
	return n
}

// certificateView is one SSH certificate issued for an identity.
type certificateView struct {
	// Serial is the certificate's serial, the number of the record that
	// published it.
	Serial int64
	// Key is the certified SSH key's fingerprint; KeyID the certificate's
	// key ID.
	Key, KeyID string
	// ValidAfter and ValidBefore bound its validity.
	ValidAfter, ValidBefore string
	// State is "valid", "expired" or "revoked" (identity.CertificateState).
	State string
	Log   string
}

// certificateViews lists the certificates issued for the identity whose
// assessment and records these are, newest first.
func certificateViews(a *identity.Assessment, recs []identity.Evidence, now time.Time) []certificateView {
	var out []certificateView
	for i := range recs {
		e := &recs[i]
		if e.Method != identity.MethodSSHCertificate || e.Handle != a.Handle {
			continue
		}
		out = append(out, certificateView{Serial: e.Seq, Key: e.From.Value, KeyID: e.Label,
			ValidAfter: e.Created.UTC().Format(timeFormat), ValidBefore: e.Expires.UTC().Format(timeFormat),
			State: identity.CertificateState(a, e, now), Log: recordLink(e.Seq)})
	}
	slices.Reverse(out)
	return out
}

// timeFormat writes an instant to the minute.
const timeFormat = "2006-01-02 15:04 MST"

// authorizedKeysCommand fetches an identity's proven SSH keys into
// ~/.ssh/authorized_keys, replacing the file only once the download
// succeeded: run again, it gives the same file (no duplicates) and
// drops revoked keys, which appending (>>) never does.
func authorizedKeysCommand(server, handle string) string {
	return "curl -fsS " + server + "/users/" + handle + ".keys -o ~/.ssh/authorized_keys.new && mv ~/.ssh/authorized_keys.new ~/.ssh/authorized_keys"
}

// evidenceView is one evidence record in a factor's list.
type evidenceView struct {
	Seq     int64
	Method  string
	Purpose string
	What    string
	Created string
	Expires string
	// Counts: the record establishes the factor's current level.
	Counts bool
	Log    string
}

var kindTitles = map[identity.FactorKind]string{
	identity.KindPGP:   "OpenPGP key",
	identity.KindSSH:   "SSH key",
	identity.KindOIDC:  "OpenID Connect account",
	identity.KindEmail: "Email address",
}

// methodWords says what a record shows, in words.
func methodWords(m identity.Method) string {
	switch m {
	case identity.MethodPGPUIDSelfSig:
		return "named in a self-signed user ID (a claim by the key's holder)"
	case identity.MethodPGPAuthSubkey:
		return "an authentication subkey of the OpenPGP key (a claim: the SSH key did not sign the binding)"
	case identity.MethodPGPAuthSubkeySigned:
		return "an authentication subkey of the OpenPGP key, whose binding the SSH key signed too"
	case identity.MethodPGPChallenge:
		return "the OpenPGP key signed a challenge"
	case identity.MethodSSHChallenge:
		return "the SSH key signed a challenge (ssh-keygen -Y sign)"
	case identity.MethodOIDCLogin:
		return "a login at the provider (ID token kept)"
	case identity.MethodOIDCEmailVerified:
		return "the provider verified the email"
	case identity.MethodEmailVerified:
		return "a link this server mailed to the address was followed: verified by mail (with purpose revoke: withdrawn)"
	case identity.MethodPGPCertification:
		return "certified by another key"
	case identity.MethodRevocation:
		return "revoked"
	case identity.MethodSSHCertificate:
		return "an SSH certificate was issued for the key"
	case identity.MethodOIDCDeviceApproval:
		return "a login on another device approved a certificate for the key (ID token kept)"
	case identity.MethodSSHCAKey:
		return "the server's SSH certificate authority key"
	case identity.MethodHostRelease:
		return "released by the server's operator (the host name may be claimed again)"
	}
	return string(m)
}

// factorViews turns an assessment into views. private adds what only the
// identity's holder sees (emails verified by providers that no key names).
func factorViews(a *identity.Assessment, recs []identity.Evidence, private bool) []factorView {
	bySeq := map[int64]*identity.Evidence{}
	for i := range recs {
		bySeq[recs[i].Seq] = &recs[i]
	}
	verified := identity.ProviderVerifiedEmails(a, recs)
	corroborated := map[string]bool{}
	for _, st := range identity.CorroboratedEmails(a, recs) {
		corroborated[st.Factor.Value] = true
	}
	var out []factorView
	seen := map[string]bool{}
	for _, st := range a.Factors {
		if st.Level == identity.LevelNone {
			continue
		}
		fv := factorView{
			Kind: string(st.Factor.Kind), Title: kindTitles[st.Factor.Kind], Value: st.Factor.Value,
			Level: st.Level.String(), Label: st.Label,
		}
		switch st.Factor.Kind {
		case identity.KindPGP:
			fv.Link = "/keys/" + st.Factor.Value
		case identity.KindSSH:
			if pub, err := ssh.ParsePublicKey(st.Factor.Data); err == nil {
				fv.Key = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ssh.NewKey(pub, ""))))
			}
		case identity.KindOIDC:
			iss, sub, _ := strings.Cut(st.Factor.Value, " ")
			fv.Value = sub + " at " + iss
		case identity.KindEmail:
			seen[st.Factor.Value] = true
			fv.Corroborated = corroborated[st.Factor.Value]
			if private || fv.Corroborated {
				for _, acct := range verified[st.Factor.Value] {
					iss, _, _ := strings.Cut(acct.Value, " ")
					fv.VerifiedBy = append(fv.VerifiedBy, iss)
				}
			}
		}
		if !st.Parent.IsZero() {
			fv.Parent = st.Parent.Value
		}
		for _, seq := range st.Records {
			if e := bySeq[seq]; e != nil {
				fv.Evidence = append(fv.Evidence, evidenceOf(e, slices.Contains(st.Via, seq)))
			}
		}
		out = append(out, fv)
	}
	if private {
		for email, accts := range verified {
			if seen[email] {
				continue
			}
			fv := factorView{Kind: string(identity.KindEmail), Title: kindTitles[identity.KindEmail], Value: email, Level: "verified by a provider"}
			for _, acct := range accts {
				iss, _, _ := strings.Cut(acct.Value, " ")
				fv.VerifiedBy = append(fv.VerifiedBy, iss)
			}
			for _, e := range recs {
				if e.Method == identity.MethodOIDCEmailVerified && e.To.Value == email {
					fv.Evidence = append(fv.Evidence, evidenceOf(&e, true))
				}
			}
			out = append(out, fv)
		}
	}
	return out
}

// recordLink is the log API's URL of the one record with sequence
// number seq.
func recordLink(seq int64) string {
	return fmt.Sprintf("/api/v1/log?after=%d&limit=1", seq-1)
}

func evidenceOf(e *identity.Evidence, counts bool) evidenceView {
	return evidenceView{
		Seq: e.Seq, Method: string(e.Method), Purpose: string(e.Purpose), What: methodWords(e.Method),
		Created: e.Created.UTC().Format("2006-01-02 15:04 MST"), Expires: date(e.Expires), Counts: counts,
		Log: recordLink(e.Seq),
	}
}

// serveProfile shows an identity's factors and their evidence.
func (h *Handler) serveProfile(w http.ResponseWriter, r *http.Request) {
	p := h.page(w, r, "Profile")
	handle := r.PathValue("handle")
	if folded := identity.FoldHandle(handle); folded != handle {
		if _, err := identity.ParseHandle(folded); err == nil {
			http.Redirect(w, r, "/u/"+folded, http.StatusMovedPermanently)
			return
		}
	}
	id, a, recs, err := h.deps.Identities.Lookup(r.Context(), handle)
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.internal(w, r, err)
			return
		}
	case identity.CodeUnknownIdentity, identity.CodeBadHandle, identity.CodeReservedHandle:
		h.fail(w, r, http.StatusNotFound, "No such identity", "No identity has that handle here.")
		return
	default:
		h.refusal(w, r, "No such identity", err)
		return
	}
	p.Title = string(id.Handle)
	factors := factorViews(a, recs, false)
	v := profileView{Handle: string(id.Handle), Created: date(id.Created), Factors: factors, Certificates: certificateViews(a, recs, h.now()),
		Picture: newPicture(string(id.Handle), factors), TallPicture: newTallPicture(string(id.Handle), factors), Server: h.publicURL()}
	var keys []string
	for _, f := range factors {
		if f.Kind == string(identity.KindSSH) && f.Level == "proven" && f.Key != "" {
			keys = append(keys, f.Key+" "+v.Handle)
		}
	}
	v.AuthorizedKeys = keys
	h.render(w, r, http.StatusOK, profilePage(p, v))
}

// profileView is the profile page.
type profileView struct {
	Handle, Created string
	Factors         []factorView
	// Certificates are the SSH certificates issued for the identity.
	Certificates []certificateView
	// Picture is the identity drawn for a wide screen, TallPicture for a
	// narrow one.
	Picture, TallPicture picture
	// Server is the server's public URL.
	Server string
	// AuthorizedKeys are the proven SSH keys as authorized_keys lines.
	AuthorizedKeys []string
}

// publicURL is the server's URL as its statements name it ("Kith
// <https://keys.example.org>").
func (h *Handler) publicURL() string {
	s := h.deps.Identities.Server()
	if i, j := strings.IndexByte(s, '<'), strings.LastIndexByte(s, '>'); i >= 0 && j > i {
		return s[i+1 : j]
	}
	return s
}

// factorValue is the factor's value as the unlink form sends it back (the
// stored form, not the display form).
func factorValue(f factorView) string {
	if f.Kind == string(identity.KindOIDC) {
		sub, iss, _ := strings.Cut(f.Value, " at ")
		return iss + " " + sub
	}
	return f.Value
}
