// html.go: the HTML answers of op=index and op=vindex, for people with a
// browser: a plain, escaped page per search (the web package owns the real
// pages), in the site's frame (siteFrame, which op=stats wears too).
// vindex also lists each key's subkeys and signatures, read from its
// packets.

package hkp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// siteFrame holds the parts every HTML answer of hkp shares with the
// pages (served beside HKP by kith serve, from the web package, which hkp
// does not import): the head with the pages' stylesheet, the site header
// and the footer, so that a browser that lands here sees the same site.
const siteFrame = `{{define "head"}}<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/kith.css">{{end}}
{{define "header"}}<header class="site"><a class="brand" href="/">Kith</a>
<nav aria-label="Main"><ul><li><a href="/search">Search</a></li><li><a href="/upload">Upload</a></li><li><a href="/stats">Statistics</a></li><li><a href="/login">Log in</a></li></ul></nav></header>{{end}}
{{define "footer"}}<footer class="site">Kith identity keyserver · <a href="/pks/lookup?op=stats">HKP statistics</a></footer>{{end}}`

// sitePage parses body, an HTML page using the siteFrame's templates.
func sitePage(name, body string) *template.Template {
	return template.Must(template.Must(template.New(name).Parse(siteFrame)).Parse(body))
}

// indexTemplate is the HTML op=index/vindex answer, in the site's frame;
// the listing stays the preformatted one HKP clients and people expect.
var indexTemplate = sitePage("index", `<!DOCTYPE html>
<html lang="en">
<head>
{{template "head"}}
<title>Search results for {{.Search}} · Kith</title>
</head>
<body>
{{template "header"}}
<main id="main">
<h1>Search results for “{{.Search}}”</h1>
{{if .Truncated}}<p class="note">More than {{.Count}} keys match: only the first {{.Count}} are shown. Use a more specific search (an email address, a key ID or a fingerprint).</p>
{{end}}<p>{{.Count}} {{if eq .Count 1}}key{{else}}keys{{end}} shown.</p>
{{range .Keys}}<hr>
<pre>
<strong>pub</strong>  {{.Algorithm}}/<a href="{{.GetURL}}">{{.KeyID}}</a> {{.Created}}{{if .Expires}} expires {{.Expires}}{{end}}{{if .Flags}} [{{.Flags}}]{{end}}
{{if $.ShowFingerprint}}     Fingerprint={{.Fingerprint}}
{{end}}{{range .Sigs}}     sig  {{.}}
{{end}}{{range .UserIDs}}<strong>uid</strong>  {{.Text}}{{if .Flags}} [{{.Flags}}]{{end}}
{{range .Sigs}}     sig  {{.}}
{{end}}{{end}}{{range .Subkeys}}<strong>sub</strong>  {{.Algorithm}}/{{.KeyID}} {{.Created}}{{if .Expires}} expires {{.Expires}}{{end}}{{if .Usage}} [{{.Usage}}]{{end}}{{if .Flags}} [{{.Flags}}]{{end}}
{{if $.ShowFingerprint}}     Fingerprint={{.Fingerprint}}
{{end}}{{range .Sigs}}     sig  {{.}}
{{end}}{{end}}</pre>
{{end}}</main>
{{template "footer"}}
</body>
</html>
`)

type htmlIndexPage struct {
	Search          string
	Count           int
	Truncated       bool
	ShowFingerprint bool
	Keys            []htmlKey
}

type htmlKey struct {
	Algorithm, KeyID, Fingerprint, Created, Expires, Flags string
	GetURL                                                 string
	Sigs                                                   []string
	UserIDs                                                []htmlUserID
	Subkeys                                                []htmlSubkey
}

type htmlUserID struct {
	Text, Flags string
	Sigs        []string
}

type htmlSubkey struct {
	Algorithm, KeyID, Fingerprint, Created, Expires, Usage, Flags string
	Sigs                                                          []string
}

// htmlIndex renders the HTML index (vindex: with subkeys and signatures).
func (h *Handler) htmlIndex(l *lookup, keys []keys.Stored, more bool, now time.Time) []byte {
	page := htmlIndexPage{
		Search:          l.search,
		Count:           len(keys),
		Truncated:       more,
		ShowFingerprint: l.fingerprint || l.op == "vindex",
	}
	for i := range keys {
		k := &keys[i]
		fpr := strings.ToUpper(hex.EncodeToString(k.Fingerprint))
		hk := htmlKey{
			Algorithm:   pgp.GPGAlgorithmName(k.Algorithm, k.Bits, k.Curve),
			KeyID:       fmt.Sprintf("%016X", k.KeyID),
			Fingerprint: pgp.GroupFingerprint(fpr),
			Created:     day(k.Created),
			Expires:     day(k.Expires),
			Flags:       flagWords(k.Revoked, k.Expires, now),
			GetURL:      "/pks/lookup?op=get&search=0x" + url.QueryEscape(fpr),
		}
		for _, u := range k.UserIDs {
			hk.UserIDs = append(hk.UserIDs, htmlUserID{Text: u.Text, Flags: flagWords(u.Revoked, u.Expires, now)})
		}
		if l.op == "vindex" {
			h.verbose(&hk, k, now)
		}
		page.Keys = append(page.Keys, hk)
	}
	var b bytes.Buffer
	if err := indexTemplate.Execute(&b, page); err != nil {
		// The template and its data are ours: a failure is a bug.
		panic(fmt.Errorf("hkp: index template: %w", err))
	}
	return b.Bytes()
}

// verbose adds the subkeys and the signatures of k's packets.
func (h *Handler) verbose(hk *htmlKey, k *keys.Stored, now time.Time) {
	key, err := pgp.ParseKey(k.Packets)
	if err != nil {
		h.log.Warn("hkp: vindex: stored key does not parse", "fingerprint", hk.Fingerprint, "err", err)
		return
	}
	d := key.Describe()
	subs := map[string]pgp.Subkey{}
	for _, s := range d.Subkeys {
		subs[string(s.Packet().Body)] = s
	}
	// Signatures follow the packet they belong to.
	var sigs *[]string = &hk.Sigs
	uid := 0
	for _, p := range key.Packets() {
		switch p.Tag {
		case pgp.TagUserID:
			if uid < len(hk.UserIDs) && hk.UserIDs[uid].Text == string(p.Body) {
				sigs = &hk.UserIDs[uid].Sigs
			} else {
				// Names in the index come from the store; find the one.
				sigs = nil
				for j := range hk.UserIDs {
					if hk.UserIDs[j].Text == string(p.Body) {
						sigs = &hk.UserIDs[j].Sigs
					}
				}
			}
			uid++
		case pgp.TagUserAttribute:
			hk.UserIDs = append(hk.UserIDs, htmlUserID{Text: "[user attribute (photo ID)]"})
			sigs = &hk.UserIDs[len(hk.UserIDs)-1].Sigs
		case pgp.TagPublicSubkey:
			s, ok := subs[string(p.Body)]
			hs := htmlSubkey{Algorithm: "unknown", KeyID: "?"}
			if ok {
				hs = htmlSubkey{
					Algorithm:   pgp.GPGAlgorithmName(int(s.Algorithm), s.Bits, s.Curve),
					KeyID:       fmt.Sprintf("%016X", s.KeyID),
					Fingerprint: pgp.GroupFingerprint(strings.ToUpper(hex.EncodeToString(s.Fingerprint))),
					Created:     day(s.Created),
					Expires:     day(s.Expires),
					Usage:       s.Capabilities.String(),
					Flags:       flagWords(s.Revoked, s.Expires, now),
				}
			}
			hk.Subkeys = append(hk.Subkeys, hs)
			sigs = &hk.Subkeys[len(hk.Subkeys)-1].Sigs
		case pgp.TagSignature:
			if sigs != nil {
				*sigs = append(*sigs, describeSignature(p.Body, d.KeyID))
			}
		}
	}
}

// describeSignature summarises a signature packet body: type, issuer key
// ID (or "self") and creation day.
func describeSignature(body []byte, self uint64) string {
	s, err := pgp.ReadSignature(body)
	if err != nil {
		return "(unreadable signature)"
	}
	issuer := "unknown issuer"
	switch {
	case s.Issuer != 0 && s.Issuer == self:
		issuer = "self"
	case s.Issuer != 0:
		issuer = fmt.Sprintf("%016X", s.Issuer)
	}
	return fmt.Sprintf("%-13s %-16s %s", sigTypeName(s.Type), issuer, day(s.Created))
}

// sigTypeName names a signature type in a vindex listing.
func sigTypeName(t byte) string {
	switch t {
	case 0x10:
		return "sig"
	case 0x11:
		return "sig1"
	case 0x12:
		return "sig2"
	case 0x13:
		return "sig3"
	case 0x18:
		return "sbind"
	case 0x19:
		return "backsig"
	case 0x1f:
		return "direct"
	case 0x20:
		return "revok"
	case 0x28:
		return "subrevok"
	case 0x30:
		return "certrevok"
	}
	return fmt.Sprintf("type 0x%02x", t)
}

func day(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02")
}

func flagWords(revoked bool, expires, now time.Time) string {
	var w []string
	if revoked {
		w = append(w, "revoked")
	}
	if !expires.IsZero() && !expires.After(now) {
		w = append(w, "expired")
	}
	return strings.Join(w, ", ")
}
