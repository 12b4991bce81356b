// upload.go: POST upload, request-verify and request-withdraw, and the
// answer they share: {key_fpr, status, token}.

package vks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/pgp"
)

// The status values of an address, as keys.openpgp.org names them
// (package maillink's).
const (
	StatusUnpublished = maillink.StatusUnpublished // not verified: not served by email
	StatusPublished   = maillink.StatusPublished   // verified by mail
	StatusRevoked     = maillink.StatusRevoked     // the user ID is revoked
	StatusPending     = maillink.StatusPending     // a mail went out, its link not yet followed
)

// Response is the answer of upload, request-verify and request-withdraw.
type Response struct {
	// KeyFpr is the key's fingerprint, upper-case hex.
	KeyFpr string `json:"key_fpr"`
	// Status maps each address of the key's user IDs to its status.
	Status map[string]string `json:"status"`
	// Token lets the uploader ask for mails about the key (for
	// UploadTokenTTL).
	Token string `json:"token"`
}

// serveUpload answers POST /vks/v1/upload, {"keytext": "..."}: one key,
// armored (or binary in the string), through the key policy.
//
// Before reading the body, it answers 429 past the client's upload budget;
// once the size-capped body is read (a client sending it slowly holds no
// upload slot meanwhile), 503 when the upload path admits no more requests
// at once (both with Retry-After).
func (h *Handler) serveUpload(w http.ResponseWriter, r *http.Request) {
	if !h.opts.UploadLimit.Allow(w, r) {
		jsonError(w, http.StatusTooManyRequests, "too many uploads from this address: try again later")
		return
	}
	var req struct {
		Keytext string `json:"keytext"`
	}
	if !h.readJSON(w, r, MaxUploadSize, &req) {
		return
	}
	if strings.TrimSpace(req.Keytext) == "" {
		jsonError(w, http.StatusBadRequest, "no keytext: send {\"keytext\": \"<armored public key>\"}")
		return
	}
	adm, ok := h.uploads.Admit(r.Context())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		jsonError(w, http.StatusServiceUnavailable, "too many uploads in progress: try again in a few seconds")
		return
	}
	defer adm.Done()
	ks, err := pgp.ReadKeys(strings.NewReader(req.Keytext))
	switch {
	case err != nil && len(ks) == 0:
		jsonError(w, http.StatusBadRequest, "no OpenPGP public key could be read: "+strings.TrimPrefix(err.Error(), "pgp: "))
		return
	case len(ks) == 0:
		jsonError(w, http.StatusBadRequest, "no OpenPGP public key found in keytext")
		return
	case len(ks) > 1:
		jsonError(w, http.StatusBadRequest, "keytext holds more than one key: upload one at a time")
		return
	}
	up, err := h.uploads.Upload(r.Context(), ks[0], keys.UploadOptions{Admission: adm})
	var rej *keys.Rejection
	switch {
	case errors.As(err, &rej) && rej.ByUploadPolicy:
		jsonError(w, http.StatusForbidden, "upload refused: "+rej.Reason)
		return
	case errors.As(err, &rej):
		jsonError(w, http.StatusBadRequest, "key rejected: "+rej.Reason)
		return
	case err != nil:
		if r.Context().Err() == nil {
			h.log.Error("vks: upload", "err", err)
		}
		jsonError(w, http.StatusServiceUnavailable, "the key store failed; try again later")
		return
	}
	if up.Change == keys.Blocked {
		jsonError(w, http.StatusForbidden, "upload refused: "+up.Change.Reason())
		return
	}
	applied := up.Key
	h.log.Info("vks: upload", "fingerprint", identity.PGPFactor(applied.Fingerprint()).Value)
	resp, _, err := h.response(r, applied.Fingerprint())
	if err != nil {
		h.failJSON(w, r, "upload", err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// mailRequest is the body of request-verify and request-withdraw.
type mailRequest struct {
	Token     string   `json:"token"`
	Addresses []string `json:"addresses"`
	// Locale is accepted as keys.openpgp.org's clients send it; mails
	// are in English.
	Locale []string `json:"locale"`
}

// serveRequestVerify answers POST /vks/v1/request-verify: a mail to each
// named address of the uploaded key, unless it is verified already or a
// mail for it went out within identity.EmailWindow (both: no mail; a
// link still out after the window may be mailed again). An address that
// had the most mails the server sends one address an hour, for any keys,
// stops the request with 429 (identity.CodeRecipientCapped).
func (h *Handler) serveRequestVerify(w http.ResponseWriter, r *http.Request) {
	h.serveMailRequest(w, r, identity.EmailVerify)
}

// serveRequestWithdraw answers POST /vks/v1/request-withdraw (a Kith
// extension, same body): a mail to each named address that is verified
// for the key, whose link withdraws it. The answer is the same whether or
// not a mail went out.
func (h *Handler) serveRequestWithdraw(w http.ResponseWriter, r *http.Request) {
	h.serveMailRequest(w, r, identity.EmailWithdraw)
}

func (h *Handler) serveMailRequest(w http.ResponseWriter, r *http.Request, action identity.EmailAction) {
	if !h.limit.Allow(w, r) {
		jsonError(w, http.StatusTooManyRequests, "too many requests from this address: wait a minute")
		return
	}
	var req mailRequest
	if !h.readJSON(w, r, MaxRequestSize, &req) {
		return
	}
	fp, err := h.checkUploadToken(req.Token, h.opts.Now())
	if err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(req.Addresses) == 0 {
		jsonError(w, http.StatusBadRequest, "no addresses: name the key's addresses to mail")
		return
	}
	if len(req.Addresses) > MaxAddresses {
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("at most %d addresses a request", MaxAddresses))
		return
	}
	resp, stored, err := h.response(r, fp)
	if err != nil {
		h.failJSON(w, r, "request", err)
		return
	}
	if stored == nil {
		jsonError(w, http.StatusNotFound, "the key is no longer stored: upload it again")
		return
	}
	// Every address must be one of the key's, before any mail goes out.
	var addrs []string
	for _, a := range req.Addresses {
		addr, ok := parseAddress(a)
		if !ok {
			jsonError(w, http.StatusBadRequest, fmt.Sprintf("%q is not an email address", clip(a)))
			return
		}
		if _, ok := resp.Status[addr]; !ok {
			jsonError(w, http.StatusBadRequest, fmt.Sprintf("%s is not an address of key %s", addr, resp.KeyFpr))
			return
		}
		if !slices.Contains(addrs, addr) {
			addrs = append(addrs, addr)
		}
	}
	key := identity.PGPFactor(fp)
	for _, addr := range addrs {
		if !maillink.Mailable(action, resp.Status[addr]) {
			continue // published or revoked (verify), not published (withdraw): nothing to mail
		}
		err := h.emails.RequestEmail(r.Context(), identity.EmailRequest{Action: action, Key: key,
			Email: identity.EmailFactor(addr), Send: h.mailer.Sender(action, key, addr)})
		switch identity.CodeOf(err) {
		case "":
			if err != nil {
				h.failJSON(w, r, "request", err)
				return
			}
			if action == identity.EmailVerify {
				resp.Status[addr] = StatusPending
			}
		case identity.CodeRateLimited:
			if action == identity.EmailVerify {
				resp.Status[addr] = StatusPending
			}
		case identity.CodeRecipientCapped:
			// The address had its mails for the hour, whoever asked: say
			// no more than that, and when to ask again at the latest.
			w.Header().Set("Retry-After", strconv.Itoa(int(identity.RecipientWindow.Seconds())))
			jsonError(w, http.StatusTooManyRequests, addr+": "+err.Error())
			return
		case identity.CodeMailUnavailable:
			h.log.Warn("vks: mail not sent", "err", err)
			jsonError(w, http.StatusServiceUnavailable, "the mail server is unavailable: nothing was sent to "+addr+"; try again later")
			return
		case identity.CodeAddressNotInKey, identity.CodeNotVerified:
			// The key changed since the answer was read: leave it.
		default:
			jsonError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// response builds the answer for the stored key with fingerprint fp, and
// returns the stored key (nil when none is stored).
func (h *Handler) response(r *http.Request, fp []byte) (Response, *keys.Stored, error) {
	resp := Response{KeyFpr: identity.PGPFactor(fp).Value, Status: map[string]string{},
		Token: h.uploadToken(fp, h.opts.Now())}
	stored, _, err := h.keys.FindKeys(r.Context(), keys.Query{Fingerprints: [][]byte{fp}, Limit: 1})
	if err != nil {
		return resp, nil, err
	}
	if len(stored) == 0 || !bytes.Equal(stored[0].Fingerprint, fp) {
		return resp, nil, nil
	}
	st, err := maillink.Statuses(r.Context(), &stored[0], h.verified, h.emails)
	if err != nil {
		return resp, nil, err
	}
	resp.Status = st
	return resp, &stored[0], nil
}

// readJSON decodes the request's JSON body into v, answering 400 or 413
// itself when it cannot.
func (h *Handler) readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			jsonError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request larger than %d bytes", limit))
			return false
		}
		jsonError(w, http.StatusBadRequest, "could not read the request body")
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		jsonError(w, http.StatusBadRequest, "the body is not the JSON object this endpoint takes")
		return false
	}
	return true
}

func (h *Handler) failJSON(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() == nil {
		h.log.Error("vks: "+what, "err", err)
	}
	jsonError(w, http.StatusInternalServerError, "internal error: try again later")
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
