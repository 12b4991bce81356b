// run.go: hkpbench run: N keep-alive clients request URLs from a list in
// turn for a bounded time and count, then print throughput and latency.

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on one run, whatever the flags say.
const (
	maxDuration = 10 * time.Minute
	maxRequests = 20_000_000
	maxClients  = 1024
)

// runConfig is what one load run does.
type runConfig struct {
	urls []string
	// bodies, when set, makes every request a POST of one form body
	// (application/x-www-form-urlencoded) to urls[0], each body once in
	// turn, as a stream of uploads.
	bodies   [][]byte
	clients  int
	duration time.Duration
	requests int // 0: bounded by duration only
	warmup   time.Duration
	// once requests each URL (or body) at most once, in order, across all
	// clients: the run ends when the list is used up, so that nothing a
	// server may have cached is asked again (cold figures).
	once bool
	// stop, when closed, ends the run before its duration.
	stop <-chan struct{}
}

// stopped reports whether the run's stop channel is closed.
func (c runConfig) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// items is how many distinct requests the run has.
func (c runConfig) items() int {
	if len(c.bodies) > 0 {
		return len(c.bodies)
	}
	return len(c.urls)
}

func runCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cfg runConfig
	var urlFiles, urlArgs stringList
	fs.Var(&urlFiles, "urls", "file of URLs, one a line (repeatable)")
	fs.Var(&urlArgs, "url", "a URL to request (repeatable)")
	fs.IntVar(&cfg.clients, "c", 32, "concurrent clients (keep-alive connections)")
	fs.DurationVar(&cfg.duration, "d", 10*time.Second, "how long to measure (at most 10m)")
	fs.IntVar(&cfg.requests, "n", 0, "stop after this many measured requests (0: only -d bounds the run)")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "requests before measuring (fills caches, opens connections)")
	fs.BoolVar(&cfg.once, "once", false, "request each URL at most once, in order, across all clients (cold figures); implies -warmup 0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.urls = append(cfg.urls, urlArgs...)
	for _, f := range urlFiles {
		us, err := readURLs(f)
		if err != nil {
			return err
		}
		cfg.urls = append(cfg.urls, us...)
	}
	if len(cfg.urls) == 0 {
		return errors.New("run: no URLs: give -url or -urls")
	}
	for _, u := range cfg.urls {
		if err := checkLoopbackURL(u); err != nil {
			return err
		}
	}
	if cfg.clients < 1 || cfg.clients > maxClients {
		return fmt.Errorf("run: -c must be 1..%d", maxClients)
	}
	if cfg.duration <= 0 || cfg.duration > maxDuration {
		return fmt.Errorf("run: -d must be above 0 and at most %v", maxDuration)
	}
	if cfg.requests < 0 || cfg.requests > maxRequests {
		return fmt.Errorf("run: -n must be 0..%d", maxRequests)
	}
	if cfg.warmup < 0 || cfg.warmup > time.Minute {
		return errors.New("run: -warmup must be 0..1m")
	}
	if cfg.once {
		cfg.warmup = 0
	}
	res := load(ctx, cfg)
	res.print(stdout, cfg)
	return nil
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func readURLs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("run: %s: %w", path, err)
	}
	return out, nil
}

// checkLoopbackURL refuses anything but http to a loopback address: the
// tool must not load anyone else's server.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("run: URL %q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("run: URL %q: only http:// to a loopback address is allowed", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("run: URL %q: host %q is not a loopback address; hkpbench loads only loopback servers", raw, host)
	}
	return nil
}

// result is what a run measured.
type result struct {
	elapsed   time.Duration
	latencies []time.Duration
	codes     map[int]int
	errors    int
	firstErr  error
	bytes     int64
}

// worker state, merged at the end.
type workerResult struct {
	latencies []time.Duration
	codes     map[int]int
	errors    int
	firstErr  error
	bytes     int64
}

func load(ctx context.Context, cfg runConfig) result {
	// Every request is written out before the clocks start.
	reqs := make([]wireRequest, cfg.items())
	var host string
	for i := range reqs {
		var h string
		var err error
		if len(cfg.bodies) > 0 {
			h, reqs[i], err = newWireRequest(cfg.urls[0], cfg.bodies[i])
		} else {
			h, reqs[i], err = newWireRequest(cfg.urls[i], nil)
		}
		if err == nil && host != "" && h != host {
			err = fmt.Errorf("%s and %s: one run loads one server", host, h)
		}
		if err != nil {
			return result{codes: map[int]int{}, errors: 1, firstErr: err}
		}
		host = h
	}
	conns := make([]*wireConn, cfg.clients)
	for i := range conns {
		conns[i] = &wireConn{host: host, timeout: 30 * time.Second}
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()

	// one makes request i of the list on client w's connection.
	one := func(w, i int, wr *workerResult, measure bool) {
		start := time.Now()
		status, n, err := conns[w].do(reqs[i])
		if !measure {
			return
		}
		if err != nil {
			wr.errors++
			if wr.firstErr == nil {
				wr.firstErr = err
			}
			return
		}
		wr.codes[status]++
		wr.bytes += n
		wr.latencies = append(wr.latencies, time.Since(start))
	}

	// Warm up: every URL once per client share, for at most cfg.warmup.
	if cfg.warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, cfg.warmup)
		var wg sync.WaitGroup
		for w := 0; w < cfg.clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var wr workerResult
				for i := w; i < cfg.items() && wctx.Err() == nil; i += cfg.clients {
					one(w, i, &wr, false)
				}
			}()
		}
		wg.Wait()
		cancel()
	}

	mctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var issued atomic.Int64
	results := make([]workerResult, cfg.clients)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < cfg.clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := &results[w]
			wr.codes = map[int]int{}
			wr.latencies = make([]time.Duration, 0, 1<<12)
			for i := w * 7919; mctx.Err() == nil && !cfg.stopped(); i++ {
				n := issued.Add(1)
				if cfg.requests > 0 && n > int64(cfg.requests) {
					return
				}
				if cfg.once {
					// The shared count hands out each item once.
					if n > int64(cfg.items()) {
						return
					}
					one(w, int(n-1), wr, true)
					continue
				}
				one(w, i%cfg.items(), wr, true)
			}
		}()
	}
	wg.Wait()
	res := result{elapsed: time.Since(start), codes: map[int]int{}}
	for _, wr := range results {
		res.latencies = append(res.latencies, wr.latencies...)
		for c, n := range wr.codes {
			res.codes[c] += n
		}
		res.errors += wr.errors
		res.bytes += wr.bytes
		if res.firstErr == nil {
			res.firstErr = wr.firstErr
		}
	}
	slices.Sort(res.latencies)
	return res
}

func (r result) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(p * float64(len(r.latencies)-1))
	return r.latencies[i]
}

func (r result) print(w io.Writer, cfg runConfig) {
	n := len(r.latencies)
	rps := float64(n) / r.elapsed.Seconds()
	fmt.Fprintf(w, "urls %d, clients %d, measured %.2fs\n", len(cfg.urls), cfg.clients, r.elapsed.Seconds())
	fmt.Fprintf(w, "requests %d, errors %d, %.0f requests/s, %.1f MB/s\n", n, r.errors, rps, float64(r.bytes)/r.elapsed.Seconds()/1e6)
	fmt.Fprintf(w, "latency p50 %s, p90 %s, p99 %s, max %s\n",
		round(r.percentile(0.50)), round(r.percentile(0.90)), round(r.percentile(0.99)), round(r.percentile(1)))
	codes := make([]int, 0, len(r.codes))
	for c := range r.codes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, r.codes[c]))
	}
	fmt.Fprintf(w, "status codes: %s\n", strings.Join(parts, ", "))
	if r.firstErr != nil {
		fmt.Fprintf(w, "first error: %v\n", r.firstErr)
	}
}

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(time.Millisecond)
	case d > time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
