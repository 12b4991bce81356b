package mail_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/mail"
	"github.com/kith-keyserver/kith/identity/mail/mailtest"
)

const wait = 30 * time.Second

var msg = mail.Message{To: "alice@example.org", Subject: "Verify your address – Kith", Body: "Follow this link:\nhttps://keys.example.org/vks/v1/confirm/abc?x=1\n"}

func TestSMTPDeliversToARealServer(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	s := &mail.SMTP{Address: srv.Addr, From: "kith@keys.example.org"}
	if err := s.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	got := srv.Wait(t, wait)
	if got.From != "kith@keys.example.org" || len(got.To) != 1 || got.To[0] != msg.To {
		t.Errorf("envelope: from %q to %v", got.From, got.To)
	}
	if got.Subject != msg.Subject {
		t.Errorf("subject %q, want %q", got.Subject, msg.Subject)
	}
	if got.Body != msg.Body {
		t.Errorf("body %q, want %q", got.Body, msg.Body)
	}
	if got.Header.Get("Message-ID") == "" || got.Header.Get("Date") == "" {
		t.Errorf("headers: %v", got.Header)
	}
}

func TestSMTPStartTLSAndAuth(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{TLS: true, Username: "kith", Password: "s3cret"})
	s := &mail.SMTP{Address: srv.Addr, From: "kith@keys.example.org", Username: "kith", Password: "s3cret",
		StartTLS: true, TLSConfig: &tls.Config{RootCAs: srv.RootCAs, ServerName: "127.0.0.1"}}
	if err := s.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	srv.Wait(t, wait)
	s.Password = "wrong"
	err := s.Send(context.Background(), msg)
	if err == nil || !strings.Contains(err.Error(), "authenticate") {
		t.Errorf("wrong password: %v", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error names the password: %v", err)
	}
}

func TestSMTPStartTLSRequiredButNotOffered(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	s := &mail.SMTP{Address: srv.Addr, From: "kith@keys.example.org", StartTLS: true}
	err := s.Send(context.Background(), msg)
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("got %v, want a refusal naming STARTTLS", err)
	}
	if srv.Pending() != 0 {
		t.Error("a mail went out in the clear")
	}
}

func TestSMTPServerDownIsAClearError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &mail.SMTP{Address: addr, From: "kith@keys.example.org"}
	err = s.Send(context.Background(), msg)
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("got %v, want an error naming %s", err, addr)
	}
}

func TestHeaderInjectionIsRefused(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	s := &mail.SMTP{Address: srv.Addr, From: "kith@keys.example.org"}
	for _, m := range []mail.Message{
		{To: "alice@example.org\r\nBcc: mallory@example.org", Subject: "x", Body: "x"},
		{To: "alice@example.org", Subject: "x\r\nBcc: mallory@example.org", Body: "x"},
		{To: "Alice <alice@example.org>", Subject: "x", Body: "x"},
	} {
		if err := s.Send(context.Background(), m); !errors.Is(err, mail.ErrBadMessage) {
			t.Errorf("%q: %v, want ErrBadMessage", m.To+"|"+m.Subject, err)
		}
	}
	if srv.Pending() != 0 {
		t.Error("a bad message was sent")
	}
}

func TestNonASCIIBodyIsQuotedPrintable(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	s := &mail.SMTP{Address: srv.Addr, From: "kith@keys.example.org"}
	m := mail.Message{To: "alice@example.org", Subject: "x", Body: "Grüße\n"}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := srv.Wait(t, wait)
	if got.Body != m.Body || got.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Errorf("body %q, encoding %q", got.Body, got.Header.Get("Content-Transfer-Encoding"))
	}
}

func TestOutboxWritesEMLFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "outbox")
	o := &mail.Outbox{Dir: dir, From: "kith@localhost.localdomain"}
	if err := o.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v, %v", files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "To: alice@example.org\r\n") || !strings.Contains(string(b), "vks/v1/confirm/abc") {
		t.Errorf("file:\n%s", b)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", fi.Mode().Perm())
	}
}
