// wire.go: the load generator's HTTP/1.1 client. Each simulated client
// owns one keep-alive connection, writes a request as one prepared byte
// string and reads the answer with the least parsing HTTP/1.1 allows: the
// status code, Content-Length or chunked framing, and Connection: close.
//
// net/http's client costs about 70 µs of CPU per request on this 2-core
// machine, a quarter of all the CPU of a cold lookup against Kith: CPU
// the servers under test had to share with their load. SKS answers on one
// thread and was never short of a core, so the client's share lowered
// Kith's figures only. A real server's clients run elsewhere; this one
// costs a few microseconds.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// wireRequest is one request written out in full.
type wireRequest []byte

// newWireRequest writes the request line, headers and body of a GET of
// raw (no body) or a form POST of body.
func newWireRequest(raw string, body []byte) (host string, req wireRequest, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, err
	}
	var b bytes.Buffer
	method := "GET"
	if body != nil {
		method = "POST"
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hkpbench\r\n", method, u.RequestURI(), u.Host)
	if body != nil {
		fmt.Fprintf(&b, "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return u.Host, b.Bytes(), nil
}

// wireConn is one client's keep-alive connection; it redials after an
// error or a Connection: close.
type wireConn struct {
	host    string
	timeout time.Duration
	conn    net.Conn
	r       *bufio.Reader
}

// do sends req and reads its answer, returning the status code and the
// body's length (the body itself is discarded).
func (c *wireConn) do(req wireRequest) (status int, n int64, err error) {
	for attempt := 0; ; attempt++ {
		fresh := c.conn == nil
		if fresh {
			if c.conn, err = net.DialTimeout("tcp", c.host, c.timeout); err != nil {
				return 0, 0, err
			}
			c.r = bufio.NewReaderSize(c.conn, 32<<10)
		}
		c.conn.SetDeadline(time.Now().Add(c.timeout))
		status, n, err = c.exchange(req)
		if err == nil {
			return status, n, nil
		}
		c.close()
		// A kept-alive connection the server closed meanwhile fails
		// before any answer: retry once on a fresh one.
		if fresh || attempt > 0 || !errors.Is(err, errNoAnswer) {
			return 0, 0, err
		}
	}
}

func (c *wireConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.r = nil, nil
	}
}

// errNoAnswer: the connection ended before the first byte of an answer.
var errNoAnswer = errors.New("connection closed before an answer")

// exchange writes req and reads one answer.
func (c *wireConn) exchange(req wireRequest) (int, int64, error) {
	if _, err := c.conn.Write(req); err != nil {
		return 0, 0, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if len(line) == 0 {
			// Closed or reset before a byte of the answer: SKS closes a
			// kept-alive connection after a while without saying so.
			return 0, 0, fmt.Errorf("%w: %v", errNoAnswer, err)
		}
		return 0, 0, fmt.Errorf("status line: %w", err)
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, 0, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, closing := int64(-1), false, false
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, 0, fmt.Errorf("headers: %w", err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, 0, fmt.Errorf("bad header %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return 0, 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	var n int64
	switch {
	case chunked:
		n, err = c.discardChunks()
	case length >= 0:
		var d int
		d, err = c.r.Discard(int(length))
		n = int64(d)
	default:
		// Neither: the body runs to the end of the connection.
		n, err = io.Copy(io.Discard, c.r)
		closing = true
	}
	if err != nil {
		return 0, 0, fmt.Errorf("body: %w", err)
	}
	if closing {
		c.close()
	}
	return status, n, nil
}

// discardChunks reads a chunked body and its trailer.
func (c *wireConn) discardChunks() (int64, error) {
	var n int64
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return n, err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		k, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || k < 0 {
			return n, fmt.Errorf("bad chunk size %q", line)
		}
		if k == 0 {
			// Trailer fields, then the empty line.
			for {
				t, err := c.r.ReadSlice('\n')
				if err != nil {
					return n, err
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return n, nil
				}
			}
		}
		d, err := c.r.Discard(int(k))
		n += int64(d)
		if err != nil {
			return n, err
		}
		if _, err := c.r.Discard(2); err != nil { // CRLF after the data
			return n, err
		}
	}
}
