package web_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/web"
)

// TestLogKeepsEmailsAndTokensPrivate signs up (the provider verifies
// alice's email) and links carol's account, then reads the public log:
// no record shows an email the provider verified or an ID token that
// carries one; the records commit to them instead. The owner downloads
// the artifacts, which open the commitments and make the records verify;
// deleting the identity erases them, and the log still verifies, the
// records now reported as erased.
func TestLogKeepsEmailsAndTokensPrivate(t *testing.T) {
	s := newSite(t, web.Options{})
	b := s.browser()
	b.signUp(alice, "alice")
	form := b.get("/account")
	begin := b.post("/login/other", url.Values{"csrf": {form.csrf(t)}, "next": {"/account"}})
	if p := b.consent(b.get(b.approve(b.atProvider(begin), carol).String())); !strings.Contains(p.body, "The account is linked") {
		t.Fatalf("link carol's account: %d at %s:\n%s", p.status, p.url, p.body)
	}

	recs, err := s.store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	private := 0
	for i := range recs {
		e := &recs[i]
		enc := e.CanonicalBytes()
		for _, secret := range []string{alice.Email, carol.Email, alice.Name, carol.Name} {
			if bytes.Contains(enc, []byte(secret)) || bytes.Contains(e.Signature, []byte(".")) && !e.Committed(identity.ArtifactIDToken) && tokenHolds(t, e.Signature, secret) {
				t.Errorf("record %d (%s) shows %q in the public log", e.Seq, e.Method, secret)
			}
		}
		if len(e.Commitments) > 0 {
			private++
			if len(e.Artifacts) != 0 || e.Committed(identity.ArtifactIDToken) && len(e.Signature) != 0 {
				t.Errorf("record %d: the public log holds its artifacts", e.Seq)
			}
		}
	}
	// alice's email record, carol's possession login and email record.
	if private != 3 {
		t.Errorf("%d records commit to private artifacts, want 3", private)
	}
	checkAll := func(recs []identity.Evidence, wantUnchecked int, why string) {
		t.Helper()
		var lv verify.LogVerifier
		unchecked := 0
		for i := range recs {
			for _, f := range lv.Add(&recs[i]) {
				switch {
				case f.Unchecked:
					unchecked++
					if !strings.Contains(f.Reason, why) {
						t.Errorf("record %d: %s; want it to say %q", f.Seq, f.Reason, why)
					}
				default:
					t.Errorf("record %d: %s", f.Seq, f.Reason)
				}
			}
		}
		if unchecked != wantUnchecked {
			t.Errorf("%d records unchecked, want %d", unchecked, wantUnchecked)
		}
	}
	checkAll(recs, 3, "kept private")

	// The owner's artifacts open every commitment.
	resp, err := b.c.Get(s.srv.URL + "/account/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	var arts []identity.RecordArtifacts
	err = json.NewDecoder(resp.Body).Decode(&arts)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(arts) != 3 {
		t.Fatalf("artifacts: %s, %v, %d records", resp.Status, err, len(arts))
	}
	if p := s.browser().get("/account/artifacts"); p.url.Path != "/login" {
		t.Errorf("a visitor got the artifacts: %d at %s", p.status, p.url)
	}
	opened := make([]identity.Evidence, len(recs))
	copy(opened, recs)
	for _, a := range arts {
		e := &opened[a.Seq-1]
		if err := e.Reveal(a.Artifacts); err != nil {
			t.Fatal(err)
		}
	}
	checkAll(opened, 0, "")
	wrong := recs[arts[0].Seq-1]
	bad := append([]identity.Artifact(nil), arts[0].Artifacts...)
	bad[0].Salt = bytes.Repeat([]byte{1}, identity.ArtifactSaltSize)
	if err := wrong.Reveal(bad); !errors.Is(err, identity.ErrArtifactMismatch) {
		t.Errorf("a wrong salt opened a commitment: %v", err)
	}

	// Deleting the identity erases the artifacts; the log still verifies.
	acct := b.get("/account")
	if p := b.consent(b.post("/account/delete", url.Values{"csrf": {acct.csrf(t)}, "confirm": {"alice"}})); p.status != http.StatusOK {
		t.Fatalf("delete: %d at %s:\n%s", p.status, p.url, p.body)
	}
	if left, err := s.store.IdentityArtifacts(t.Context(), "alice"); err != nil || len(left) != 0 {
		t.Errorf("artifacts after deletion: %v, %v", left, err)
	}
	after, err := s.store.Log(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if !bytes.Equal(after[i].ComputeHash(), recs[i].Hash) {
			t.Errorf("record %d hashes differently after the erasure", recs[i].Seq)
		}
	}
	var lv verify.LogVerifier
	erased := 0
	for i := range after {
		for _, f := range lv.Add(&after[i]) {
			if f.Unchecked && strings.Contains(f.Reason, "artifact erased") {
				erased++
			} else {
				t.Errorf("after deletion, record %d: %s", f.Seq, f.Reason)
			}
		}
	}
	if erased != 3 {
		t.Errorf("%d records report their artifacts erased, want 3", erased)
	}
}

// tokenHolds reports whether a JWT's payload holds s.
func tokenHolds(t *testing.T, token []byte, s string) bool {
	t.Helper()
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64RawURL(parts[1])
	return err == nil && strings.Contains(string(payload), s)
}

func base64RawURL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
