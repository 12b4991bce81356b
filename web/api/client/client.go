// client.go: the Client, its requests, and the server's refusals.

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/web/api"
)

// Limits on what the client reads of an answer.
const (
	// maxDocBody bounds an identity document, a log record or a log page,
	// which carry their signers' whole OpenPGP keys.
	maxDocBody = 8 << 20
	// maxTextBody bounds an authorized_keys or known_hosts answer: a few
	// hundred keys at most.
	maxTextBody = 1 << 20
	// maxSmallBody bounds a checkpoint, a key or a CA key.
	maxSmallBody = 64 << 10
)

// MaxTextBody is the largest authorized_keys or known_hosts answer the
// client reads; a larger one is an error.
const MaxTextBody = maxTextBody

// DefaultTimeout is how long one request may take unless Options say.
const DefaultTimeout = 30 * time.Second

// Options configure a Client.
type Options struct {
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
	// UserAgent names the client in requests; empty sends Go's default.
	UserAgent string
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// Client talks to one Kith server. Make one with New; it is safe for
// concurrent use.
type Client struct {
	server  string // without a trailing slash
	timeout time.Duration
	agent   string
	http    *http.Client
}

// ErrBadServer marks a server URL that is not http or https.
var ErrBadServer = errors.New("not an http or https URL")

// New returns a client of the server at the http or https URL server.
func New(server string, opts Options) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is %w", server, ErrBadServer)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Client{
		server:  strings.TrimRight(server, "/"),
		timeout: opts.Timeout,
		agent:   opts.UserAgent,
		http:    &http.Client{Transport: opts.Transport, CheckRedirect: checkRedirect},
	}, nil
}

// checkRedirect follows redirects, but not from https to plain http,
// where the answer could be swapped on the way.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect from https to %s", req.URL.Redacted())
	}
	return nil
}

// Server is the server's URL, without a trailing slash.
func (c *Client) Server() string { return c.server }

// PlainHTTP reports whether the client speaks plain http to another
// machine, where anyone on the path can swap the answers: not https, and
// not localhost or a loopback address.
func (c *Client) PlainHTTP() bool {
	u, _ := url.Parse(c.server)
	if u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// do sends a request within the client's timeout and returns the status
// and at most limit bytes of the answer (more is an error).
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte, limit int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, r)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer: %w", err)
	}
	if int64(len(b)) > limit {
		return 0, nil, fmt.Errorf("answer larger than %d bytes", limit)
	}
	return resp.StatusCode, b, nil
}

// get fetches path and returns a 200 answer of at most limit bytes; any
// other status is an error.
func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	status, b, err := c.do(ctx, http.MethodGet, path, "", nil, limit)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", path, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %d %s: %s", path, status, http.StatusText(status), clip(strings.TrimSpace(string(b))))
	}
	return b, nil
}

// call sends a JSON request (nil in: a GET) about handle and decodes the
// answer into out; a refusal comes back as a *Refusal.
func (c *Client) call(ctx context.Context, op, method, path, handle string, in, out any) error {
	var body []byte
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body, ct = b, "application/json"
	}
	status, raw, err := c.do(ctx, method, path, ct, body, maxDocBody)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if status >= 300 {
		var e api.ErrorBody
		if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
			e.Error.Code, e.Error.Message = "http", strings.TrimSpace(string(raw))
			if status == http.StatusNotFound && handle != "" {
				e.Error.Code = string(identity.CodeUnknownIdentity)
			}
		}
		return &Refusal{Op: op, Status: status, Code: identity.Code(e.Error.Code), Message: e.Error.Message, Hint: Hint(identity.Code(e.Error.Code), handle)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: the server's answer is not the expected JSON: %w", op, err)
		}
	}
	return nil
}

// Refusal is the server's answer to a request it refused: its status and
// the API's error code and message, with a hint of what to do.
type Refusal struct {
	// Op says what was asked, e.g. "claim alice".
	Op string
	// Status is the HTTP status, Code the API's error code (or "http"
	// when the answer carried none) and Message the server's words.
	Status  int
	Code    identity.Code
	Message string
	// Hint says what a person can do about it; may be empty.
	Hint string
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("%s: the server refused (%d %s): %s", r.Op, r.Status, r.Code, r.Message)
	if r.Hint != "" {
		s += "\n  what to do: " + r.Hint
	}
	return s
}

// clip shortens a text for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
