// Package refresh is the client side of private key refresh: it reads a
// keyserver's fingerprint prefix log (draft-ietf-openpgp-hkp,
// GET /pks/v2/prefixlog/DATE, one day's changed prefixes) for each day
// since the last refresh, and fetches only the held keys whose prefix is
// listed. The server learns which keys the client fetches, never which
// other keys it holds; a classic refresh (gpg --refresh-keys) asks for
// every one.
//
// Keys are fetched as gpg fetches them, GET /pks/lookup?op=get&options=mr
// &search=0xFINGERPRINT, which every HKP server answers; an answer is
// kept only for the key asked for (a server cannot slip in another key).
//
// It owns the client's side of the wire (the log's lines, the days to
// ask, the keys to fetch); it does not own where the held keys come from
// or go (gpg, files: cmd/kith's refresh command), the server's side
// (hkp/v2's PrefixLog), or OpenPGP (package pgp).
package refresh

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/pgp"
)

// Limits of what the client reads and asks.
const (
	// Slack is how far before the last refresh's start the next one
	// starts: a write that began before then (a key's change time is its
	// transaction's start) and committed after it, and a server answer
	// cached meanwhile, are still in a log the next refresh reads.
	Slack = time.Hour
	// MaxDays is the most daily logs one refresh reads; a refresh since
	// longer ago is ErrTooOld, for the caller to fetch every key instead.
	MaxDays = 400
	// maxLogBytes caps one day's log: 16^digits lines, and digits keeps
	// 16^digits a fraction of the store, so a few MB even for a log of
	// every key of a large store.
	maxLogBytes = 64 << 20
	// maxKeyBytes caps one fetched key's answer (armored).
	maxKeyBytes = 64 << 20
)

// Errors a caller may branch on.
var (
	// ErrNoPrefixLog: the server does not serve a prefix log (404, 501).
	ErrNoPrefixLog = errors.New("the server has no prefix log (/pks/v2/prefixlog)")
	// ErrTooOld: the refresh would read more than MaxDays daily logs.
	ErrTooOld = fmt.Errorf("the last refresh is more than %d days ago", MaxDays)
	// ErrNotFound: the server has no such key.
	ErrNotFound = errors.New("no such key")
)

// Options configure a Client. The zero value of each field means its
// default.
type Options struct {
	// HTTPClient makes the requests (nil: one with a minute's timeout).
	HTTPClient *http.Client
	// UserAgent is sent with every request ("" sends Go's).
	UserAgent string
}

// Client reads one keyserver's prefix log and fetches its keys. It is
// safe for concurrent use.
type Client struct {
	base      *url.URL
	http      *http.Client
	userAgent string
}

// New returns a Client of the keyserver at server, an http or https URL
// (hkp:// is http on port 11371, hkps:// https).
func New(server string, opts Options) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("refresh: server %q: %w", server, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("refresh: server %q has no host", server)
	}
	switch u.Scheme {
	case "hkp":
		u.Scheme = "http"
		if u.Port() == "" {
			u.Host += ":11371"
		}
	case "hkps":
		u.Scheme = "https"
	case "http", "https":
	default:
		return nil, fmt.Errorf("refresh: server %q is not an http, https, hkp or hkps URL", server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: time.Minute}
	}
	return &Client{base: u, http: opts.HTTPClient, userAgent: opts.UserAgent}, nil
}

// get GETs path (with query) of the server, returning the response for
// the caller to close.
func (c *Client) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+path, nil)
	if err != nil {
		return nil, err
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	return c.http.Do(req)
}

// PrefixLog returns the prefixes the server lists for day (its UTC date)
// and the server's time of the answer (its Date header, or the local
// clock without one). Every prefix is lower-case hex, at least one digit.
func (c *Client) PrefixLog(ctx context.Context, day time.Time) (prefixes []string, at time.Time, err error) {
	date := day.UTC().Format(time.DateOnly)
	res, err := c.get(ctx, "/pks/v2/prefixlog/"+date)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("refresh: prefix log of %s: %w", date, err)
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusNotImplemented:
		return nil, time.Time{}, fmt.Errorf("refresh: prefix log of %s: %w", date, ErrNoPrefixLog)
	default:
		return nil, time.Time{}, fmt.Errorf("refresh: prefix log of %s: %s", date, res.Status)
	}
	at = time.Now()
	if t, err := http.ParseTime(res.Header.Get("Date")); err == nil {
		at = t
	}
	sc := bufio.NewScanner(io.LimitReader(res.Body, maxLogBytes))
	for sc.Scan() {
		line := strings.ToLower(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" {
			continue
		}
		if _, err := hex.DecodeString(padEven(line)); err != nil || len(line) > 64 {
			return nil, time.Time{}, fmt.Errorf("refresh: prefix log of %s: %q is not a fingerprint prefix", date, line)
		}
		prefixes = append(prefixes, line)
	}
	if err := sc.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("refresh: prefix log of %s: %w", date, err)
	}
	return prefixes, at, nil
}

// padEven makes an odd-length hex prefix decodable.
func padEven(s string) string {
	if len(s)%2 == 1 {
		return s + "0"
	}
	return s
}

// Fetch returns the key whose primary fingerprint is fp, as the server
// stores it (binary packets), asked for as gpg asks; ErrNotFound when the
// server has none. Other keys in the answer are dropped.
func (c *Client) Fetch(ctx context.Context, fp []byte) (*pgp.Key, error) {
	hexFP := strings.ToUpper(hex.EncodeToString(fp))
	res, err := c.get(ctx, "/pks/lookup?op=get&options=mr&search=0x"+hexFP)
	if err != nil {
		return nil, fmt.Errorf("refresh: fetch %s: %w", hexFP, err)
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, fmt.Errorf("refresh: fetch %s: %w", hexFP, ErrNotFound)
	default:
		return nil, fmt.Errorf("refresh: fetch %s: %s", hexFP, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxKeyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("refresh: fetch %s: %w", hexFP, err)
	}
	if len(body) > maxKeyBytes {
		return nil, fmt.Errorf("refresh: fetch %s: the answer is over %d bytes", hexFP, maxKeyBytes)
	}
	ks, _ := pgp.ReadKeys(bytes.NewReader(body))
	for _, k := range ks {
		if bytes.Equal(k.Fingerprint(), fp) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("refresh: fetch %s: the answer holds no such key", hexFP)
}

// Result is what a refresh did.
type Result struct {
	// Held is the number of distinct keys the refresh was given.
	Held int
	// Days is the number of daily logs read, and Prefixes the distinct
	// prefixes they listed.
	Days, Prefixes int
	// Fetched counts the keys whose prefix was listed and that the
	// server answered; Missing those it had no key for (deleted, or never
	// there). Skipped counts the held keys not asked for: the refreshes
	// answered without downloading them.
	Fetched, Missing, Skipped int
	// Began is the server's time of the refresh's first answer: the next
	// refresh's since.
	Began time.Time
}

// Refresh reads the daily logs from since (less Slack) to the server's
// today, and fetches each key of held (primary fingerprints) whose prefix
// a log lists, calling got with it; a key the server does not have is
// counted as Missing. An error from got ends the refresh.
func (c *Client) Refresh(ctx context.Context, held [][]byte, since time.Time, got func(*pgp.Key) error) (Result, error) {
	var r Result
	var hexFPs []string
	byHex := map[string][]byte{}
	for _, fp := range held {
		h := hex.EncodeToString(fp)
		if byHex[h] == nil {
			byHex[h] = fp
			hexFPs = append(hexFPs, h)
		}
	}
	r.Held = len(hexFPs)
	listed := map[int]map[string]bool{} // by prefix length
	day := since.Add(-Slack).UTC().Truncate(24 * time.Hour)
	for {
		if r.Days == MaxDays {
			return r, fmt.Errorf("refresh: since %s: %w", since.UTC().Format(time.DateOnly), ErrTooOld)
		}
		ps, at, err := c.PrefixLog(ctx, day)
		if err != nil {
			return r, err
		}
		if r.Days == 0 {
			r.Began = at
		}
		r.Days++
		for _, p := range ps {
			if listed[len(p)] == nil {
				listed[len(p)] = map[string]bool{}
			}
			if !listed[len(p)][p] {
				listed[len(p)][p] = true
				r.Prefixes++
			}
		}
		// Up to the server's today, as its latest answer dates it.
		if !day.Before(at.UTC().Truncate(24 * time.Hour)) {
			break
		}
		day = day.AddDate(0, 0, 1)
	}
	for _, h := range hexFPs {
		if !matches(listed, h) {
			r.Skipped++
			continue
		}
		if err := c.fetchInto(ctx, &r, byHex[h], got); err != nil {
			return r, err
		}
	}
	return r, nil
}

// RefreshAll fetches every key of held, as a classic refresh does,
// calling got with each, and dates the refresh by the local clock (the
// next Refresh from r.Began allows Slack for the clocks' difference).
func (c *Client) RefreshAll(ctx context.Context, held [][]byte, got func(*pgp.Key) error) (Result, error) {
	r := Result{Held: len(held), Began: time.Now()}
	for _, fp := range held {
		if err := c.fetchInto(ctx, &r, fp, got); err != nil {
			return r, err
		}
	}
	return r, nil
}

// fetchInto fetches the key fp names and calls got with it, counting it
// in r as Fetched, or as Missing when the server has no such key.
func (c *Client) fetchInto(ctx context.Context, r *Result, fp []byte, got func(*pgp.Key) error) error {
	k, err := c.Fetch(ctx, fp)
	if errors.Is(err, ErrNotFound) {
		r.Missing++
		return nil
	}
	if err != nil {
		return err
	}
	r.Fetched++
	return got(k)
}

// matches reports whether a listed prefix begins hexFP.
func matches(listed map[int]map[string]bool, hexFP string) bool {
	for n, set := range listed {
		if n <= len(hexFP) && set[hexFP[:n]] {
			return true
		}
	}
	return false
}
