// index.go: op=index and op=vindex answers: the machine-readable format
// (options=mr) that gpg and other HKP clients parse, and the choice
// between it and the HTML page (html.go).

package hkp

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

// indexAnswer renders an index or vindex of keys; more says the result was
// cut at MaxResults.
func (h *Handler) indexAnswer(l *lookup, keys []keys.Stored, more bool) *answer {
	now := h.opts.Now()
	a := &answer{
		status: http.StatusOK,
		header: [][2]string{
			{"Cache-Control", "max-age=300"},
			{"X-Hkp-Results-Count", strconv.Itoa(len(keys))},
		},
		cacheable: true,
	}
	if more {
		a.header = append(a.header, [2]string{"X-Hkp-Results-Truncated", "true"})
	}
	if l.mr {
		a.contentType = "text/plain; charset=utf-8"
		a.body = machineIndex(keys, now)
		return a
	}
	a.contentType = "text/html; charset=utf-8"
	a.body = h.htmlIndex(l, keys, more, now)
	return a
}

// machineIndex renders the options=mr index:
//
//	info:1:N
//	pub:FINGERPRINT:ALGORITHM:BITS:CREATED:EXPIRES:FLAGS
//	uid:ESCAPED USER ID:CREATED:EXPIRES:FLAGS
//
// with times in seconds since 1970 (empty when unknown or never), and
// FLAGS made of r (revoked), d (disabled) and e (expired). Kith never
// disables keys, so d does not occur.
func machineIndex(keys []keys.Stored, now time.Time) []byte {
	var b bytes.Buffer
	b.WriteString("info:1:")
	b.WriteString(strconv.Itoa(len(keys)))
	b.WriteByte('\n')
	for i := range keys {
		k := &keys[i]
		b.WriteString("pub:")
		b.WriteString(strings.ToUpper(hex.EncodeToString(k.Fingerprint)))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(k.Algorithm))
		b.WriteByte(':')
		if k.Bits > 0 {
			b.WriteString(strconv.Itoa(k.Bits))
		}
		b.WriteByte(':')
		writeTime(&b, k.Created)
		b.WriteByte(':')
		writeTime(&b, k.Expires)
		b.WriteByte(':')
		b.WriteString(flags(k.Revoked, k.Expires, now))
		b.WriteByte('\n')
		for _, u := range k.UserIDs {
			b.WriteString("uid:")
			b.WriteString(escapeField(u.Text))
			b.WriteByte(':')
			writeTime(&b, u.Created)
			b.WriteByte(':')
			writeTime(&b, u.Expires)
			b.WriteByte(':')
			b.WriteString(flags(u.Revoked, u.Expires, now))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func writeTime(b *bytes.Buffer, t time.Time) {
	if !t.IsZero() {
		b.WriteString(strconv.FormatInt(t.Unix(), 10))
	}
}

// flags returns the index flags: r when revoked, e when expired.
func flags(revoked bool, expires, now time.Time) string {
	var f string
	if revoked {
		f += "r"
	}
	if !expires.IsZero() && !expires.After(now) {
		f += "e"
	}
	return f
}

// escapeField percent-escapes s for an index field: '%', ':' and every
// byte below 0x20 or from 0x7f on become %XX (upper-case hex); clients
// decode the bytes back (user IDs are UTF-8).
func escapeField(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', digits[c>>4], digits[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsEscape(c byte) bool { return c < 0x20 || c >= 0x7f || c == ':' || c == '%' }
