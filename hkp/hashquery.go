// hashquery.go: POST /pks/hashquery, how SKS-protocol peers fetch the keys
// reconciliation found missing. The server side of the format is written
// here (frontends do not import each other; recon has the client side):
//
//	request:  int32 count, then count times (int32 16, 16 digest bytes)
//	response: int32 count, then count times (int32 length, binary packets),
//	          then CRLF, as SKS ends every HTTP body
//
// All integers are big-endian. Digests the store does not hold are left
// out of the answer, and so are keys past the response cap: the peer asks
// again for what it still lacks.

package hkp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/kith-keyserver/kith/identity"
)

// errHashQuery marks a malformed hashquery request.
var errHashQuery = errors.New("malformed hashquery request")

// parseHashQuery decodes a hashquery request body of at most maxDigests
// digests.
func parseHashQuery(b []byte, maxDigests int) ([][16]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no count", errHashQuery, len(b))
	}
	n := int64(int32(binary.BigEndian.Uint32(b)))
	b = b[4:]
	if n < 0 {
		return nil, fmt.Errorf("%w: negative count %d", errHashQuery, n)
	}
	if n > int64(maxDigests) {
		return nil, fmt.Errorf("%w: %d digests (at most %d per request)", errHashQuery, n, maxDigests)
	}
	if int64(len(b)) != 20*n {
		return nil, fmt.Errorf("%w: %d digests need %d bytes after the count, got %d", errHashQuery, n, 20*n, len(b))
	}
	out := make([][16]byte, n)
	for i := range out {
		if l := binary.BigEndian.Uint32(b); l != 16 {
			return nil, fmt.Errorf("%w: digest %d has length %d, want 16", errHashQuery, i, int32(l))
		}
		copy(out[i][:], b[4:20])
		b = b[20:]
	}
	return out, nil
}

// hashQueryFit returns how many of keys (by Size) fit in one response of
// at most maxBytes of packets; the rest are left for the peer to ask again.
func hashQueryFit(keys []identity.StoredKey, maxBytes int) int {
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
func hashQueryLength(keys []identity.StoredKey) int {
	n := 4 + 2
	for i := range keys {
		n += 4 + keys[i].Size
	}
	return n
}

// maxHashQueryBody is the request body cap for maxDigests digests.
func maxHashQueryBody(maxDigests int) int64 { return 4 + 20*int64(maxDigests) }

// serveHashQuery answers POST /pks/hashquery.
func (h *Handler) serveHashQuery(w http.ResponseWriter, r *http.Request) {
	limit := maxHashQueryBody(h.opts.MaxHashQueryDigests)
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
	digests, err := parseHashQuery(body, h.opts.MaxHashQueryDigests)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	var keys []identity.StoredKey
	if len(digests) > 0 {
		// Sizes only: the packets are streamed once it is known what fits.
		keys, _, err = h.store.FindKeys(r.Context(), identity.KeyQuery{Digests: digests, InlineBytes: -1, NoUserIDs: true})
		if err != nil {
			if r.Context().Err() == nil {
				h.log.Error("hkp: hashquery", "digests", len(digests), "err", err)
			}
			httpError(w, http.StatusServiceUnavailable, "the key store is not answering; try again later")
			return
		}
	}
	n := hashQueryFit(keys, h.opts.MaxHashQueryResponse)
	if n < len(keys) {
		h.log.Info("hkp: hashquery answer cut at the size cap", "asked", len(digests), "found", len(keys), "sent", n)
	}
	keys = keys[:n]
	h.metrics.hashQueryKeys(n)
	w.Header().Set("Content-Type", "application/pgp-keys")
	w.Header().Set("Content-Length", strconv.Itoa(hashQueryLength(keys)))
	w.Header().Set("Cache-Control", "no-store")
	if err := writeHashQueryResponse(r.Context(), w, keys, h.store.StreamPackets); err != nil {
		if r.Context().Err() == nil {
			h.log.Warn("hkp: hashquery answer cut off", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// writeHashQueryResponse writes the response for keys (their Size set):
// the count, each key's length and packets as stream reads them one at a
// time, then CRLF. A key that changed size or went away since its size
// was read fails the response (its length is already promised).
func writeHashQueryResponse(ctx context.Context, w io.Writer, keys []identity.StoredKey, stream func(ctx context.Context, fps [][]byte, fn func(fp, packets []byte) error) error) error {
	fps := make([][]byte, len(keys))
	for i := range keys {
		fps[i] = keys[i].Fingerprint
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(keys)))); err != nil {
		return err
	}
	i := 0
	err := stream(ctx, fps, func(fp, packets []byte) error {
		if i >= len(keys) || !bytes.Equal(keys[i].Fingerprint, fp) {
			return fmt.Errorf("a key went away or changed during the answer (at %X)", fp)
		}
		if len(packets) != keys[i].Size {
			return fmt.Errorf("key %X changed during the answer", fp)
		}
		i++
		if _, err := w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(packets)))); err != nil {
			return err
		}
		_, err := w.Write(packets)
		return err
	})
	if err != nil {
		return err
	}
	if i != len(keys) {
		return fmt.Errorf("%d of %d keys went away during the answer", len(keys)-i, len(keys))
	}
	_, err = io.WriteString(w, "\r\n")
	return err
}
