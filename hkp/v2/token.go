// token.go: POST /pks/v2/sendtoken and PUT /pks/v2/canonical/{identity},
// the draft's token-authenticated path to an authoritative key, mapped
// onto Kith's mailed links.
//
// sendtoken asks the server to mail a verification link for one address
// of a stored key: identity.Service's RequestEmail, with its window, its
// per-recipient cap and its refusals, and package maillink's mail, the
// same one VKS and the pages send. The token is the link's secret (its
// last path segment). Presenting it with PUT canonical is following the
// link: identity.Service's ConfirmEmail uses it up and appends the same
// email.verified record, and only then is the key authoritative for the
// address. Nothing else makes a key canonical: a token proves only what
// following its link proves, for the key and address it was mailed for.
//
// The draft names both operations; the sendtoken body (TokenRequest) and
// the bearer scheme of PUT canonical are Kith's reading, to be checked
// against the draft's text wherever it fixes them.

package v2

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/pgp"
)

// Emails is what sendtoken and PUT canonical need of the identity service
// (*identity.Service is one): the calls VKS's request-verify and the
// pages' confirm link make, so that a token obeys every rule a mailed
// link does.
type Emails interface {
	RequestEmail(ctx context.Context, req identity.EmailRequest) error
	PendingEmails(ctx context.Context, key identity.Factor, emails []string) ([]string, error)
	EmailLink(ctx context.Context, key identity.Factor, token string) (identity.EmailConfirmation, error)
	ConfirmEmail(ctx context.Context, key identity.Factor, token string) (identity.EmailConfirmation, error)
}

// MaxTokenRequestSize caps a sendtoken body.
const MaxTokenRequestSize = 16 << 10

// TokenRequest is the JSON body of POST /pks/v2/sendtoken: the key (its
// fingerprint, hex, 40 digits for v4 or 64 for v6) and the address of
// one of its user IDs to mail.
type TokenRequest struct {
	Fingerprint string `json:"fingerprint"`
	Identity    string `json:"identity"`
}

// TokenAnswer is the JSON answer of POST /pks/v2/sendtoken. Status is
// package maillink's: "pending" when a link is out for the address (just
// mailed, or mailed less than identity.EmailWindow ago, and then no
// other mail went out), "published" when the address is verified for the
// key already (nothing mailed: the key is authoritative for it).
type TokenAnswer struct {
	Fingerprint string `json:"fingerprint"`
	Identity    string `json:"identity"`
	Status      string `json:"status"`
}

// serveSendToken answers POST /pks/v2/sendtoken. Past the client's mail
// request budget it answers 429 before reading the body; then 413 for a
// body over MaxTokenRequestSize, 400 for a body that is not a
// TokenRequest, 404 when the key is not stored, 422 when no valid user ID
// of the key carries the address, 429 with Retry-After when the address
// had the most mails the server sends one address an hour, 503 when the
// mail server failed (nothing recorded), and otherwise 200 with a
// TokenAnswer. It logs no address and no token.
func (h *Handler) serveSendToken(w http.ResponseWriter, r *http.Request) {
	if !h.opts.MailRequestLimit.Allow(w, r) {
		Error(w, http.StatusTooManyRequests, "too many mail requests from this address: wait a minute")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxTokenRequestSize))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		Error(w, http.StatusRequestEntityTooLarge, "request larger than "+strconv.Itoa(MaxTokenRequestSize)+" bytes")
		return
	case err != nil:
		Error(w, http.StatusBadRequest, "could not read the request body")
		return
	}
	var req TokenRequest
	if err := json.Unmarshal(body, &req); err != nil {
		Error(w, http.StatusBadRequest, `send {"fingerprint": "<hex>", "identity": "<address>"} as JSON`)
		return
	}
	fp, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(req.Fingerprint, "0x"), "0X"))
	if err != nil || (len(fp) != 20 && len(fp) != 32) {
		Error(w, http.StatusBadRequest, "fingerprint: 40 (v4) or 64 (v6) hexadecimal digits")
		return
	}
	addr := tokenAddress(req.Identity)
	if addr == "" {
		Error(w, http.StatusBadRequest, "identity: an email address")
		return
	}
	stored, _, err := h.keys.FindKeys(r.Context(), keys.Query{Fingerprints: [][]byte{fp}, Limit: 1})
	if err != nil {
		h.fail(w, r, "find key", err)
		return
	}
	if len(stored) == 0 || !bytes.Equal(stored[0].Fingerprint, fp) {
		Error(w, http.StatusNotFound, "no key with this fingerprint is stored: submit it first (POST /pks/v2/certs)")
		return
	}
	st, err := maillink.Statuses(r.Context(), &stored[0], h.verified, h.opts.Emails)
	if err != nil {
		h.fail(w, r, "statuses", err)
		return
	}
	key := identity.PGPFactor(fp)
	ans := TokenAnswer{Fingerprint: hex.EncodeToString(fp), Identity: addr, Status: st[addr]}
	switch {
	case ans.Status == maillink.StatusPublished:
		writeJSON(w, http.StatusOK, ans)
		return
	case !maillink.Mailable(identity.EmailVerify, ans.Status):
		// Not an address of the key, or only of revoked user IDs.
		Error(w, http.StatusUnprocessableEntity, "the key has no valid user ID with this address")
		return
	}
	err = h.opts.Emails.RequestEmail(r.Context(), identity.EmailRequest{Action: identity.EmailVerify, Key: key,
		Email: identity.EmailFactor(addr), Send: h.opts.Mailer.Sender(identity.EmailVerify, key, addr)})
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.fail(w, r, "request email", err)
			return
		}
	case identity.CodeRateLimited:
		// A link went out within the window: that one is the token.
	case identity.CodeRecipientCapped:
		w.Header().Set("Retry-After", strconv.Itoa(int(identity.RecipientWindow.Seconds())))
		Error(w, http.StatusTooManyRequests, "this address has had the most mails this server sends an hour: ask again later")
		return
	case identity.CodeMailUnavailable:
		h.log.Warn("hkp v2: sendtoken: mail not sent", "err", err)
		Error(w, http.StatusServiceUnavailable, "the mail server is unavailable: nothing was sent; try again later")
		return
	case identity.CodeAddressNotInKey:
		Error(w, http.StatusUnprocessableEntity, "the key has no valid user ID with this address")
		return
	default:
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	ans.Status = maillink.StatusPending
	writeJSON(w, http.StatusOK, ans)
}

// serveCanonicalPut answers PUT /pks/v2/canonical/{identity}: the body is
// the key (one certificate, as a submission's), the Authorization header
// "Bearer TOKEN" carries the token sendtoken mailed (the bare token, or
// the whole link, whose last path segment it is). The token must be an
// unused, unexpired verify link of this server for this key and this
// address; then the key goes through the one upload path and the token is
// used up exactly as following the link uses it up.
//
// It answers 401 (with WWW-Authenticate) without a bearer token; 429
// past the client's upload budget; 400 for an identity that is not an
// address; 413, 415 or 422 for a body as POST /pks/v2/certs does, and
// 422 for a body with other than one key; 403 for a token that is
// unknown, used, expired, or for another key, address or action (nothing
// is stored or used up); 422 when the key, as stored, no longer carries
// the address in a valid user ID; 503 when the upload path is busy or
// the store failed; otherwise 200 with a Submission for the key. It logs
// no address and no token.
func (h *Handler) serveCanonicalPut(w http.ResponseWriter, r *http.Request) {
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hkp", error="invalid_request"`)
		Error(w, http.StatusUnauthorized, "send the token mailed by sendtoken as \"Authorization: Bearer <token>\"")
		return
	}
	if !h.opts.UploadLimit.Allow(w, r) {
		Error(w, http.StatusTooManyRequests, "too many uploads from this address: try again later")
		return
	}
	addr := tokenAddress(r.PathValue("identity"))
	if addr == "" {
		Error(w, http.StatusBadRequest, "only an email address can have a canonical key")
		return
	}
	data, code, msg := h.readSubmission(w, r)
	if code != 0 {
		Error(w, code, msg)
		return
	}
	ks, err := pgp.ReadKeys(bytes.NewReader(data))
	if len(ks) != 1 || err != nil {
		Error(w, http.StatusUnprocessableEntity, "the body must hold exactly one readable OpenPGP certificate")
		return
	}
	key := identity.PGPFactor(ks[0].Fingerprint())
	// Read the link before anything is stored or used up: a token for
	// another address, key or action is refused whole.
	link, err := h.opts.Emails.EmailLink(r.Context(), key, token)
	if err == nil && (link.Action != identity.EmailVerify || !link.Email.Same(identity.EmailFactor(addr))) {
		err = identity.Refuse(identity.CodeWrongToken, "this token is not a verify link for this address")
	}
	if h.tokenRefused(w, r, err) {
		return
	}
	adm, ok := h.opts.Uploads.Admit(r.Context())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		Error(w, http.StatusServiceUnavailable, "too many uploads in progress: try again in a few seconds")
		return
	}
	var out Submission
	stored := h.submitKey(r, adm, ks[0], &out)
	adm.Done()
	switch {
	case !stored:
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		Error(w, http.StatusServiceUnavailable, "the key store failed: nothing was used up; try again later")
		return
	case len(out.Invalid) > 0:
		Error(w, http.StatusUnprocessableEntity, "certificate refused: "+out.Invalid[0].Comment)
		return
	}
	if _, err := h.opts.Emails.ConfirmEmail(r.Context(), key, token); h.tokenRefused(w, r, err) {
		return
	}
	h.log.Info("hkp v2: canonical key set by token", "fingerprint", key.Value)
	writeSubmission(w, http.StatusOK, out)
}

// tokenRefused answers a refusal of the identity service about a token
// (403 for the token itself, 422 for the key no longer carrying the
// address, 500 otherwise) and reports whether there was one.
func (h *Handler) tokenRefused(w http.ResponseWriter, r *http.Request, err error) bool {
	switch identity.CodeOf(err) {
	case "":
		if err != nil {
			h.fail(w, r, "token", err)
			return true
		}
		return false
	case identity.CodeUnknownToken, identity.CodeTokenUsed, identity.CodeTokenExpired, identity.CodeWrongToken:
		Error(w, http.StatusForbidden, "token refused: "+refusalText(err))
	case identity.CodeAddressNotInKey:
		Error(w, http.StatusUnprocessableEntity, "the key has no valid user ID with this address")
	default:
		Error(w, http.StatusForbidden, "token refused: "+refusalText(err))
	}
	return true
}

// refusalText is the message of an identity refusal, without the
// operation its error carries.
func refusalText(err error) string {
	var ie *identity.Error
	if errors.As(err, &ie) {
		return ie.Msg
	}
	return "refused"
}

// bearerToken reads "Bearer TOKEN" (RFC 6750); TOKEN may be the whole
// mailed link, whose last path segment is the token.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || len(tok) > 2048 {
		return "", false
	}
	if i := strings.LastIndexByte(strings.TrimRight(tok, "/"), '/'); i >= 0 {
		tok = strings.TrimRight(tok, "/")[i+1:]
	}
	return tok, tok != ""
}

// tokenAddress returns the address s is (lower-cased, as user IDs'
// addresses are read), or "" when s is not a bare address.
func tokenAddress(s string) string {
	if s == "" || len(s) > maxIdentity || strings.ContainsAny(s, "<> ") {
		return ""
	}
	a := pgp.UserIDAddress(s)
	if identity.EmailFactor(a).Validate() != nil {
		return ""
	}
	return a
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
