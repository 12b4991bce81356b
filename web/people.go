// people.go: search that finds people. A handle (with or without "@"),
// an SSH key's SHA256 fingerprint or an OpenPGP fingerprint finds the
// identity it names or that proved the key; an exact match jumps to its
// page, and "I'm Feeling Lucky" to the best match.

package web

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity"
)

// personHit is an identity a search found.
type personHit struct {
	Handle string
	// Via says how the search names it: "handle", "SSH key", "OpenPGP key".
	Via string
	// Proven and Claimed count its factors at each assurance.
	Proven, Claimed int
}

// Assurance sums up a hit's factors in words.
func (p personHit) Assurance() string {
	s := plural(p.Proven, "proven factor")
	if p.Claimed > 0 {
		s += ", " + plural(p.Claimed, "claimed")
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "factor") {
		what += "s"
	}
	return strconv.Itoa(n) + " " + what
}

// isSSHFingerprint reports whether q looks like an SSH key's SHA256
// fingerprint, as ssh-keygen -l prints it.
func isSSHFingerprint(q string) bool {
	q = strings.TrimSpace(q)
	return strings.HasPrefix(q, "SHA256:") && len(q) == len("SHA256:")+43
}

// findPeople returns the identities q names, and the page to jump to
// when q names one exactly: an identity's profile for a handle or an SSH
// key, the key page for a stored OpenPGP key's fingerprint.
func (h *Handler) findPeople(r *http.Request, q string) ([]personHit, string, error) {
	ctx := r.Context()
	q = strings.TrimSpace(q)
	var hits []personHit
	add := func(handle identity.Handle, via string) error {
		_, a, _, err := h.deps.Identities.Lookup(ctx, string(handle))
		if identity.CodeOf(err) != "" {
			return nil
		}
		if err != nil {
			return err
		}
		hit := personHit{Handle: string(handle), Via: via}
		for _, st := range a.Factors {
			switch st.Level {
			case identity.LevelProven:
				hit.Proven++
			case identity.LevelClaimed:
				hit.Claimed++
			}
		}
		hits = append(hits, hit)
		return nil
	}
	owner := func(f identity.Factor, via string) (identity.Handle, error) {
		hd, err := h.deps.Identities.WhoProves(ctx, f)
		if identity.CodeOf(err) != "" {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return hd, add(hd, via)
	}
	switch {
	case isSSHFingerprint(q):
		hd, err := owner(identity.Factor{Kind: identity.KindSSH, Value: q}, "SSH key")
		if err != nil || hd == "" {
			return nil, "", err
		}
		return hits, "/u/" + string(hd), nil
	case isPGPFingerprint(q):
		f, _ := identity.ParsePGPFingerprint(strings.TrimPrefix(strings.TrimPrefix(q, "0x"), "0X"))
		if _, err := owner(f, "OpenPGP key"); err != nil {
			return nil, "", err
		}
		fp, _ := hex.DecodeString(f.Value)
		k, err := h.findKey(ctx, fp, true)
		if err != nil {
			return nil, "", err
		}
		if k != nil {
			return hits, "/keys/" + f.Value, nil
		}
		if len(hits) == 1 {
			return hits, "/u/" + hits[0].Handle, nil
		}
		return hits, "", nil
	}
	name := identity.FoldHandle(strings.TrimPrefix(q, "@"))
	hd, err := identity.ParseHandle(name)
	if err != nil {
		return nil, "", nil
	}
	if err := add(hd, "handle"); err != nil || len(hits) == 0 {
		return nil, "", err
	}
	return hits, "/u/" + string(hd), nil
}

// isPGPFingerprint reports whether q is a v4 or v6 fingerprint, with or
// without 0x and spaces.
func isPGPFingerprint(q string) bool {
	c := strings.ReplaceAll(q, " ", "")
	c = strings.TrimPrefix(strings.TrimPrefix(c, "0x"), "0X")
	_, err := identity.ParsePGPFingerprint(c)
	return err == nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
