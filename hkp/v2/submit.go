// submit.go: POST /pks/v2/certs, submission (the draft's sections 5.2.4,
// 5.2.5 and 7.2), through the one upload path.

package v2

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
	"strconv"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// acceptedSubmissions are the body types POST /pks/v2/certs reads, as
// its OPTIONS answer names them (section 5.2.6): binary keys (the
// draft's type, and application/pgp-keys with or without armor), and the
// advanced submission's multipart form with a keytext part (5.2.5).
var acceptedSubmissions = []string{MediaType, "application/pgp-keys", "multipart/form-data"}

// Submitted is one certificate of a submission's answer: its version and
// fingerprint (lower-case hex), which section 7.2 requires, and why, for
// one not stored as given.
type Submitted struct {
	Version     int    `json:"version"`
	Fingerprint string `json:"fingerprint"`
	Comment     string `json:"comment,omitempty"`
}

// Submission is the JSON answer of POST /pks/v2/certs (section 7.2):
// every certificate read, in the array that says what became of it. Kith
// deletes nothing on submission, so Deleted is always empty.
type Submission struct {
	// Inserted: new to this server.
	Inserted []Submitted `json:"inserted"`
	// Updated: known, and the submission added to it (or, with a
	// comment, the server kept only what it may of it).
	Updated []Submitted `json:"updated"`
	Deleted []Submitted `json:"deleted"`
	// Ignored: known, and the submission added nothing.
	Ignored []Submitted `json:"ignored"`
	// Invalid: refused by the key policy, the upload policy or a block;
	// the comment says why.
	Invalid []Submitted `json:"invalid"`
}

// serveSubmit answers POST /pks/v2/certs. Before the body is read it
// answers 429 past the client's upload budget, and once the size-capped
// body is read (a client sending it slowly holds no upload slot
// meanwhile) 503 when the upload path admits no more requests at once
// (both with Retry-After), as every upload route does. It answers 413 for a body over Options.MaxBodySize,
// 415 for a body type it does not read, 422 when no key can be read
// (section 4.2: "not well formed"), 503 when the store failed, and
// otherwise 200 with a Submission.
func (h *Handler) serveSubmit(w http.ResponseWriter, r *http.Request) {
	if !h.opts.UploadLimit.Allow(w, r) {
		Error(w, http.StatusTooManyRequests, "too many uploads from this address: try again later")
		return
	}
	data, code, msg := h.readSubmission(w, r)
	if code != 0 {
		Error(w, code, msg)
		return
	}
	adm, ok := h.opts.Uploads.Admit(r.Context())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		Error(w, http.StatusServiceUnavailable, "too many uploads in progress: try again in a few seconds")
		return
	}
	defer adm.Done()
	var out Submission
	read, failed := 0, false
	rd := pgp.NewReader(bytes.NewReader(data))
	for r.Context().Err() == nil {
		k, err := rd.Next()
		if err == io.EOF {
			break
		}
		var re *pgp.ReadError
		if errors.As(err, &re) {
			// A key too broken to have a fingerprint has no place in the
			// answer (section 7.2 requires one of every entry).
			continue
		}
		if err != nil {
			break // the rest of the input is junk
		}
		read++
		if !h.submitKey(r, adm, k, &out) {
			failed = true
		}
	}
	switch {
	case read == 0:
		Error(w, http.StatusUnprocessableEntity, "no OpenPGP certificate could be read from the submission")
		return
	case failed:
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		writeSubmission(w, http.StatusServiceUnavailable, out)
		return
	}
	h.log.Info("hkp v2: submission", "inserted", len(out.Inserted), "updated", len(out.Updated),
		"ignored", len(out.Ignored), "invalid", len(out.Invalid))
	writeSubmission(w, http.StatusOK, out)
}

// submitKey sends k through the upload path and files it in out; it
// returns false when the store failed.
func (h *Handler) submitKey(r *http.Request, adm *keys.Admission, k *pgp.Key, out *Submission) bool {
	fp := k.Fingerprint()
	s := Submitted{Version: fingerprintVersion(fp), Fingerprint: hex.EncodeToString(fp)}
	up, err := h.opts.Uploads.Upload(r.Context(), k, keys.UploadOptions{Admission: adm})
	var rej *keys.Rejection
	switch {
	case errors.As(err, &rej):
		s.Comment = rej.Reason
		out.Invalid = append(out.Invalid, s)
		return true
	case err != nil:
		if r.Context().Err() == nil {
			h.log.Error("hkp v2: submission", "fingerprint", s.Fingerprint, "err", err)
		}
		return false
	}
	switch up.Change {
	case keys.Inserted:
		out.Inserted = append(out.Inserted, s)
	case keys.Updated:
		out.Updated = append(out.Updated, s)
	case keys.Reduced:
		s.Comment = up.Change.Reason()
		out.Updated = append(out.Updated, s)
	case keys.Blocked:
		s.Comment = up.Change.Reason()
		out.Invalid = append(out.Invalid, s)
	default:
		s.Comment = "this server has the certificate already, with everything submitted"
		out.Ignored = append(out.Ignored, s)
	}
	return true
}

// fingerprintVersion is the key version a fingerprint of that length
// belongs to (reading it from the key itself would check its signatures
// outside the request's budget).
func fingerprintVersion(fp []byte) int {
	switch len(fp) {
	case 16:
		return 3
	case 32:
		return 6
	}
	return 4
}

// readSubmission returns the key data of the request, or an error status
// and message.
func (h *Handler) readSubmission(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	tooLarge := fmt.Sprintf("submission larger than %d bytes", h.opts.MaxBodySize)
	if r.ContentLength > h.opts.MaxBodySize {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodySize))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	case err != nil:
		return nil, http.StatusBadRequest, "could not read the request body"
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "", MediaType, "application/pgp-keys", "application/octet-stream":
		return body, 0, ""
	case "multipart/form-data":
		data, err := keytext(body, params["boundary"], h.opts.MaxBodySize)
		if err != nil {
			return nil, http.StatusUnprocessableEntity, "advanced submission: " + err.Error()
		}
		return data, 0, ""
	}
	return nil, http.StatusUnsupportedMediaType, "send the certificates as " + MediaType + " (binary) or a multipart form with a keytext part"
}

// keytext returns the keytext part of a multipart form (section 5.2.5).
func keytext(body []byte, boundary string, maxSize int64) ([]byte, error) {
	if boundary == "" {
		return nil, errors.New("the multipart form has no boundary")
	}
	form, err := multipart.NewReader(bytes.NewReader(body), boundary).ReadForm(maxSize)
	if err != nil {
		return nil, errors.New("malformed multipart form")
	}
	defer form.RemoveAll()
	if v := form.Value["keytext"]; len(v) > 0 {
		return []byte(v[0]), nil
	}
	if f := form.File["keytext"]; len(f) > 0 {
		fh, err := f[0].Open()
		if err != nil {
			return nil, errors.New("malformed multipart form")
		}
		defer fh.Close()
		return io.ReadAll(fh)
	}
	return nil, errors.New("the form has no keytext part")
}

func writeSubmission(w http.ResponseWriter, code int, s Submission) {
	for _, a := range []*[]Submitted{&s.Inserted, &s.Updated, &s.Deleted, &s.Ignored, &s.Invalid} {
		if *a == nil {
			*a = []Submitted{}
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s)
}
