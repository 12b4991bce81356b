// command.go: shell commands shown on pages.

package web

import (
	"context"
	"html"
	"io"
	"strings"

	"github.com/a-h/templ"
)

// command shows a shell command as code whose lines break only between
// its words, so that an option such as --send-keys never splits at a
// hyphen. after (punctuation) follows the code with no space between.
func command(id, cmd, after string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b strings.Builder
		b.WriteString(`<code class="cmd"`)
		if id != "" {
			b.WriteString(` id="` + html.EscapeString(id) + `"`)
		}
		b.WriteString(">")
		for i, word := range strings.Fields(cmd) {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(`<span class="nobr">` + html.EscapeString(word) + `</span>`)
		}
		b.WriteString("</code>" + html.EscapeString(after))
		_, err := io.WriteString(w, b.String())
		return err
	})
}
