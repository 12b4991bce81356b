// confirm.go: the page a mailed link opens. Opening it (GET) changes
// nothing, since mail scanners fetch links; its button (POST) follows the
// link.

package vks

import (
	"errors"
	"html/template"
	"net/http"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

var confirmPage = template.Must(template.New("confirm").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>{{.Title}}</title></head>
<body><main>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Form}}<form method="post"><button type="submit">Confirm</button></form>{{end}}
</main></body></html>
`))

type page struct {
	Title, Text string
	Form        bool
}

func writePage(w http.ResponseWriter, code int, p page) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
	w.WriteHeader(code)
	confirmPage.Execute(w, p)
}

// serveConfirmPage shows the confirm button.
func (h *Handler) serveConfirmPage(w http.ResponseWriter, r *http.Request) {
	key, err := identity.ParsePGPFingerprint(r.PathValue("fpr"))
	if err != nil {
		writePage(w, http.StatusBadRequest, page{Title: "Not a link from this server", Text: "The link's key fingerprint is malformed."})
		return
	}
	writePage(w, http.StatusOK, page{Title: "Confirm your address",
		Text: "Confirm what the mail asked for, for the OpenPGP key " + pgp.GroupFingerprint(key.Value) + ".", Form: true})
}

// serveConfirm follows the link.
func (h *Handler) serveConfirm(w http.ResponseWriter, r *http.Request) {
	key, err := identity.ParsePGPFingerprint(r.PathValue("fpr"))
	if err != nil {
		writePage(w, http.StatusBadRequest, page{Title: "Not a link from this server", Text: "The link's key fingerprint is malformed."})
		return
	}
	c, err := h.emails.ConfirmEmail(r.Context(), key, r.PathValue("token"))
	if err != nil {
		code := http.StatusBadRequest
		switch identity.CodeOf(err) {
		case "":
			if r.Context().Err() == nil {
				h.log.Error("vks: confirm", "err", err)
			}
			writePage(w, http.StatusInternalServerError, page{Title: "Something went wrong", Text: "Nothing was recorded: try the link again later."})
			return
		case identity.CodeTokenUsed, identity.CodeTokenExpired:
			code = http.StatusGone
		case identity.CodeUnknownToken:
			code = http.StatusNotFound
		}
		var e *identity.Error
		msg := err.Error()
		if errors.As(err, &e) {
			msg = e.Msg
		}
		writePage(w, code, page{Title: "This link does not work", Text: msg})
		return
	}
	h.log.Info("vks: mailed link followed", "action", string(c.Action), "fingerprint", c.Key.Value, "seq", c.Seq)
	text := c.Email.Value + " is now published for the OpenPGP key " + pgp.GroupFingerprint(c.Key.Value) + "."
	if c.Action == identity.EmailWithdraw {
		text = c.Email.Value + " is no longer published for the OpenPGP key " + pgp.GroupFingerprint(c.Key.Value) + "."
	}
	writePage(w, http.StatusOK, page{Title: "Done", Text: text})
}
