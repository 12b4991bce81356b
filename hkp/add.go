// add.go: POST /pks/add: read every key of the upload, send each through
// the upload path (identity/keys.Service), and say per key what happened.

package hkp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// AddResult is what happened to one key of an upload.
type AddResult struct {
	// Fingerprint is the key's primary fingerprint in upper-case hex, or
	// empty when the key could not be read far enough to have one.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Result is "inserted", "updated", "unchanged", "reduced" (stored
	// only in part: see Reason), "rejected" or "error" (the store failed;
	// try again).
	Result string `json:"result"`
	// Reason says why a key was rejected or reduced (or the store failed).
	Reason string `json:"reason,omitempty"`
	// Dropped counts what the policy left out of an accepted key, by
	// reason (e.g. "unbound-user-id": 1 for a grafted user ID).
	Dropped map[string]int `json:"dropped,omitempty"`
}

// AddResponse is the JSON answer of /pks/add (Accept: application/json
// or options=mr).
type AddResponse struct {
	Keys      []AddResult `json:"keys"`
	Inserted  int         `json:"inserted"`
	Updated   int         `json:"updated"`
	Unchanged int         `json:"unchanged"`
	// Reduced counts keys stored only in part: tombstones (only their
	// revocations merge) and keys with blocked packets.
	Reduced  int `json:"reduced"`
	Rejected int `json:"rejected"`
	Errors   int `json:"errors"`
}

// Results of one key.
const (
	resultRejected = "rejected"
	resultError    = "error"
)

// serveAdd answers POST /pks/add. Before the body is read, it answers
// 429 past the client's upload budget; once the size-capped body is read
// (a client sending it slowly holds no upload slot meanwhile), 503 when
// the upload path admits no more requests at once (both with
// Retry-After).
func (h *Handler) serveAdd(w http.ResponseWriter, r *http.Request) {
	if !h.opts.UploadLimit.Allow(w, r) {
		h.metrics.added("rate_limited")
		httpError(w, http.StatusTooManyRequests, "too many uploads from this address: try again later")
		return
	}
	data, asJSON, status, msg := h.readUpload(w, r)
	if status != 0 {
		h.metrics.added("bad_request")
		httpError(w, status, msg)
		return
	}
	adm, ok := h.uploads.Admit(r.Context())
	if !ok {
		h.metrics.added("busy")
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		httpError(w, http.StatusServiceUnavailable, "too many uploads in progress: try again in a few seconds")
		return
	}
	defer adm.Done()
	resp := h.addKeys(r, adm, data)
	code := http.StatusOK
	switch {
	case resp.Inserted+resp.Updated+resp.Unchanged+resp.Reduced > 0:
	case resp.Errors > 0:
		code = http.StatusServiceUnavailable
	default:
		code = http.StatusUnprocessableEntity
	}
	h.log.Info("hkp: add", "keys", len(resp.Keys), "inserted", resp.Inserted, "updated", resp.Updated,
		"unchanged", resp.Unchanged, "rejected", resp.Rejected, "errors", resp.Errors)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	writeAddText(w, resp)
}

// readUpload returns the key data of the request and whether the answer
// is to be JSON, or an error status and message.
func (h *Handler) readUpload(w http.ResponseWriter, r *http.Request) (data []byte, asJSON bool, status int, msg string) {
	asJSON = wantsJSON(r.Header.Get("Accept")) || hasMR(r.URL.Query().Get("options"))
	if r.ContentLength > h.opts.MaxBodySize {
		return nil, asJSON, http.StatusRequestEntityTooLarge, fmt.Sprintf("upload larger than %d bytes", h.opts.MaxBodySize)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodySize))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, asJSON, http.StatusRequestEntityTooLarge, fmt.Sprintf("upload larger than %d bytes", h.opts.MaxBodySize)
		}
		return nil, asJSON, http.StatusBadRequest, "could not read the request body"
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case ct == "application/pgp-keys" || ct == "application/octet-stream" ||
		(ct == "" && !bytes.HasPrefix(body, []byte("keytext="))):
		data = body
	case ct == "multipart/form-data":
		mr, err := multipartReader(body, params["boundary"])
		if err != nil {
			return nil, asJSON, http.StatusBadRequest, "malformed multipart form: " + err.Error()
		}
		form, err := mr.ReadForm(h.opts.MaxBodySize)
		if err != nil {
			return nil, asJSON, http.StatusBadRequest, "malformed multipart form"
		}
		defer form.RemoveAll()
		if v := form.Value["options"]; len(v) > 0 && hasMR(v[0]) {
			asJSON = true
		}
		if v := form.Value["keytext"]; len(v) > 0 {
			data = []byte(v[0])
		} else if f := form.File["keytext"]; len(f) > 0 {
			fh, err := f[0].Open()
			if err != nil {
				return nil, asJSON, http.StatusBadRequest, "malformed multipart form"
			}
			data, _ = io.ReadAll(fh)
			fh.Close()
		}
	default: // application/x-www-form-urlencoded, and anything that says keytext=
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, asJSON, http.StatusBadRequest, "malformed form: " + err.Error()
		}
		if hasMR(form.Get("options")) {
			asJSON = true
		}
		data = []byte(form.Get("keytext"))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, asJSON, http.StatusBadRequest, "no keys: send the form field keytext (ASCII-armored keys) or an application/pgp-keys body"
	}
	return data, asJSON, 0, ""
}

func wantsJSON(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		if mt == "application/json" {
			return true
		}
	}
	return false
}

func hasMR(options string) bool {
	for _, o := range strings.Split(options, ",") {
		if strings.EqualFold(strings.TrimSpace(o), "mr") {
			return true
		}
	}
	return false
}

// addKeys reads, checks and stores every key in data, as one admitted
// request.
func (h *Handler) addKeys(r *http.Request, adm *keys.Admission, data []byte) AddResponse {
	ctx := r.Context()
	var resp AddResponse
	rd := pgp.NewReader(bytes.NewReader(data))
	for {
		k, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *pgp.ReadError
			if errors.As(err, &re) {
				resp.add(AddResult{Result: resultRejected, Reason: fmt.Sprintf("key %d unreadable: %v", re.Index+1, re.Err)})
				continue
			}
			// The rest of the input is junk (or an error that ends reading).
			resp.add(AddResult{Result: resultRejected, Reason: "unreadable input: " + strings.TrimPrefix(err.Error(), "pgp: ")})
			break
		}
		resp.add(h.addKey(r, adm, k))
		if ctx.Err() != nil {
			break
		}
	}
	if len(resp.Keys) == 0 {
		resp.add(AddResult{Result: resultRejected, Reason: "no OpenPGP public key found in the upload"})
	}
	for _, k := range resp.Keys {
		h.metrics.added(k.Result)
	}
	return resp
}

// addKey sends k through the upload path and says what became of it.
func (h *Handler) addKey(r *http.Request, adm *keys.Admission, k *pgp.Key) AddResult {
	res := AddResult{}
	if fp := k.Fingerprint(); fp != nil {
		res.Fingerprint = strings.ToUpper(hex.EncodeToString(fp))
	}
	up, err := h.uploads.Upload(r.Context(), k, keys.UploadOptions{Admission: adm})
	if up.Key != nil {
		res.Fingerprint = strings.ToUpper(hex.EncodeToString(up.Key.Fingerprint()))
	}
	var rej *keys.Rejection
	switch {
	case errors.As(err, &rej):
		res.Result, res.Reason = resultRejected, rej.Reason
		return res
	case errors.Is(err, keys.ErrUploadPolicyFailed):
		h.log.Error("hkp: add: upload policy", "fingerprint", res.Fingerprint, "err", err)
		res.Result, res.Reason = resultError, "the identity store failed; try again later"
		return res
	case err != nil:
		if r.Context().Err() == nil {
			h.log.Error("hkp: add: store", "fingerprint", res.Fingerprint, "err", err)
		}
		res.Result = resultError
		res.Reason = "the key store failed; try again later"
		return res
	}
	for _, reason := range pgp.DropReasons() {
		if n := up.Report.Count(reason); n > 0 {
			if res.Dropped == nil {
				res.Dropped = map[string]int{}
			}
			res.Dropped[reason.String()] = n
		}
	}
	// The upload path has told this Handler (KeysChanged) before it
	// returned: the answers the change outdates on this node are gone.
	res.Result = up.Change.String()
	switch up.Change {
	case keys.Blocked:
		res.Result, res.Reason = resultRejected, up.Change.Reason()
	case keys.Reduced:
		res.Reason = up.Change.Reason()
	}
	return res
}

func (r *AddResponse) add(res AddResult) {
	r.Keys = append(r.Keys, res)
	switch res.Result {
	case keys.Inserted.String():
		r.Inserted++
	case keys.Updated.String():
		r.Updated++
	case keys.Unchanged.String():
		r.Unchanged++
	case keys.Reduced.String():
		r.Reduced++
	case resultError:
		r.Errors++
	default:
		r.Rejected++
	}
}

// writeAddText writes the answer for people: one line per key.
func writeAddText(w io.Writer, resp AddResponse) {
	fmt.Fprintf(w, "%d inserted, %d updated, %d unchanged, %d rejected", resp.Inserted, resp.Updated, resp.Unchanged, resp.Rejected)
	if resp.Reduced > 0 {
		fmt.Fprintf(w, ", %d reduced", resp.Reduced)
	}
	if resp.Errors > 0 {
		fmt.Fprintf(w, ", %d failed", resp.Errors)
	}
	fmt.Fprintln(w)
	for _, k := range resp.Keys {
		fp := k.Fingerprint
		if fp == "" {
			fp = "-"
		}
		line := fmt.Sprintf("%-10s %s", k.Result, fp)
		if k.Reason != "" {
			line += ": " + k.Reason
		}
		if len(k.Dropped) > 0 {
			var parts []string
			for _, reason := range pgp.DropReasons() {
				if n := k.Dropped[reason.String()]; n > 0 {
					parts = append(parts, fmt.Sprintf("%s=%d", reason, n))
				}
			}
			line += " (dropped " + strings.Join(parts, " ") + ")"
		}
		fmt.Fprintln(w, line)
	}
}

func multipartReader(body []byte, boundary string) (*multipart.Reader, error) {
	if boundary == "" {
		return nil, errors.New("no boundary")
	}
	return multipart.NewReader(bytes.NewReader(body), boundary), nil
}
