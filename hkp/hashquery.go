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

// appendHashQueryResponse appends the response for keys to dst, leaving
// out keys once the packets total more than maxBytes; it returns the
// number of keys written.
func appendHashQueryResponse(dst []byte, keys []identity.StoredKey, maxBytes int) ([]byte, int) {
	n, total := 0, 0
	for i := range keys {
		if total+len(keys[i].Packets) > maxBytes {
			break
		}
		total += len(keys[i].Packets)
		n++
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	for i := 0; i < n; i++ {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(keys[i].Packets)))
		dst = append(dst, keys[i].Packets...)
	}
	return append(dst, '\r', '\n'), n
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
		keys, err = h.store.KeysByDigest(r.Context(), digests)
		if err != nil {
			if r.Context().Err() == nil {
				h.log.Error("hkp: hashquery", "digests", len(digests), "err", err)
			}
			httpError(w, http.StatusServiceUnavailable, "the key store is not answering; try again later")
			return
		}
	}
	size := 6
	for i := range keys {
		size += 4 + len(keys[i].Packets)
	}
	out, n := appendHashQueryResponse(make([]byte, 0, min(size, h.opts.MaxHashQueryResponse+4*len(keys)+6)), keys, h.opts.MaxHashQueryResponse)
	if n < len(keys) {
		h.log.Info("hkp: hashquery answer cut at the size cap", "asked", len(digests), "found", len(keys), "sent", n)
	}
	h.metrics.hashQueryKeys(n)
	w.Header().Set("Content-Type", "application/pgp-keys")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Header().Set("Cache-Control", "no-store")
	w.Write(out)
}
