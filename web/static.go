// static.go: the embedded style sheet and the copy buttons' script.

package web

import (
	_ "embed"
	"net/http"
)

//go:embed static/kith.css
var css []byte

//go:embed static/copy.js
var copyJS []byte

// serveCopyJS serves the script that adds copy buttons; the pages work
// without it.
func serveCopyJS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(copyJS)
}

// serveCSS serves the style sheet; it changes only with the binary.
func serveCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(css)
}
