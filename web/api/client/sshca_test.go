package client_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api/client"
)

// TestCertificateForAProvenKeyOnly: a proven key gets a certificate for
// itself, signed by the server's CA, which ssh-keygen reads; a claimed
// key, an unknown handle, too long a validity, a server without a CA and
// a certificate by another CA than the one expected are refused, with
// the server's code and a hint.
func TestCertificateForAProvenKeyOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	keys := t.TempDir()
	proven, claimed, other := u.sshKey(keys, "proven"), u.sshKey(keys, "claimed"), u.sshKey(keys, "other")
	if _, err := c.Claim(ctx, "alice", proven); err != nil {
		t.Fatal(err)
	}
	// claimed is linked with the co-signer's consent only: a claim.
	stmt, err := c.Challenge(ctx, identity.PurposeAdd, "alice", claimed.Pub)
	if err != nil {
		t.Fatal(err)
	}
	bySig, err := proven.Sign(ctx, stmt)
	if err != nil {
		t.Fatal(err)
	}
	srv.post("/api/v1/identities/alice/factors", map[string]string{"statement": stmt, "by": proven.Pub, "by_signature": bySig})

	caLine, err := c.CALine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cas, err := client.ParseCAKeys(caLine)
	if err != nil || len(cas) != 1 {
		t.Fatalf("CA keys %v, %v", cas, err)
	}
	cert, err := c.Certificate(ctx, "alice", proven, client.CertificateRequest{Validity: "1h", CAKeys: cas})
	if err != nil {
		t.Fatal(err)
	}
	if !ssh.SameKey(cert.Cert.SignatureKey, cas[0]) || !strings.HasPrefix(cert.Log, srv.url+"/") || len(cert.Cert.ValidPrincipals) == 0 {
		t.Errorf("certificate %+v, log %s", cert.Cert, cert.Log)
	}
	file := client.CertificateFile(proven.File + ".pub")
	if err := client.WriteAtomic(file, []byte(cert.Line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-L", "-f", file).CombinedOutput(); err != nil || !strings.Contains(string(out), "user certificate") {
		t.Errorf("ssh-keygen -L: %v\n%s", err, out)
	}

	plain := newServerCA(t, false)
	otherCA, err := client.ParseCAKeys([]byte(other.Pub))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		c      *client.Client
		handle string
		key    client.Signer
		req    client.CertificateRequest
		code   identity.Code
		want   string
	}{
		{"claimed key", c, "alice", claimed, client.CertificateRequest{}, identity.CodeNotProven, "kith id add alice --ssh-key " + claimed.File},
		{"unknown handle", c, "nobody", proven, client.CertificateRequest{}, identity.CodeUnknownIdentity, "kith id claim nobody"},
		{"too long", c, "alice", proven, client.CertificateRequest{Validity: "48h"}, identity.CodeBadValidity, "shorter --validity"},
		{"no CA", plain.client(), "alice", proven, client.CertificateRequest{}, identity.CodeCADisabled, "not an SSH certificate authority"},
		{"another CA expected", c, "alice", proven, client.CertificateRequest{CAKeys: otherCA}, "", "not by the CA expected"},
	} {
		_, err := tt.c.Certificate(ctx, tt.handle, tt.key, tt.req)
		var r *client.Refusal
		switch {
		case err == nil:
			t.Errorf("%s: a certificate", tt.name)
		case tt.code != "" && (!errors.As(err, &r) || r.Code != tt.code):
			t.Errorf("%s: %v, want a refusal %s", tt.name, err, tt.code)
		case !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: %v lacks %q", tt.name, err, tt.want)
		}
	}
	if _, err := plain.client().CALine(ctx); err == nil {
		t.Error("the CA key of a server without a CA")
	}
}

// TestKRLNamesTheRevokedCertificateAndNeverGoesBack: after a key's link
// is revoked the server's list revokes its certificate (as ssh-keygen -Q
// reads it); a list naming another CA than the one expected is refused,
// and a list older than the one installed is not installed.
func TestKRLNamesTheRevokedCertificateAndNeverGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newServer(t)
	c := srv.client()
	u := newUser(t)
	keys := t.TempDir()
	laptop, desktop := u.sshKey(keys, "laptop"), u.sshKey(keys, "desktop")
	if _, err := c.Claim(ctx, "alice", laptop); err != nil {
		t.Fatal(err)
	}
	doc, err := c.Add(ctx, "alice", desktop, laptop)
	if err != nil {
		t.Fatal(err)
	}
	cas, err := c.CAKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]string{}
	for _, k := range []client.Signer{laptop, desktop} {
		cert, err := c.Certificate(ctx, "alice", k, client.CertificateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		certs[k.ID] = filepath.Join(keys, strings.ReplaceAll(k.Label, "/", "_")+"-cert.pub")
		os.WriteFile(certs[k.ID], []byte(cert.Line+"\n"), 0o644)
	}
	f, err := u.tools.Find(ctx, doc, desktop.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, "alice", f, laptop); err != nil {
		t.Fatal(err)
	}
	krl, err := c.KRL(ctx, cas)
	if err != nil {
		t.Fatal(err)
	}
	if n := krl.Revoked(); n != 1 {
		t.Errorf("the list revokes %d certificates, want 1", n)
	}
	out := filepath.Join(t.TempDir(), "kith.krl")
	if err := krl.Install(out); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{desktop.ID: true, laptop.ID: false} {
		b, _ := exec.Command("ssh-keygen", "-Q", "-f", out, certs[id]).CombinedOutput()
		if got := strings.Contains(string(b), "REVOKED"); got != want {
			t.Errorf("ssh-keygen -Q %s: %s", id, b)
		}
	}

	// Never back to an older list: a newer one installed stays.
	newer := (&ssh.KRL{Version: 1 << 62, Certificates: []ssh.RevokedCertificates{{CA: cas[0].Marshal()}}}).Marshal()
	os.WriteFile(out, newer, 0o644)
	if err := krl.Install(out); err == nil || !strings.Contains(err.Error(), "older") {
		t.Errorf("installing over a newer list: %v", err)
	}
	if got, _ := os.ReadFile(out); string(got) != string(newer) {
		t.Error("a newer list was replaced")
	}
	// A list naming another CA than the one expected is refused.
	other, err := client.ParseCAKeys([]byte(laptop.Pub))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KRL(ctx, other); err == nil || !strings.Contains(err.Error(), "names none of the CA keys") {
		t.Errorf("a list for another CA: %v", err)
	}
}
