// lookup.go: GET /pks/lookup: parsing op, search and options, normalising
// the search into a store query, and answering get, index, vindex and hget
// (from the cache when it can).

package hkp

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// Lookup limits on the search itself.
const (
	maxSearchLength = 1024
)

// lookup is one parsed /pks/lookup request.
type lookup struct {
	op          string
	mr          bool
	fingerprint bool // fingerprint=on: show fingerprints in HTML
	exact       bool
	search      string // as given (trimmed)

	query  keys.Query // get, index, vindex
	digest [16]byte   // hget
	term   string     // the selector term, "" for words
	words  []string   // word queries, lower-cased and sorted
}

// errBadRequest is what parse errors wrap: the client gets 400 and the
// message.
var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// errNotImplemented: an op HKP defines or SKS knows that Kith does not do,
// or an unknown op (HKP drafts: 501).
var errNotImplemented = errors.New("not implemented")

// parseLookup reads the query parameters of a lookup.
func parseLookup(v url.Values) (*lookup, error) {
	l := &lookup{op: strings.ToLower(strings.TrimSpace(v.Get("op")))}
	for _, o := range strings.Split(v.Get("options"), ",") {
		switch strings.ToLower(strings.TrimSpace(o)) {
		case "mr":
			l.mr = true
		case "exact":
			l.exact = true
		}
	}
	l.exact = l.exact || on(v.Get("exact"))
	l.fingerprint = on(v.Get("fingerprint"))
	switch l.op {
	case "":
		return nil, badRequest("missing op: use op=get, index, vindex, hget or stats")
	case "get", "index", "vindex", "hget":
	case "stats":
		return l, nil
	default:
		return nil, fmt.Errorf("%w: op=%s (Kith serves op=get, index, vindex, hget and stats)", errNotImplemented, truncate(l.op, 32))
	}
	if !v.Has("search") || strings.TrimSpace(v.Get("search")) == "" {
		return nil, badRequest("missing search: give a key ID (0x…), fingerprint, email or words")
	}
	l.search = strings.TrimSpace(v.Get("search"))
	if len(l.search) > maxSearchLength {
		return nil, badRequest("search longer than %d bytes", maxSearchLength)
	}
	if l.op == "hget" {
		d, err := pgp.ParseDigest(strings.TrimPrefix(strings.ToLower(l.search), "0x"))
		if err != nil {
			return nil, badRequest("op=hget wants a key digest of 32 hex digits")
		}
		l.digest = d
		l.term = digestTerm(d)
		return l, nil
	}
	if err := l.parseSearch(); err != nil {
		return nil, err
	}
	return l, nil
}

func on(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "1", "true", "yes":
		return true
	}
	return false
}

// parseSearch normalises l.search into a store query, by the grammar
// every frontend shares (keys.ParseSearch), and names the term the
// cache files the answer under.
func (l *lookup) parseSearch() error {
	q, err := keys.ParseSearch(l.search)
	if err != nil {
		return badRequest("search %q: %v", truncate(l.search, 80), err)
	}
	l.query = q
	switch {
	case len(q.Fingerprint) > 0:
		l.term = fingerprintTerm(q.Fingerprint)
	case q.KeyID != 0:
		l.term = keyIDTerm(q.KeyID)
	case q.HasShortKeyID:
		l.term = shortKeyIDTerm(q.ShortKeyID)
	case q.Email != "":
		l.term = emailTerm(q.Email)
	default:
		l.words = q.Words
	}
	return nil
}

// cacheKey is the normalised request: op, the options that change the
// answer, and the selector.
func (l *lookup) cacheKey() string {
	var b strings.Builder
	b.WriteString(l.op)
	b.WriteByte('|')
	if l.mr {
		b.WriteByte('m')
	}
	if l.fingerprint && !l.mr {
		b.WriteByte('f')
	}
	b.WriteByte('|')
	if l.term != "" {
		b.WriteString(l.term)
	} else {
		b.WriteByte('w')
		for _, w := range l.words {
			b.WriteByte(' ')
			b.WriteString(w)
		}
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// serveLookup answers GET /pks/lookup.
func (h *Handler) serveLookup(w http.ResponseWriter, r *http.Request) {
	w.Header()["Access-Control-Allow-Origin"] = []string{"*"}
	l, err := parseLookup(r.URL.Query())
	if err != nil {
		op := strings.ToLower(r.URL.Query().Get("op"))
		switch {
		case errors.Is(err, errNotImplemented):
			h.metrics.lookup("other", "not_implemented")
			httpError(w, http.StatusNotImplemented, err.Error())
		default:
			h.metrics.lookup(knownOp(op), "bad_request")
			httpError(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	if l.op == "stats" {
		h.serveStats(w, r, l)
		return
	}
	if l.query.Email != "" && !h.opts.EmailLookupLimit.Allow(w, r) {
		h.metrics.lookup(l.op, "rate_limited")
		httpError(w, http.StatusTooManyRequests, "too many lookups by email from this address: try again later")
		return
	}
	// Email answers under hkp.email_lookup = "verified" skip the cache: a
	// verification changes no key, so no key change would drop them.
	useCache := h.opts.VerifiedEmails == nil || l.query.Email == "" || l.op == "hget"
	key := l.cacheKey()
	if useCache {
		if a := h.cache.get(key); a != nil {
			h.metrics.lookup(l.op, "cached")
			writeAnswer(r.Context(), w, a)
			return
		}
	}
	epoch := h.cache.begin()
	a, fps, outcome := h.answerLookup(r.Context(), l)
	h.metrics.lookup(l.op, outcome)
	if useCache {
		h.cache.put(epoch, key, a, fps, l.term, l.words)
	}
	if err := writeAnswer(r.Context(), w, a); err != nil && a.stream != nil {
		if r.Context().Err() == nil {
			h.log.Error("hkp: streaming an answer", "op", l.op, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

func knownOp(op string) string {
	switch op {
	case "get", "index", "vindex", "hget", "stats":
		return op
	}
	return "other"
}

// answerLookup computes the answer of a get, index, vindex or hget, the
// primary fingerprints it holds, and its outcome for metrics.
func (h *Handler) answerLookup(ctx context.Context, l *lookup) (a *answer, fps []string, outcome string) {
	q := l.query
	if l.op == "hget" {
		q = keys.Query{Digests: [][16]byte{l.digest}}
	}
	q.Limit = h.opts.MaxResults
	switch l.op {
	case "get", "hget":
		// Keys over streamAbove together are streamed, never held whole;
		// over MaxAnswerSize, refused before any is read.
		q.MaxBytes, q.InlineBytes, q.NoUserIDs = h.opts.MaxAnswerSize, streamAbove, true
	case "index":
		// An index shows what the store keeps beside the packets.
		q.InlineBytes = -1
	}
	var ks []keys.Stored
	var more bool
	var err error
	if h.opts.VerifiedEmails != nil && q.Email != "" {
		ks, more, err = h.verifiedEmailKeys(ctx, q)
	} else {
		ks, more, err = h.store.FindKeys(ctx, q)
	}
	switch {
	case errors.Is(err, keys.ErrTooMany):
		ks, more, err = nil, true, nil
	case errors.Is(err, keys.ErrAnswerTooLarge):
		msg := fmt.Sprintf("the matching keys are larger than %d MiB together; use a more specific search, such as a fingerprint", h.opts.MaxAnswerSize>>20)
		a := errorAnswer(http.StatusBadRequest, msg)
		a.cacheable = true
		return a, nil, "too_large"
	}
	if err != nil {
		if ctx.Err() == nil {
			h.log.Error("hkp: lookup", "op", l.op, "err", err)
		}
		return errorAnswer(http.StatusServiceUnavailable, "the key store is not answering; try again later"), nil, "error"
	}
	if len(ks) > h.opts.MaxResults {
		ks, more = ks[:h.opts.MaxResults], true
	}
	if len(ks) == 0 && more {
		// The store refused without returning any: too broad.
		return h.tooMany(l), nil, "too_many"
	}
	if len(ks) == 0 {
		a := &answer{
			status:      http.StatusNotFound,
			contentType: "text/plain; charset=utf-8",
			header:      [][2]string{{"Cache-Control", "no-cache"}, {"X-Hkp-Results-Count", "0"}},
			body:        []byte("No keys found\n"),
			cacheable:   true,
		}
		return a, nil, "not_found"
	}
	fps = make([]string, len(ks))
	for i := range ks {
		fps[i] = string(ks[i].Fingerprint)
	}
	switch l.op {
	case "get", "hget":
		if more {
			return h.tooMany(l), fps, "too_many"
		}
		// gpg, above all, refuses the whole answer at a v6 packet.
		ks, _ = pgp.KeepForLegacyClients(ks, []struct{}(nil), func(i int) int { return ks[i].Version })
		if ks[0].Packets == nil {
			return h.streamedGetAnswer(ks), fps, "found"
		}
		return getAnswer(ks), fps, "found"
	default:
		a := h.indexAnswer(l, ks, more)
		if more {
			return a, fps, "truncated"
		}
		return a, fps, "found"
	}
}

// verifiedEmailKeys returns the keys for which email is verified by mail,
// at most MaxResults of them.
func (h *Handler) verifiedEmailKeys(ctx context.Context, q keys.Query) ([]keys.Stored, bool, error) {
	fps, err := h.opts.VerifiedEmails.VerifiedKeys(ctx, q.Email)
	if err != nil {
		return nil, false, err
	}
	q.Email = ""
	for _, f := range fps {
		if fp, err := hex.DecodeString(f.Value); err == nil {
			q.Fingerprints = append(q.Fingerprints, fp)
		}
	}
	if len(q.Fingerprints) == 0 {
		return nil, false, nil
	}
	return h.store.FindKeys(ctx, q)
}

// tooMany is the answer to a get that matches more keys than MaxResults.
func (h *Handler) tooMany(l *lookup) *answer {
	msg := fmt.Sprintf("too many keys match (more than %d); use a more specific search, such as a fingerprint", h.opts.MaxResults)
	if l.op != "get" {
		msg = fmt.Sprintf("too many keys match (more than %d); use a more specific search", h.opts.MaxResults)
	}
	a := errorAnswer(http.StatusBadRequest, msg)
	a.cacheable = true
	return a
}

func errorAnswer(code int, msg string) *answer {
	return &answer{
		status:      code,
		contentType: "text/plain; charset=utf-8",
		header:      [][2]string{{"Cache-Control", "no-store"}},
		body:        []byte(msg + "\n"),
	}
}

// streamAbove is the size (of the keys' packets together) above which a
// get answer is streamed from the store rather than built in memory and
// cached: one key at the policy's 1 MiB limit is still built whole.
const streamAbove = 1 << 20

// getAnswer armors keys as one block.
func getAnswer(keys []keys.Stored) *answer {
	var b bytes.Buffer
	b.Grow(estimateArmored(keys))
	if err := writeArmoredPackets(&b, keys); err != nil {
		// Writing to a bytes.Buffer cannot fail.
		panic(err)
	}
	return &answer{
		status:      http.StatusOK,
		contentType: "application/pgp-keys",
		header: [][2]string{
			{"Cache-Control", "max-age=300"},
			{"X-Hkp-Results-Count", strconv.Itoa(len(keys))},
		},
		body:      b.Bytes(),
		cacheable: true,
	}
}

// streamedGetAnswer is the answer to a get whose keys FindKeys left
// unread: they are armored as they come from the store, one at a time.
func (h *Handler) streamedGetAnswer(keys []keys.Stored) *answer {
	fps := make([][]byte, len(keys))
	for i := range keys {
		fps[i] = keys[i].Fingerprint
	}
	return &answer{
		status:      http.StatusOK,
		contentType: "application/pgp-keys",
		header: [][2]string{
			{"Cache-Control", "max-age=300"},
			{"X-Hkp-Results-Count", strconv.Itoa(len(keys))},
		},
		stream: func(ctx context.Context, w io.Writer) error {
			return writeArmoredStream(ctx, w, fps, h.store.StreamPackets)
		},
	}
}

func estimateArmored(keys []keys.Stored) int {
	n := 128
	for i := range keys {
		n += keys[i].Size * 139 / 100
	}
	return n
}

// writeAnswer sends a. A streamed answer that fails after its header went
// out is cut off (the client sees a truncated body, never a short key
// block that looks whole) and the error returned.
func writeAnswer(ctx context.Context, w http.ResponseWriter, a *answer) error {
	// The names are canonical already: the header is set without
	// Header.Set canonicalizing each name again on every answer.
	hd := w.Header()
	hd["Content-Type"] = []string{a.contentType}
	if a.stream == nil {
		hd["Content-Length"] = []string{strconv.Itoa(len(a.body))}
	}
	hd["X-Content-Type-Options"] = []string{"nosniff"}
	for _, f := range a.header {
		hd[f[0]] = []string{f[1]}
	}
	w.WriteHeader(a.status)
	if a.stream != nil {
		return a.stream(ctx, w)
	}
	_, err := w.Write(a.body)
	return err
}
