// mail.go: the message, its RFC 5322 form, and the outbox sender.

package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Message is one plain-text mail.
type Message struct {
	// To is the recipient's address (a bare address, no name).
	To string
	// Subject is one line.
	Subject string
	// Body is plain text (UTF-8).
	Body string
}

// Sender sends a message. SMTP and Outbox are the two senders.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// ErrBadMessage means a message cannot be sent as given (an address that
// does not parse, a header with a line break).
var ErrBadMessage = errors.New("mail: bad message")

// checkAddress checks that addr is one bare address.
func checkAddress(what, addr string) error {
	a, err := netmail.ParseAddress(addr)
	if err != nil || a.Address != addr || strings.ContainsAny(addr, "\r\n") {
		return fmt.Errorf("%w: %s %q is not an email address", ErrBadMessage, what, addr)
	}
	return nil
}

// compose returns the message in RFC 5322 form, with CRLF line ends.
func compose(from string, m Message, now time.Time) ([]byte, error) {
	if err := checkAddress("from", from); err != nil {
		return nil, err
	}
	if err := checkAddress("to", m.To); err != nil {
		return nil, err
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, fmt.Errorf("%w: the subject has a line break", ErrBadMessage)
	}
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("mail: message id: %w", err)
	}
	domain := from[strings.LastIndexByte(from, '@')+1:]
	var b bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	header("From", from)
	header("To", m.To)
	header("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", "<"+hex.EncodeToString(id)+"@"+domain+">")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	body := strings.ReplaceAll(strings.ReplaceAll(m.Body, "\r\n", "\n"), "\n", "\r\n")
	if plain(body) {
		// Links stay whole and readable in the outbox's files.
		header("Content-Transfer-Encoding", "7bit")
		b.WriteString("\r\n")
		b.WriteString(body)
		return b.Bytes(), nil
	}
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(body)); err != nil {
		return nil, fmt.Errorf("mail: body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return nil, fmt.Errorf("mail: body: %w", err)
	}
	return b.Bytes(), nil
}

// plain reports whether body can go as 7bit: ASCII without NUL or a lone
// CR, in lines of at most 998 bytes (RFC 5322).
func plain(body string) bool {
	for _, line := range strings.Split(body, "\r\n") {
		if len(line) > 998 {
			return false
		}
		for i := 0; i < len(line); i++ {
			if c := line[i]; c == 0 || c == '\r' || c >= 0x80 {
				return false
			}
		}
	}
	return true
}

// Outbox "sends" mails by writing each as an .eml file into Dir, for a
// server with no mail server configured: the operator (or a newcomer
// trying Kith) opens the file and follows its link. Each file's path is
// logged. The files hold live links: Dir is created mode 0700 and the
// files 0600.
type Outbox struct {
	// Dir is the directory the mails go to (DATA_DIR/outbox).
	Dir string
	// From is the sender's address.
	From string
	// Log gets one line per mail written; nil means slog.Default.
	Log *slog.Logger
}

// Send writes m as a new .eml file in the outbox.
func (o *Outbox) Send(ctx context.Context, m Message) error {
	now := time.Now().UTC()
	b, err := compose(o.From, m, now)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	f, err := os.CreateTemp(o.Dir, now.Format("20060102T150405Z")+"-*.eml")
	if err != nil {
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("mail: outbox: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("mail: outbox: %w", err)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	path, _ := filepath.Abs(f.Name())
	log.Info("mail written to the outbox (no SMTP server configured)", "to", m.To, "path", path)
	return nil
}
