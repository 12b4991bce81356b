package inprocess_test

import (
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/inprocess"
)

// TestVerifierRefuses checks that the fake verifier refuses what a real
// one would, with the real codes.
func TestVerifierRefuses(t *testing.T) {
	v := inprocess.NewVerifier()
	v.SetPGPKey("AB", []byte("key AB"), nil)
	v.SetPGPKey("CD", []byte("key CD"), nil)
	st := []byte("statement")
	blob, other := []byte("blob"), []byte("other")
	for _, tt := range []struct {
		name string
		err  error
		want identity.Code
	}{
		{"ssh: good", v.VerifySSH(ctx, blob, st, inprocess.SignSSH(blob, st)), ""},
		{"ssh: another statement", v.VerifySSH(ctx, blob, st, inprocess.SignSSH(blob, []byte("x"))), identity.CodeBadSignature},
		{"ssh: garbage", v.VerifySSH(ctx, blob, st, []byte("statement")), identity.CodeBadSignature},
		{"ssh: another key", v.VerifySSH(ctx, blob, st, inprocess.SignSSH(other, st)), identity.CodeWrongKey},
		{"ssh: another namespace", v.VerifySSH(ctx, blob, st, inprocess.SignSSHNamespace("git", blob, st)), identity.CodeWrongNamespace},
		{"pgp: good", pgpErr(v.VerifyPGP(ctx, "AB", st, inprocess.SignPGP("AB", st))), ""},
		{"pgp: another statement", pgpErr(v.VerifyPGP(ctx, "AB", st, inprocess.SignPGP("AB", nil))), identity.CodeBadSignature},
		{"pgp: another key", pgpErr(v.VerifyPGP(ctx, "AB", st, inprocess.SignPGP("CD", st))), identity.CodeWrongKey},
		{"pgp: unknown key", pgpErr(v.VerifyPGP(ctx, "EF", st, inprocess.SignPGP("EF", st))), identity.CodeUnknownKey},
		{"login: unknown token", v.VerifyLogin(ctx, identity.Login{Account: identity.OIDCFactor("i", "s"), IDToken: "t"}), identity.CodeBadSignature},
	} {
		if got := identity.CodeOf(tt.err); got != tt.want || tt.want == "" && tt.err != nil {
			t.Errorf("%s: %v, want code %q", tt.name, tt.err, tt.want)
		}
	}
	l := identity.Login{Account: identity.OIDCFactor("i", "s"), IDToken: "t", Email: identity.EmailFactor("a@b.c")}
	v.AddLogin(l)
	if err := v.VerifyLogin(ctx, l); err != nil {
		t.Errorf("registered login: %v", err)
	}
	l2 := l
	l2.Account = identity.OIDCFactor("i", "other")
	l3 := l
	l3.Email = identity.EmailFactor("x@b.c")
	for _, bad := range []identity.Login{l2, l3} {
		if identity.CodeOf(v.VerifyLogin(ctx, bad)) != identity.CodeBadSignature {
			t.Errorf("login %+v accepted", bad)
		}
	}
	if _, _, err := v.PGPKeyLinks(ctx, "EF", time.Now()); err != identity.ErrNotFound {
		t.Errorf("links of an unknown key: %v", err)
	}
}

func pgpErr(_ []byte, err error) error { return err }
