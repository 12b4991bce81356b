package web_test

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
)

// TestProfileFoldsRevokedKeysAndListsCertificates: on the profile and
// the account page a revoked SSH key is folded away with the factors
// that no longer count, with no key line and no copy button; the SSH
// certificates issued for the identity are listed with their validity;
// and the authorized_keys command replaces the file (running it again
// changes nothing and drops revoked keys) instead of appending to it.
func TestProfileFoldsRevokedKeysAndListsCertificates(t *testing.T) {
	s := newKeySite(t)
	b := s.browser()
	k1, pub1 := sshKey(t)
	k2, pub2 := sshKey(t)
	if p := b.claimByKey("nora", k1, pub1); p.url.Path != "/claim/done" {
		t.Fatalf("claim: %d at %s", p.status, p.url)
	}
	f1, f2 := sshFactor(t, pub1), sshFactor(t, pub2)
	ctx := t.Context()
	c, err := s.svc.IssueChallenge(ctx, identity.PurposeAdd, "nora", f2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Add(ctx, identity.AddRequest{Statement: c.Statement,
		New: &identity.Proof{Signature: []byte(sshSign(t, k2, c.Statement))},
		By:  &identity.Proof{Factor: f1, Signature: []byte(sshSign(t, k1, c.Statement))}}); err != nil {
		t.Fatal(err)
	}
	c, err = s.svc.IssueChallenge(ctx, identity.PurposeCertificate, "nora", f1)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := s.svc.IssueCertificate(ctx, identity.CertificateRequest{Statement: c.Statement, Signature: []byte(sshSign(t, k1, c.Statement))})
	if err != nil {
		t.Fatal(err)
	}
	c, err = s.svc.IssueChallenge(ctx, identity.PurposeRevoke, "nora", f2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Revoke(ctx, identity.RevokeRequest{Statement: c.Statement, By: identity.Proof{Factor: f1, Signature: []byte(sshSign(t, k1, c.Statement))}}); err != nil {
		t.Fatal(err)
	}

	blob2 := base64.StdEncoding.EncodeToString(f2.Data)
	blob1 := base64.StdEncoding.EncodeToString(f1.Data)
	serial := regexp.QuoteMeta("Certificate " + itoa(cert.Record.Seq))
	certRE := regexp.MustCompile(`(?s)<li class="certificate" data-state="valid">.*` + serial + `.*valid from <span class="nobr">[0-9-]+ [0-9:]+ UTC</span> to <span class="nobr">[0-9-]+ [0-9:]+ UTC</span>`)
	for _, path := range []string{"/u/nora", "/account"} {
		p := b.get(path)
		if p.status != http.StatusOK || p.url.Path != path {
			t.Fatalf("%s: %d at %s", path, p.status, p.url)
		}
		live, folded, ok := strings.Cut(p.body, `<details id="inactive-factors"`)
		if !ok {
			t.Errorf("%s folds away no factor:\n%s", path, p.body)
			continue
		}
		if strings.Contains(p.body, blob2) {
			t.Errorf("%s shows the revoked key's line", path)
		}
		if !strings.Contains(folded, f2.Value) || strings.Contains(live, f2.Value+"</div>") {
			t.Errorf("%s: the revoked key %s is not among the folded factors", path, f2.Value)
		}
		if !strings.Contains(live, `<pre data-copy="SSH key">`+pub1[:strings.Index(pub1, " ")]+" "+blob1) {
			t.Errorf("%s: the live key has no copyable line", path)
		}
		if !certRE.MatchString(p.body) {
			t.Errorf("%s lists no valid certificate %d with its validity:\n%s", path, cert.Record.Seq, p.body)
		}
	}
	p := b.get("/u/nora")
	if strings.Contains(p.body, ">> ~/.ssh/authorized_keys") || strings.Contains(p.body, "&gt;&gt; ~/.ssh/authorized_keys") {
		t.Error("the profile still appends to authorized_keys")
	}
	if !strings.Contains(p.body, "curl -fsS "+s.srv.URL+"/users/nora.keys -o ~/.ssh/authorized_keys.new &amp;&amp; mv ~/.ssh/authorized_keys.new ~/.ssh/authorized_keys") {
		t.Errorf("the profile's authorized_keys command does not replace the file:\n%s", p.body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
