// hashquery.go: POST /pks/hashquery, how SKS-protocol peers fetch the keys
// reconciliation found missing. The wire format is package recon's, which
// keeps both ends of it; this file serves it from the store. Digests the
// store does not hold are left out of the answer, and so are keys past the
// answer cap (Options.MaxAnswerSize, the same as op=get's): the peer asks
// again for what it still lacks. A partial answer, not an error, because
// SKS drops the whole batch of 100 digests on a non-2xx status but stores
// whatever keys a 200 answer carries, so the keys that fit make progress.

package hkp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/recon"
)

// hashQueryFit returns how many of keys (by Size) fit in one response of
// at most maxBytes of packets; the rest are left for the peer to ask again.
func hashQueryFit(keys []keys.Stored, maxBytes int) int {
	total := 0
	for i := range keys {
		if total+keys[i].Size > maxBytes {
			return i
		}
		total += keys[i].Size
	}
	return len(keys)
}

// hashQueryLength is the length of the response for keys (their Size
// set), for Content-Length.
func hashQueryLength(keys []keys.Stored) int64 {
	var n int64
	for i := range keys {
		n += int64(keys[i].Size)
	}
	return recon.HashQueryResponseSize(len(keys), n)
}

// serveHashQuery answers POST /pks/hashquery.
func (h *Handler) serveHashQuery(w http.ResponseWriter, r *http.Request) {
	limit := recon.HashQueryRequestSize(h.opts.MaxHashQueryDigests)
	if r.ContentLength > limit {
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("hashquery body larger than %d bytes (at most %d digests)", limit, h.opts.MaxHashQueryDigests))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("hashquery body larger than %d bytes (at most %d digests)", limit, h.opts.MaxHashQueryDigests))
			return
		}
		httpError(w, http.StatusBadRequest, "could not read the request body")
		return
	}
	digests, err := recon.ParseHashQueryRequest(body, h.opts.MaxHashQueryDigests)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	var ks []keys.Stored
	if len(digests) > 0 {
		// Sizes only: the packets are streamed once it is known what fits.
		ks, _, err = h.store.FindKeys(r.Context(), keys.Query{Digests: digests, InlineBytes: -1, NoUserIDs: true})
		if err != nil {
			if r.Context().Err() == nil {
				h.log.Error("hkp: hashquery", "digests", len(digests), "err", err)
			}
			httpError(w, http.StatusServiceUnavailable, "the key store is not answering; try again later")
			return
		}
	}
	n := hashQueryFit(ks, h.opts.MaxAnswerSize)
	if n < len(ks) {
		h.log.Info("hkp: hashquery answer cut at the size cap", "asked", len(digests), "found", len(ks), "sent", n)
	}
	ks = ks[:n]
	h.metrics.hashQueryKeys(n)
	w.Header().Set("Content-Type", "application/pgp-keys")
	w.Header().Set("Content-Length", strconv.FormatInt(hashQueryLength(ks), 10))
	w.Header().Set("Cache-Control", "no-store")
	if err := writeHashQueryResponse(r.Context(), w, ks, h.store.StreamPackets); err != nil {
		if r.Context().Err() == nil {
			h.log.Warn("hkp: hashquery answer cut off", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// errAnswered stops the store's stream once the answer holds every key it
// promised.
var errAnswered = errors.New("hkp: hashquery: every promised key written")

// writeHashQueryResponse writes the response for keys (their Size set):
// the count, each key's length and packets as stream reads them one at a
// time, then CRLF. A key that changed size or went away since its size
// was read fails the response (its length is already promised).
//
// The stream is stopped as soon as the last key is written, before the
// store reads the end of its result: SKS hangs up once it has read the
// last key, without waiting for the CRLF, and that cancels ctx, so a store
// still reading (PostgreSQL's end-of-result messages) would fail with
// ctx's error, and the handler abort, an answer the peer already holds
// whole and stores.
func writeHashQueryResponse(ctx context.Context, w io.Writer, keys []keys.Stored, stream func(ctx context.Context, fps [][]byte, fn func(fp, packets []byte) error) error) error {
	fps := make([][]byte, len(keys))
	for i := range keys {
		fps[i] = keys[i].Fingerprint
	}
	rw, err := recon.NewHashQueryResponseWriter(w, len(keys))
	if err != nil {
		return err
	}
	i := 0
	err = stream(ctx, fps, func(fp, packets []byte) error {
		if i >= len(keys) || !bytes.Equal(keys[i].Fingerprint, fp) {
			return fmt.Errorf("a key went away or changed during the answer (at %X)", fp)
		}
		if len(packets) != keys[i].Size {
			return fmt.Errorf("key %X changed during the answer", fp)
		}
		i++
		if err := rw.WriteKey(packets); err != nil {
			return err
		}
		if i == len(keys) {
			return errAnswered
		}
		return nil
	})
	if err != nil && !errors.Is(err, errAnswered) {
		return err
	}
	if i != len(keys) {
		return fmt.Errorf("%d of %d keys went away during the answer", len(keys)-i, len(keys))
	}
	return rw.Close()
}
