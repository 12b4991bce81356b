package recon

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// pairResult holds both sides of one in-process session.
type pairResult struct {
	drive, answer       Result
	driveErr, answerErr error
}

// runPair runs one session over loopback TCP: the driver accepts, the
// answerer dials.
func runPair(t testing.TB, driver, answerer *Tree, dcfg, acfg SessionConfig) pairResult {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	var pr pairResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			pr.driveErr = err
			return
		}
		pr.drive, pr.driveErr = Drive(ctx, c, driver, dcfg)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	pr.answer, pr.answerErr = Answer(ctx, c, answerer, acfg)
	<-done
	return pr
}

func sortedDigests(ds [][16]byte) [][16]byte {
	ds = slices.Clone(ds)
	slices.SortFunc(ds, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return ds
}

func sameDigests(a, b [][16]byte) bool {
	return slices.Equal(sortedDigests(a), sortedDigests(b))
}

// splitSets makes a common part and one part only each side holds.
func splitSets(seed uint64, common, onlyDriver, onlyAnswerer int) (driver, answerer, dOnly, aOnly [][16]byte) {
	all := randDigests(rand.New(rand.NewPCG(seed, seed)), common+onlyDriver+onlyAnswerer)
	c := all[:common]
	dOnly = all[common : common+onlyDriver]
	aOnly = all[common+onlyDriver:]
	driver = append(slices.Clone(c), dOnly...)
	answerer = append(slices.Clone(c), aOnly...)
	return
}

func TestReconConverges(t *testing.T) {
	tests := []struct {
		name                         string
		common, onlyDriver, onlyAnsw int
	}{
		{"both empty", 0, 0, 0},
		{"driver empty", 0, 0, 7},
		{"answerer empty", 0, 7, 0},
		{"driver empty, answerer big", 0, 0, 500},
		{"answerer empty, driver big", 0, 500, 0},
		{"identical", 3000, 0, 0},
		{"tiny", 3, 2, 2},
		{"one each way in a leaf", 20, 1, 1},
		{"all different", 0, 300, 200},
		{"few differences in a big tree", 20000, 3, 4},
		{"many differences", 5000, 400, 600},
	}
	if !testing.Short() {
		tests = append(tests, struct {
			name                         string
			common, onlyDriver, onlyAnsw int
		}{"50k with 500 each way", 49500, 500, 500})
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, a, dOnly, aOnly := splitSets(uint64(100+i), tt.common, tt.onlyDriver, tt.onlyAnsw)
			dt, at := BuildTree(d), BuildTree(a)
			pr := runPair(t, dt, at, SessionConfig{}, SessionConfig{})
			if pr.driveErr != nil || pr.answerErr != nil {
				t.Fatalf("driver: %v; answerer: %v", pr.driveErr, pr.answerErr)
			}
			if !sameDigests(pr.drive.Missing, aOnly) {
				t.Errorf("driver missing %d, want %d", len(pr.drive.Missing), len(aOnly))
			}
			if !sameDigests(pr.answer.Missing, dOnly) {
				t.Errorf("answerer missing %d, want %d", len(pr.answer.Missing), len(dOnly))
			}
			// What each side told the other it lacks is really lacked.
			for _, c := range []struct {
				told, only [][16]byte
			}{{pr.answer.PeerMissing, aOnly}, {pr.drive.PeerMissing, dOnly}} {
				if len(diff(c.told, c.only)) != 0 {
					t.Error("a side told the other it lacks an element it holds")
				}
			}
			if dt.Len() != len(d) || at.Len() != len(a) {
				t.Error("a session changed a tree")
			}
			t.Logf("%d requests, driver read %d wrote %d bytes", pr.drive.Requests, pr.drive.BytesRead, pr.drive.BytesWritten)
		})
	}
}

func TestHandshakeFilters(t *testing.T) {
	tests := []struct {
		name            string
		driver, answerr string
		ok              bool
	}{
		{"SKS default on both", "", "", true},
		{"same set in another order", "yminsky.merge,yminsky.dedup", "yminsky.dedup,yminsky.merge", true},
		{"Hockeypuck style exact string", "a,b,c", "a,b,c", true},
		{"dedup only refused", "yminsky.dedup", "yminsky.dedup,yminsky.merge", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dt, at := BuildTree(nil), BuildTree(nil)
			pr := runPair(t, dt, at, SessionConfig{Filters: tt.driver, HTTPPort: 11371}, SessionConfig{Filters: tt.answerr, HTTPPort: 11381})
			if tt.ok {
				if pr.driveErr != nil || pr.answerErr != nil {
					t.Fatalf("driver: %v; answerer: %v", pr.driveErr, pr.answerErr)
				}
				if pr.drive.Remote.HTTPPort != 11381 || pr.answer.Remote.HTTPPort != 11371 || pr.drive.Remote.Version != Version {
					t.Fatalf("remote configs: %+v / %+v", pr.drive.Remote, pr.answer.Remote)
				}
				return
			}
			if pr.driveErr == nil || pr.answerErr == nil {
				t.Fatalf("mismatched filters accepted: %v / %v", pr.driveErr, pr.answerErr)
			}
			if !strings.Contains(pr.driveErr.Error()+pr.answerErr.Error(), "filters do not match") {
				t.Fatalf("errors do not say why: %v / %v", pr.driveErr, pr.answerErr)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	good := Config{Version: "1.1.6", BitQuantum: 2, MBar: 5, Filters: DefaultFilters}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the reason; "" for accepted
	}{
		{"good", func(*Config) {}, ""},
		{"old SKS version still accepted", func(c *Config) { c.Version = "0.1.5" }, ""},
		{"newer version", func(c *Config) { c.Version = "2.0" }, ""},
		{"too old", func(c *Config) { c.Version = "0.1.4" }, "version"},
		{"garbage version", func(c *Config) { c.Version = "x" }, "version"},
		{"bitquantum", func(c *Config) { c.BitQuantum = 4 }, "bitquantum"},
		{"mbar", func(c *Config) { c.MBar = 6 }, "mbar"},
		{"filters", func(c *Config) { c.Filters = "yminsky.dedup" }, "filters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			got := CheckConfig(&c, DefaultFilters)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("CheckConfig = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSessionTimeoutWhenPeerNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stall := make(chan struct{})
	defer close(stall)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			<-stall // read nothing, say nothing, until the test is over
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Answer(context.Background(), c, BuildTree(nil), SessionConfig{ReadTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("Answer = %v, want a deadline error", err)
	}
}

func TestSessionStopsOnContextCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stall := make(chan struct{})
	defer close(stall)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			<-stall // say nothing until the test is over
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = Answer(ctx, c, BuildTree(nil), SessionConfig{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Answer = %v, want context.DeadlineExceeded", err)
	}
}
