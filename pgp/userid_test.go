package pgp

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/pgp/gpgtest"
)

// userIDCases are user IDs and the address each carries for Kith (want)
// and for gpg 2.2's mailbox search (gpg, its `<addr>` lookup: the first
// <...>), where those readers differ and an attacker lives.
var userIDCases = []struct {
	uid, want, gpg string
}{
	// One mailbox: every reader agrees.
	{"Name <User@Example.org>", "user@example.org", "user@example.org"},
	{"user@example.org", "user@example.org", "user@example.org"},
	{"  user@example.org  ", "", ""},
	{"Name (comment) <a@b.example> ", "a@b.example", "a@b.example"},
	{"<a@b.example>", "a@b.example", "a@b.example"},
	{`"Doe, Jane" <jane@example.org>`, "jane@example.org", "jane@example.org"},
	{"Moritz <m@gmx.de-mail.de> (De-Mail)", "m@gmx.de-mail.de", "m@gmx.de-mail.de"},
	{"infinity0@pwned.example <infinity0@pwned.example>", "infinity0@pwned.example", "infinity0@pwned.example"},
	{"Emmanuel (e@one.example) <e@two.example>", "e@two.example", "e@two.example"},
	{"Jürgen Weiß <jw@example.de>", "jw@example.de", "jw@example.de"},
	// No address at all.
	{"Name <not an address>", "", ""},
	{"just a name", "", ""},
	{"<>", "", ""},
	{"Name <@example.org>", "", ""},
	{"Name <user@>", "", ""},
	// Ambiguous: two readings, so none. gpg takes the first <...>, Kith
	// took the last.
	{"CEO <ceo@example.org> <mallory@example.org>", "", "ceo@example.org"},
	{"CEO <ceo@example.org>, <mallory@example.org>", "", "ceo@example.org"},
	{"CEO <ceo@example.org> mallory@example.org", "", "ceo@example.org"},
	{"CEO <ceo@example.org>>", "", "ceo@example.org"},
	{"CEO <<ceo@example.org>", "", ""},
	{"CEO <ceo@example.org", "", ""},
	{"CEO ceo@example.org>", "", ""},
	{"CEO (<ceo@example.org>) <mallory@example.org>", "", "ceo@example.org"},
	{"CEO (<ceo@example.org>", "", "ceo@example.org"},
	{`"CEO <ceo@example.org>`, "", "ceo@example.org"},
	{"CEO <ceo@example.org> (x", "", "ceo@example.org"},
	{"CEO <ceo@example.org,mallory@example.org>", "", ""},
	{"CEO <ceo@example.org@mallory.example>", "", ""},
	{"CEO <ceo@example.org;mallory@example.org>", "", ""},
	{"CEO <mallory@example.org\nceo@example.org>", "", ""},
	{"mallory@example.org, ceo@example.org", "", ""},
	{"mallory@example.org ceo@example.org", "", ""},
	{`CEO <"ceo@example.org"@mallory.example>`, "", ""},
	{"CEO <ceo@[192.0.2.1]>", "", ""},
	{"CEO <ceo..x@example.org>", "", "ceo..x@example.org"},
	{"CEO <ceo\xff@example.org>", "", ""},
	{"CEO <ceo\ufffd@example.org>", "", ""},
}

func TestUserIDAddressReadsOneMailboxOrNone(t *testing.T) {
	for _, c := range userIDCases {
		if got := UserIDAddress(c.uid); got != c.want {
			t.Errorf("UserIDAddress(%q) = %q, want %q", c.uid, got, c.want)
		}
	}
}

// TestUserIDAddressNeverDisagreesWithGPG: whatever address Kith reads,
// gpg reads the same one: Kith never mails, verifies or serves a user ID
// under an address gpg would encrypt to under another. (Where gpg reads
// an address and Kith none, Kith only stays silent.) The table's gpg
// column is gpg's own answer, checked here by the real gpg.
func TestUserIDAddressNeverDisagreesWithGPG(t *testing.T) {
	for _, c := range userIDCases {
		if c.want != "" && c.want != c.gpg {
			t.Errorf("%q: Kith reads %q, gpg %q", c.uid, c.want, c.gpg)
		}
	}
	h := gpgtest.New(t)
	addrs := regexp.MustCompile(`[A-Za-z0-9.]+@[A-Za-z0-9.]+`)
	fprOf, made := map[string]string{}, 0
	for _, c := range userIDCases {
		if strings.ContainsAny(c.uid, "\n") || strings.TrimSpace(c.uid) != c.uid || !addrs.MatchString(c.uid) {
			continue // gpg's key generation refuses or trims these, or nothing to look up
		}
		h.Run("", "--quick-gen-key", c.uid, "ed25519", "sign", "0")
		made++
	}
	fpr := ""
	for _, l := range strings.Split(string(h.Run("", "--with-colons", "--list-keys")), "\n") {
		f := strings.Split(l, ":")
		switch {
		case f[0] == "pub":
			fpr = ""
		case f[0] == "fpr" && fpr == "":
			fpr = f[9]
		case f[0] == "uid":
			fprOf[f[9]] = fpr // none of the user IDs has a character gpg escapes
		}
	}
	// found lists the fingerprints gpg finds for <addr>, its mailbox
	// search.
	found := func(addr string) []string {
		c := exec.Command("gpg", "--batch", "--with-colons", "--list-keys", "<"+addr+">")
		c.Env = h.Env()
		out, _ := c.Output() // no key found is an exit status, and no fpr line
		var fprs []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "fpr:") {
				fprs = append(fprs, strings.Split(l, ":")[9])
			}
		}
		return fprs
	}
	checked := 0
	for _, c := range userIDCases {
		fpr, ok := fprOf[c.uid]
		if !ok {
			continue
		}
		checked++
		for _, a := range addrs.FindAllString(c.uid, -1) {
			a = strings.ToLower(a)
			if got, want := slices.Contains(found(a), fpr), a == c.gpg; got != want {
				t.Errorf("%q: gpg's mailbox search for <%s> finds the key: %v, the table says gpg reads %q", c.uid, a, got, c.gpg)
			}
		}
	}
	if checked != made {
		t.Errorf("gpg listed %d of the %d user IDs it was given", checked, made)
	}
}
