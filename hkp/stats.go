// stats.go: op=stats: who this server is (host and node names, contact,
// software, version, addresses), its recon peers, the key count and
// recent additions per day. JSON with options=mr, in the shape the pool's
// tools read from Hockeypuck (its field names, beside Kith's own); HTML
// for people, in the site's frame.

package hkp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

// Software is the server's name in op=stats.
const Software = "Kith"

// StatsPath is where a keyserver answers op=stats, as Hockeypuck names it
// for each peer (statsPath).
const StatsPath = "/pks/lookup?op=stats"

// Stats is the JSON answer of op=stats&options=mr. The fields named as
// Hockeypuck names them (now, version, hostname, nodename, contact,
// httpAddr, reconAddr, software, total, peers, daily) have Hockeypuck's
// JSON types, so that the pool's status tools read Kith as they read
// Hockeypuck; keys and extra are Kith's own.
type Stats struct {
	// Now is when the answer was made (RFC 3339, UTC).
	Now      string `json:"now"`
	Software string `json:"software"`
	Version  string `json:"version"`
	// Hostname is the server's public host name; Nodename names the node
	// that answered (several may serve one host name).
	Hostname string `json:"hostname"`
	Nodename string `json:"nodename"`
	// Contact is how to reach the operator (an OpenPGP key's fingerprint
	// or ID, as SKS's server_contact, or an address); empty when unset.
	Contact string `json:"contact"`
	// HTTPAddr and ReconAddr are the HKP and recon addresses (":PORT");
	// ReconAddr is empty when recon is off.
	HTTPAddr  string `json:"httpAddr"`
	ReconAddr string `json:"reconAddr"`
	// Total is the number of keys stored (Hockeypuck's name for Keys).
	Total int64 `json:"total"`
	// Keys is the number of keys stored (Kith's name, kept).
	Keys int64 `json:"keys"`
	// Peers lists the recon peers, in the configured order.
	Peers []StatsPeer `json:"peers"`
	// Daily counts new and updated keys per day, newest first.
	Daily []DailyStats `json:"daily"`
	// Extra holds what Options.ExtraStats returned.
	Extra map[string]any `json:"extra,omitempty"`
}

// DailyStats is one day of Stats.Daily, under Kith's names (day, new,
// updated) and Hockeypuck's (Time, Inserted, Updated).
type DailyStats struct {
	Day     string `json:"day"` // YYYY-MM-DD, UTC
	New     int64  `json:"new"`
	Updated int64  `json:"updated"`
	// Time, Inserted and Replaced are Day, New and Updated as Hockeypuck
	// names them: the day's start (RFC 3339), "Inserted" and "Updated".
	Time     time.Time `json:"Time"`
	Inserted int64     `json:"Inserted"`
	Replaced int64     `json:"Updated"`
}

// StatsPeer is one recon peer in Stats: Hockeypuck's fields (name,
// httpAddr, reconAddr, statsPath, lastIncomingRecon, lastOutgoingRecon,
// reconStatus) and Kith's (address, enabled, last_recon, last_attempt,
// failing_since, state and the counts). Why a round failed is never in it:
// the error may name internal addresses, and the logs have it.
type StatsPeer struct {
	Name      string `json:"name"`      // the recon address
	HTTPAddr  string `json:"httpAddr"`  // the peer's HKP host:port; empty until known
	ReconAddr string `json:"reconAddr"` // the peer's recon host:port
	StatsPath string `json:"statsPath"` // StatsPath
	// LastIncomingRecon and LastOutgoingRecon are when the last good round
	// the peer, or this side, started ended; the zero time when none did.
	LastIncomingRecon time.Time `json:"lastIncomingRecon"`
	LastOutgoingRecon time.Time `json:"lastOutgoingRecon"`
	// ReconStatus is the state in Hockeypuck's words where they fit:
	// "OK", "Starting" (no round yet), "Failing" or "Disabled".
	ReconStatus string `json:"reconStatus"`

	Address string `json:"address"`
	Enabled bool   `json:"enabled"`
	// LastRecon is when the last good round ended, LastAttempt when the
	// last round ended, good or not; FailingSince when the failing rounds
	// began (RFC 3339, UTC; absent when there is none).
	LastRecon    string `json:"last_recon,omitempty"`
	LastAttempt  string `json:"last_attempt,omitempty"`
	FailingSince string `json:"failing_since,omitempty"`
	// State says in words how the rounds go: "ok", "failing since …",
	// "waiting for the first round" or "disabled".
	State string `json:"state"`
	// KeysReceived counts keys fetched from the peer and stored here;
	// ElementsReceived the digests the peer had and this side lacked,
	// ElementsSent those this side had and the peer lacked.
	KeysReceived     int `json:"keys_received"`
	ElementsReceived int `json:"elements_received"`
	ElementsSent     int `json:"elements_sent"`
}

// PeerStatus is what op=stats is told of one recon peer
// (Options.Peers): the wiring fills it from the recon manager.
type PeerStatus struct {
	// Address is the peer's recon host:port; HTTP its HKP base URL (empty
	// until known).
	Address, HTTP string
	// Enabled is false for a peer listed but never picked for a round.
	Enabled bool
	// LastGood is when the last good round ended (in either role);
	// LastIncoming and LastOutgoing when the last good round the peer, or
	// this side, started ended; LastAttempt when the last round ended, good
	// or not; FailingSince when the failing rounds began (zero: not
	// failing).
	LastGood, LastIncoming, LastOutgoing, LastAttempt, FailingSince time.Time
	// KeysReceived counts keys fetched from the peer and stored;
	// ElementsReceived and ElementsSent the digests each side lacked.
	KeysReceived, ElementsReceived, ElementsSent int
}

// statsCache keeps the store's statistics for a short while: counting
// keys is a scan the store should not do on every request.
type statsCache struct {
	ttl  time.Duration
	mu   sync.Mutex
	at   time.Time
	last keys.Stats
}

func (c *statsCache) get(ctx context.Context, st Store, now time.Time) (keys.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < c.ttl {
		return c.last, nil
	}
	ks, err := st.KeyStats(ctx)
	if err != nil {
		return keys.Stats{}, err
	}
	c.at, c.last = now, ks
	return ks, nil
}

// statsTemplate is the HTML op=stats page. Its headings and the "Total
// number of keys" line are those of SKS's and Hockeypuck's stats pages,
// which scripts scrape.
var statsTemplate = sitePage("stats", `<!DOCTYPE html>
<html lang="en">
<head>
{{template "head"}}
<title>Keyserver statistics · Kith</title>
</head>
<body>
{{template "header"}}
<main id="main">
<h1>Keyserver statistics</h1>
<p class="muted">Taken at {{.Taken}}. <a href="/pks/lookup?op=stats&amp;options=mr">The same as JSON</a>.</p>
<h2 id="settings">Settings</h2>
<table class="settings">
<tbody>
<tr><th scope="row">Hostname</th><td class="value">{{.Hostname}}</td></tr>
<tr><th scope="row">Nodename</th><td class="value">{{.Nodename}}</td></tr>
<tr><th scope="row">Software</th><td>{{.Software}}</td></tr>
<tr><th scope="row">Version</th><td>{{.Version}}</td></tr>
<tr><th scope="row">Server contact</th><td class="value">{{if .Contact}}<a href="{{.ContactURL}}">{{.Contact}}</a>{{else}}<span class="muted">not given</span>{{end}}</td></tr>
<tr><th scope="row">HTTP</th><td>{{.HTTPAddr}}</td></tr>
<tr><th scope="row">Recon</th><td>{{if .ReconAddr}}{{.ReconAddr}}{{else}}<span class="muted">off</span>{{end}}</td></tr>
</tbody>
</table>
<h2 id="gossip-peers">Gossip Peers</h2>
{{if .PeerRows}}<table class="stack peers">
<thead><tr><th scope="col">Address</th><th scope="col">Last good round</th><th scope="col">Keys exchanged</th><th scope="col">State</th></tr></thead>
<tbody>
{{range .PeerRows}}<tr>
<td data-label="Address"><span class="value mono">{{.Address}}</span>{{if .StatsURL}} <a href="{{.StatsURL}}">statistics</a>{{end}}</td>
<td data-label="Last good round">{{if .LastGood}}{{.LastGood}}{{else}}<span class="muted">none yet</span>{{end}}</td>
<td data-label="Keys exchanged">{{.KeysReceived}} received, {{.ElementsSent}} sent</td>
<td data-label="State"><span class="badge {{.StateClass}}">{{.State}}</span></td>
</tr>
{{end}}</tbody>
</table>
<p class="muted">Received: keys fetched from the peer and stored here. Sent: keys the peer lacked, offered to it to fetch. Why a failing round failed is in this server's log.</p>
{{else}}<p>No recon peers are configured.</p>
{{end}}<h2 id="statistics">Statistics</h2>
<p>Total number of keys: <strong id="total">{{.Total}}</strong></p>
<h3 id="daily-histogram">Daily Histogram</h3>
{{if .Daily}}<table>
<thead><tr><th scope="col">Day</th><th scope="col">New keys</th><th scope="col">Updated keys</th></tr></thead>
<tbody>
{{range .Daily}}<tr><td>{{.Day}}</td><td>{{.New}}</td><td>{{.Updated}}</td></tr>
{{end}}</tbody>
</table>
{{else}}<p>No keys were added or updated lately.</p>
{{end}}</main>
{{template "footer"}}
</body>
</html>
`)

// statsPage is what statsTemplate shows.
type statsPage struct {
	Stats
	Taken      string
	ContactURL string
	PeerRows   []peerRow
}

// peerRow is one row of the HTML peer table.
type peerRow struct {
	Address, StatsURL, LastGood, State, StateClass string
	KeysReceived, ElementsSent                     int
}

// serveStats answers op=stats.
func (h *Handler) serveStats(w http.ResponseWriter, r *http.Request, l *lookup) {
	now := h.opts.Now()
	ks, err := h.stats.get(r.Context(), h.store, now)
	if err != nil {
		if r.Context().Err() == nil {
			h.log.Error("hkp: stats", "err", err)
		}
		h.metrics.lookup("stats", "error")
		httpError(w, http.StatusServiceUnavailable, "the key store is not answering; try again later")
		return
	}
	s := Stats{
		Now:       now.UTC().Format(time.RFC3339),
		Software:  Software,
		Version:   h.opts.Version,
		Hostname:  h.opts.Hostname,
		Nodename:  h.opts.Nodename,
		Contact:   h.opts.Contact,
		HTTPAddr:  h.opts.HTTPAddr,
		ReconAddr: h.opts.ReconAddr,
		Total:     ks.Keys,
		Keys:      ks.Keys,
		Peers:     []StatsPeer{},
		Daily:     []DailyStats{},
	}
	if s.Version == "" {
		s.Version = "unknown"
	}
	for _, d := range ks.Daily {
		t := d.Day.UTC()
		s.Daily = append(s.Daily, DailyStats{Day: t.Format(time.DateOnly), New: d.New, Updated: d.Updated,
			Time: t, Inserted: d.New, Replaced: d.Updated})
	}
	var peers []PeerStatus
	if h.opts.Peers != nil {
		peers = h.opts.Peers(r.Context())
	}
	for _, p := range peers {
		s.Peers = append(s.Peers, statsPeer(p))
	}
	if h.opts.ExtraStats != nil {
		s.Extra = h.opts.ExtraStats(r.Context())
	}
	h.metrics.lookup("stats", "found")
	var b bytes.Buffer
	if l.mr {
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			h.log.Error("hkp: stats: encoding extra stats", "err", err)
			httpError(w, http.StatusInternalServerError, "statistics could not be encoded")
			return
		}
		w.Header().Set("Content-Type", "application/json")
	} else {
		page := statsPage{Stats: s, Taken: clock(now)}
		if s.Contact != "" {
			page.ContactURL = "/pks/lookup?op=index&fingerprint=on&search=" + url.QueryEscape(s.Contact)
		}
		for _, p := range peers {
			_, state, class := peerState(p)
			page.PeerRows = append(page.PeerRows, peerRow{
				Address:      p.Address,
				StatsURL:     peerStatsURL(p.HTTP),
				LastGood:     clock(p.LastGood),
				State:        state,
				StateClass:   class,
				KeysReceived: p.KeysReceived,
				ElementsSent: p.ElementsSent,
			})
		}
		if err := statsTemplate.Execute(&b, page); err != nil {
			h.log.Error("hkp: stats template", "err", err)
			httpError(w, http.StatusInternalServerError, "statistics could not be rendered")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.Write(b.Bytes())
}

// statsPeer is p as Stats shows it.
func statsPeer(p PeerStatus) StatsPeer {
	sp := StatsPeer{
		Name:              p.Address,
		HTTPAddr:          hostPort(p.HTTP),
		ReconAddr:         p.Address,
		StatsPath:         StatsPath,
		LastIncomingRecon: p.LastIncoming.UTC().Truncate(time.Second),
		LastOutgoingRecon: p.LastOutgoing.UTC().Truncate(time.Second),
		Address:           p.Address,
		Enabled:           p.Enabled,
		LastRecon:         rfc3339(p.LastGood),
		LastAttempt:       rfc3339(p.LastAttempt),
		FailingSince:      rfc3339(p.FailingSince),
		KeysReceived:      p.KeysReceived,
		ElementsReceived:  p.ElementsReceived,
		ElementsSent:      p.ElementsSent,
	}
	sp.ReconStatus, sp.State, _ = peerState(p)
	return sp
}

// peerState is how p's rounds go: in Hockeypuck's words (reconStatus), in
// Kith's (state) and as the badge class of the HTML page (class).
func peerState(p PeerStatus) (reconStatus, state, class string) {
	switch {
	case !p.Enabled:
		return "Disabled", "disabled", "disabled"
	case !p.FailingSince.IsZero():
		return "Failing", "failing since " + clock(p.FailingSince), "failing"
	case !p.LastGood.IsZero():
		return "OK", "ok", "ok"
	}
	return "Starting", "waiting for the first round", "waiting"
}

// hostPort is the host:port of an http(s) base URL (with the scheme's
// default port when it names none); "" for "" or a URL without a host.
func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// peerStatsURL is the op=stats page of the peer whose HKP base URL is
// base; "" when it is unknown.
func peerStatsURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return fmt.Sprintf("%s://%s%s", u.Scheme, u.Host, StatsPath)
}

// rfc3339 is t in RFC 3339 at UTC; "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// clock is t to the minute at UTC, for people; "" for the zero time.
func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
