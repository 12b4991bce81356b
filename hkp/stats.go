// stats.go: op=stats: the key count, recent additions per day, the
// server's software and version, and whatever Options.ExtraStats adds
// (recon peers). HTML for people, JSON with options=mr.

package hkp

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

// Software is the server's name in op=stats.
const Software = "Kith"

// Stats is the JSON answer of op=stats&options=mr.
type Stats struct {
	Software string `json:"software"`
	Version  string `json:"version"`
	// Keys is the number of keys stored.
	Keys int64 `json:"keys"`
	// Daily counts new and updated keys per day, newest first.
	Daily []DailyStats `json:"daily"`
	// Extra holds what Options.ExtraStats returned.
	Extra map[string]any `json:"extra,omitempty"`
}

// DailyStats is one day of Stats.Daily.
type DailyStats struct {
	Day     string `json:"day"` // YYYY-MM-DD, UTC
	New     int64  `json:"new"`
	Updated int64  `json:"updated"`
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

var statsTemplate = template.Must(template.New("stats").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Software}} keyserver statistics</title>
<style>body{font-family:sans-serif;margin:2em}td,th{padding:0.2em 1em;text-align:right}</style>
</head>
<body>
<h1>{{.Software}} keyserver statistics</h1>
<table>
<tr><th>Software</th><td>{{.Software}}</td></tr>
<tr><th>Version</th><td>{{.Version}}</td></tr>
<tr><th>Keys</th><td>{{.Keys}}</td></tr>
</table>
<h2>Keys per day</h2>
<table>
<tr><th>Day</th><th>New</th><th>Updated</th></tr>
{{range .Daily}}<tr><td>{{.Day}}</td><td>{{.New}}</td><td>{{.Updated}}</td></tr>
{{end}}</table>
{{range .Sections}}<h2>{{.Name}}</h2>
<pre>{{.JSON}}</pre>
{{end}}</body>
</html>
`))

type statsSection struct {
	Name, JSON string
}

// serveStats answers op=stats.
func (h *Handler) serveStats(w http.ResponseWriter, r *http.Request, l *lookup) {
	ks, err := h.stats.get(r.Context(), h.store, h.opts.Now())
	if err != nil {
		if r.Context().Err() == nil {
			h.log.Error("hkp: stats", "err", err)
		}
		h.metrics.lookup("stats", "error")
		httpError(w, http.StatusServiceUnavailable, "the key store is not answering; try again later")
		return
	}
	s := Stats{Software: Software, Version: h.opts.Version, Keys: ks.Keys, Daily: []DailyStats{}}
	if s.Version == "" {
		s.Version = "unknown"
	}
	for _, d := range ks.Daily {
		s.Daily = append(s.Daily, DailyStats{Day: d.Day.UTC().Format("2006-01-02"), New: d.New, Updated: d.Updated})
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
		page := struct {
			Stats
			Sections []statsSection
		}{Stats: s}
		names := make([]string, 0, len(s.Extra))
		for k := range s.Extra {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, n := range names {
			j, err := json.MarshalIndent(s.Extra[n], "", "  ")
			if err != nil {
				j = []byte("(not encodable: " + err.Error() + ")")
			}
			page.Sections = append(page.Sections, statsSection{Name: n, JSON: string(j)})
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
