// smtp.go: sending over SMTP with net/smtp, with STARTTLS and
// authentication, bounded by the context.

package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"time"
)

// SMTP sends mails through one SMTP server (a relay or submission port).
type SMTP struct {
	// Address is the server's host:port.
	Address string
	// From is the sender's address, the envelope's and the header's.
	From string
	// Username and Password authenticate (PLAIN, only over TLS or to
	// loopback, as net/smtp allows); an empty Username sends without.
	Username string
	Password string
	// StartTLS requires the server to upgrade to TLS before anything is
	// sent; a server that offers no STARTTLS is then an error.
	StartTLS bool
	// TLSConfig is used for STARTTLS; nil means the system roots and the
	// address's host as server name.
	TLSConfig *tls.Config
	// Timeout bounds one mail when the context has no deadline; zero
	// means 30 seconds.
	Timeout time.Duration
}

// Send sends m, returning an error that says which step failed (the
// server unreachable, STARTTLS refused, the recipient refused...).
func (s *SMTP) Send(ctx context.Context, m Message) error {
	msg, err := compose(s.From, m, time.Now().UTC())
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		timeout := s.Timeout
		if timeout == 0 {
			timeout = 30 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	host, _, err := net.SplitHostPort(s.Address)
	if err != nil {
		return fmt.Errorf("mail: smtp address %q: %w", s.Address, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Address)
	if err != nil {
		return fmt.Errorf("mail: smtp %s: %w", s.Address, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// Closing the connection when the context ends unblocks any step.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	err = s.converse(conn, host, m.To, msg)
	if err != nil && ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return err
}

func (s *SMTP) converse(conn net.Conn, host, to string, msg []byte) error {
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("mail: smtp %s: greeting: %w", s.Address, err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("mail: smtp %s: hello: %w", s.Address, err)
	}
	if s.StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("mail: smtp %s: the server offers no STARTTLS (set starttls = false for a server on a trusted path)", s.Address)
		}
		cfg := s.TLSConfig
		if cfg == nil {
			cfg = &tls.Config{ServerName: host}
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("mail: smtp %s: starttls: %w", s.Address, err)
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return fmt.Errorf("mail: smtp %s: authenticate as %s: %w", s.Address, s.Username, err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return fmt.Errorf("mail: smtp %s: sender %s: %w", s.Address, s.From, err)
	}
	if err := c.Rcpt(to); err != nil {
		// The recipient stays out of the error: it is logged.
		return fmt.Errorf("mail: smtp %s: recipient refused: %w", s.Address, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("mail: smtp %s: data: %w", s.Address, err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("mail: smtp %s: data: %w", s.Address, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("mail: smtp %s: the server refused the message: %w", s.Address, err)
	}
	return c.Quit()
}
