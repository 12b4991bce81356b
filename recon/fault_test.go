package recon

import (
	"bufio"
	"context"
	"encoding/binary"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeHandshake plays a well-behaved peer's side of the Config exchange.
func fakeHandshake(c net.Conn, r *bufio.Reader) error {
	if err := WriteMessage(c, &Config{Version: Version, HTTPPort: 1, BitQuantum: 2, MBar: 5, Filters: DefaultFilters}); err != nil {
		return err
	}
	if _, err := ReadMessage(r, 0); err != nil {
		return err
	}
	if err := writeString(c, configPassed); err != nil {
		return err
	}
	_, err := readString(r, 100)
	return err
}

func rawFrame(typ byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
	return append(append(b, typ), body...)
}

// drain reads messages until the first Flush (the driver's first batch).
func drainBatch(r *bufio.Reader) {
	for {
		m, err := ReadMessage(r, 0)
		if err != nil || m.Type() == MsgFlush {
			return
		}
	}
}

// TestSessionFaults runs Kith against a scripted misbehaving peer. Each
// fault must end the session with a descriptive error, leave the tree as
// it was, and not stop the next, honest session from succeeding.
func TestSessionFaults(t *testing.T) {
	d, a, _, _ := splitSets(42, 2000, 30, 30)
	outside := [16]byte{0xff, 0xff} // not under prefix "00"
	inside := [16]byte{0x01}        // under "00"
	liarSamples := func() []*big.Int {
		// Samples of the answerer's "00" node with one element added that
		// is not under "00": consistent, interpolable, and a lie.
		at := BuildTree(a)
		v := at.view(PrefixOf(inside, 2), fullBelow)
		e := feFromDigest(&outside)
		out := make([]*big.Int, numSamples)
		for i := range v.samples {
			out[i] = feMul(v.samples[i], feSub(at.points[i], e)).big()
		}
		return out
	}
	tests := []struct {
		name     string
		kithRole string // "drive" (the fake answers) or "answer" (the fake drives)
		// script plays the peer; over is closed when Kith's session has
		// ended, so that a script that holds the connection open (to be
		// sure Kith fails on the fault, not on the close) knows when to
		// let go.
		script func(c net.Conn, r *bufio.Reader, over <-chan struct{})
		want   string
		// timeout is Kith's read timeout; zero means a generous one, so
		// that only the case that tests the timeout depends on it.
		timeout time.Duration
	}{
		{"answerer closes mid-recon", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
		}, "peer closed the connection", 0},
		{"truncated message", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
			c.Write(rawFrame(byte(MsgElements), []byte{0, 0, 0, 5, 1, 2, 3})) // set of 5, 3 bytes
		}, "truncated", 0},
		{"frame cut short", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
			c.Write(rawFrame(byte(MsgElements), make([]byte, 100))[:20])
		}, "reading 101-byte message (got 16)", 0},
		{"oversized message", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
			c.Write([]byte{0x40, 0, 0, 0, byte(MsgElements)})
			<-over
		}, "exceeds the limit", 0},
		{"unknown message type", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
			c.Write(rawFrame(42, nil))
			<-over
		}, "unknown message type 42", 0},
		{"answerer claims elements outside the prefix", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
			// The first request is the root; answer it with SyncFail, then
			// answer the first child ("00") with an element outside it.
			WriteMessage(c, &SyncFail{})
			drainBatch(r)
			WriteMessage(c, &Elements{Elements: [][16]byte{outside}})
			<-over
		}, "outside it", 0},
		{"driver lies in its samples", "answer", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			at := BuildTree(a)
			v := at.view(PrefixOf(inside, 2), fullBelow)
			WriteMessage(c, &ReconRqstPoly{Prefix: PrefixOf(inside, 2), Size: v.size + 1, Samples: liarSamples()})
			WriteMessage(c, &Flush{})
			<-over
		}, "outside the prefix", 0},
		{"driver sends a sample not below P", "answer", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			body := binary.BigEndian.AppendUint32(nil, 0) // root prefix
			body = binary.BigEndian.AppendUint32(body, 0)
			body = binary.BigEndian.AppendUint32(body, 10)
			body = binary.BigEndian.AppendUint32(body, 1)
			body = append(body, bytesRepeat(0xff, 17)...)
			c.Write(rawFrame(byte(MsgReconRqstPoly), body))
			<-over
		}, "not below P", 0},
		{"driver sends an error", "answer", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			WriteMessage(c, &ErrorMessage{Text: "out of cheese"})
			<-over
		}, "out of cheese", 0},
		{"answerer never answers", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			fakeHandshake(c, r)
			drainBatch(r)
			<-over // stall until Kith gives up
		}, "did not answer in time", 300 * time.Millisecond},
		{"peer sends no Config", "drive", func(c net.Conn, r *bufio.Reader, over <-chan struct{}) {
			WriteMessage(c, &Done{})
			<-over
		}, "expected Config", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kith := BuildTree(d)
			if tt.kithRole == "answer" {
				kith = BuildTree(a)
			}
			before := kith.root.samples
			beforeLen := kith.Len()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cfg := SessionConfig{ReadTimeout: tt.timeout}
			if cfg.ReadTimeout == 0 {
				cfg.ReadTimeout = 30 * time.Second
			}
			errc := make(chan error, 1)
			fakeDone, over := make(chan struct{}), make(chan struct{})
			var c net.Conn
			if tt.kithRole == "drive" {
				go func() {
					kc, err := ln.Accept()
					if err != nil {
						errc <- err
						return
					}
					_, err = Drive(context.Background(), kc, kith, cfg)
					errc <- err
				}()
				c, err = net.Dial("tcp", ln.Addr().String())
			} else {
				go func() {
					kc, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						errc <- err
						return
					}
					_, err = Answer(context.Background(), kc, kith, cfg)
					errc <- err
				}()
				c, err = ln.Accept()
			}
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				defer close(fakeDone)
				defer c.Close()
				tt.script(c, bufio.NewReader(c), over)
			}()
			err = <-errc
			close(over)
			<-fakeDone
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("session error = %v, want one containing %q", err, tt.want)
			}
			t.Logf("error: %v", err)
			if kith.root.samples != before || kith.Len() != beforeLen {
				t.Fatal("the failed session changed the tree")
			}
			// The next, honest session succeeds.
			other := BuildTree(a)
			if tt.kithRole == "answer" {
				other = BuildTree(d)
			}
			var pr pairResult
			if tt.kithRole == "drive" {
				pr = runPair(t, kith, other, SessionConfig{}, SessionConfig{})
			} else {
				pr = runPair(t, other, kith, SessionConfig{}, SessionConfig{})
			}
			if pr.driveErr != nil || pr.answerErr != nil {
				t.Fatalf("next session failed: %v / %v", pr.driveErr, pr.answerErr)
			}
			if len(pr.drive.Missing) != 30 || len(pr.answer.Missing) != 30 {
				t.Fatalf("next session found %d and %d missing, want 30 each", len(pr.drive.Missing), len(pr.answer.Missing))
			}
		})
	}
}

func bytesRepeat(b byte, n int) []byte { return []byte(strings.Repeat(string([]byte{b}), n)) }
