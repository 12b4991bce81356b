// keys.go: the public key pages: home, search, a key's page, upload and
// statistics, with the views they show of stored keys.

package web

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// maxSearchLen bounds a search.
const maxSearchLen = 256

// dateFormat is how pages show dates.
const dateFormat = "2006-01-02"

// keySummary is one search result.
type keySummary struct {
	Fingerprint string
	Algorithm   string
	Created     string
	Revoked     bool
	Expired     bool
	UserIDs     []uidSummary
	// RevokedUserIDs are listed after the others, marked revoked.
	RevokedUserIDs []string
}

// uidSummary is one user ID of a search result.
type uidSummary struct {
	Text string
	// Verified: the address is verified by mail for the key.
	Verified bool
}

// keyView is a key's page.
type keyView struct {
	Fingerprint string
	Grouped     string
	KeyID       string
	Algorithm   string
	Created     string
	Expires     string
	Revoked     bool
	// Revocation says when and why the key was revoked (empty when not).
	Revocation   revocationView
	Expired      bool
	Capabilities string
	UserIDs      []uidView
	Subkeys      []subkeyView
	Download     string
	Armored      string
	// Identities are the handles the key is proven for.
	Identities []string
	// Certified: a user ID carries certifications by other keys, so the
	// holder may want to choose which to publish (attestation).
	Certified bool
}

// revocationView is when and why something was revoked, as its
// revocation signature says.
type revocationView struct {
	Date   string
	Reason string // the reason code spelled out; empty when none given
	Text   string // the holder's own words
}

// because is ": " and the reason, or nothing when none was given.
func (v revocationView) because() string {
	if v.Reason == "" {
		return ""
	}
	return ": " + v.Reason
}

// revocation is r as the page shows it.
func revocation(r pgp.Revocation) revocationView {
	v := revocationView{Date: date(r.At)}
	if r.Reason != nil {
		v.Reason, v.Text = r.Reason.CodeName(), r.Reason.Text
	}
	return v
}

// uidView is one user ID of a key's page.
type uidView struct {
	Text   string
	Email  string
	Status string // valid, revoked or expired
	// Revocation is the user ID's own revocation (empty when only the
	// key is revoked, or nothing is).
	Revocation revocationView
	Primary    bool
	Created    string
	Expires    string
	// Corroborated: a provider verified this email for the identity the
	// key is proven for.
	Corroborated bool
	// Verified: the address is verified by mail for the key.
	Verified bool
	// Certifications are the third-party certifications served with the
	// user ID; Attested says the key's holder attested them (then only
	// attested ones are served).
	Certifications []certView
	Attested       bool
}

// certView is one third-party certification of a user ID.
type certView struct {
	Issuer  string // key ID, 16 hex digits
	Created string
	// Name is the certifying key's primary user ID and Fingerprint its
	// fingerprint, when the store holds exactly one key with that ID.
	Name        string
	Fingerprint string
}

// subkeyView is one subkey of a key's page.
type subkeyView struct {
	Fingerprint  string
	Algorithm    string
	Capabilities string
	Created      string
	Expires      string
	Status       string
	Revocation   revocationView
}

func date(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(dateFormat)
}

// capabilityNames spells out a key's usage.
func capabilityNames(c pgp.Capabilities) string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{c.Certify, "certify"}, {c.Sign, "sign"}, {c.Encrypt, "encrypt"}, {c.Authenticate, "authenticate"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// hkpURL is the keyserver URL gpg takes for a server URL: hkp:// for
// http, hkps:// for https.
func hkpURL(u string) string {
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "hkps://" + rest
	}
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "hkp://" + rest
	}
	return u
}

// serveHome is the home page with the search box.
func (h *Handler) serveHome(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, homePage(h.page(w, r, "Kith keyserver"), hkpURL(h.publicURL())))
}

// parseSearch turns a search into a store query, as HKP reads one
// (keys.ParseSearch).
func parseSearch(q string, limit int) (keys.Query, error) {
	if len(q) > maxSearchLen {
		return keys.Query{}, fmt.Errorf("the search is longer than %d characters", maxSearchLen)
	}
	query, err := keys.ParseSearch(q)
	if err != nil {
		return keys.Query{}, err
	}
	query.Limit = limit
	return query, nil
}

// serveSearch shows the keys a search finds, at most MaxResults.
func (h *Handler) serveSearch(w http.ResponseWriter, r *http.Request) {
	p := h.page(w, r, "Search")
	q := r.URL.Query().Get("q")
	if strings.TrimSpace(q) == "" {
		h.render(w, r, http.StatusOK, searchPage(p, q, nil, nil, false, "Type something to search for.", 0))
		return
	}
	if s, err := keys.ParseSearch(q); err == nil && s.Email != "" && !h.opts.EmailLookupLimit.Allow(w, r) {
		h.fail(w, r, http.StatusTooManyRequests, "Too many searches", "Too many searches for email addresses came from your address; try again in a minute.")
		return
	}
	lucky := r.URL.Query().Get("lucky") != ""
	people, jump, err := h.findPeople(r, q)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if jump == "" && lucky && len(people) > 0 {
		jump = "/u/" + people[0].Handle
	}
	if jump != "" {
		http.Redirect(w, r, jump, http.StatusSeeOther)
		return
	}
	if isSSHFingerprint(q) {
		// Not a key search: an SSH key is found by who proved it.
		h.render(w, r, http.StatusOK, searchPage(p, q, people, nil, false, "", h.opts.MaxResults))
		return
	}
	query, err := parseSearch(q, h.opts.MaxResults)
	if err != nil {
		if len(people) > 0 {
			h.render(w, r, http.StatusOK, searchPage(p, q, people, nil, false, "", 0))
			return
		}
		h.render(w, r, http.StatusBadRequest, searchPage(p, q, nil, nil, false, "That search cannot be run: "+err.Error()+".", 0))
		return
	}
	keys, more, err := h.deps.Keys.FindKeys(r.Context(), query)
	if err != nil {
		h.internal(w, r, fmt.Errorf("web: search: %w", err))
		return
	}
	now := h.now()
	out := make([]keySummary, 0, len(keys))
	for _, k := range keys {
		s := keySummary{
			Fingerprint: strings.ToUpper(hex.EncodeToString(k.Fingerprint)),
			Algorithm:   pgp.AlgorithmName(k.Algorithm, k.Bits, k.Curve),
			Created:     date(k.Created), Revoked: k.Revoked,
			Expired: !k.Expires.IsZero() && !k.Expires.After(now),
		}
		verified, err := h.verifiedEmails(r.Context(), &k)
		if err != nil {
			h.internal(w, r, fmt.Errorf("web: search: %w", err))
			return
		}
		for _, u := range k.UserIDs {
			if !u.Revoked {
				s.UserIDs = append(s.UserIDs, uidSummary{Text: u.Text, Verified: u.Email != "" && verified[u.Email]})
			} else {
				s.RevokedUserIDs = append(s.RevokedUserIDs, u.Text)
			}
		}
		out = append(out, s)
	}
	if lucky && len(out) > 0 {
		http.Redirect(w, r, "/keys/"+out[0].Fingerprint, http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, searchPage(p, q, people, out, more, "", h.opts.MaxResults))
}

// findKey returns the stored key with the fingerprint fp: the key whose
// primary key it is, else the key holding a subkey with it. packets says
// whether to read the key's packets (keys.Query.InlineBytes); without
// them the key has its index entries (user IDs, key ID) only.
func (h *Handler) findKey(ctx context.Context, fp []byte, packets bool) (*keys.Stored, error) {
	inline := 0
	if !packets {
		inline = -1
	}
	found, more, err := h.deps.Keys.FindKeys(ctx, keys.Query{Fingerprint: fp, Limit: 2, InlineBytes: inline})
	if err != nil {
		return nil, fmt.Errorf("web: find key: %w", err)
	}
	for i := range found {
		if bytes.Equal(found[i].Fingerprint, fp) {
			return &found[i], nil
		}
	}
	if more {
		// Anyone may upload keys that carry fp as a subkey (an
		// encryption subkey needs no signature of its own); stored
		// before the key, they fill the limit. The key itself still
		// comes first.
		primary, _, err := h.deps.Keys.FindKeys(ctx, keys.Query{Fingerprints: [][]byte{fp}, Limit: 1, InlineBytes: inline})
		if err != nil {
			return nil, fmt.Errorf("web: find key: %w", err)
		}
		if len(primary) == 1 {
			return &primary[0], nil
		}
	}
	if len(found) > 0 {
		return &found[0], nil
	}
	return nil, nil
}

// parseKeyID reads a 64-bit key ID (16 hex digits, 0x optional).
func parseKeyID(s string) (uint64, bool) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if len(s) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 16, 64)
	return id, err == nil
}

// serveKeyID sends a key ID's page to the page of the one key whose
// primary key or subkey has that ID, or to the search when several do.
func (h *Handler) serveKeyID(w http.ResponseWriter, r *http.Request, id uint64) {
	found, _, err := h.deps.Keys.FindKeys(r.Context(), keys.Query{KeyID: id, Limit: 2, InlineBytes: -1, NoUserIDs: true})
	if err != nil {
		h.internal(w, r, fmt.Errorf("web: find key ID: %w", err))
		return
	}
	switch len(found) {
	case 0:
		h.fail(w, r, http.StatusNotFound, "No such key", fmt.Sprintf("This server holds no key with the key ID %016X.", id))
	case 1:
		http.Redirect(w, r, "/keys/"+strings.ToUpper(hex.EncodeToString(found[0].Fingerprint)), http.StatusSeeOther)
	default:
		http.Redirect(w, r, fmt.Sprintf("/search?q=0x%016X", id), http.StatusSeeOther)
	}
}

// maxCertifiers bounds the certifying keys one key page looks up (in one
// query); certifications beyond them show bare key IDs.
const maxCertifiers = 500

// certifiers returns, for the issuers of the key's certifications, the
// fingerprint and primary user ID of the one stored key with that key
// ID, in one lookup. An ID that several stored keys share is left out.
func (h *Handler) certifiers(ctx context.Context, d pgp.Description) (map[uint64]certView, error) {
	// A flooded key carries many thousands of certifications by few
	// issuers: a set, not a scan of ids, tells a new issuer.
	var ids []uint64
	seenIDs := map[uint64]bool{}
	for _, u := range d.UserIDs {
		for _, c := range u.Certifications {
			if len(ids) == maxCertifiers {
				break
			}
			if c.Issuer != 0 && c.Issuer != d.KeyID && !seenIDs[c.Issuer] {
				seenIDs[c.Issuer] = true
				ids = append(ids, c.Issuer)
			}
		}
	}
	out := map[uint64]certView{}
	if len(ids) == 0 {
		return out, nil
	}
	found, _, err := h.deps.Keys.FindKeys(ctx, keys.Query{PrimaryKeyIDs: ids, InlineBytes: -1, Limit: 2 * len(ids)})
	if err != nil {
		return nil, fmt.Errorf("web: certifiers: %w", err)
	}
	seen := map[uint64]int{}
	for _, k := range found {
		seen[k.KeyID]++
		c := certView{Fingerprint: strings.ToUpper(hex.EncodeToString(k.Fingerprint))}
		for _, u := range k.UserIDs {
			if !u.Revoked && (c.Name == "" || u.Primary) {
				c.Name = u.Text
			}
		}
		out[k.KeyID] = c
	}
	for id, n := range seen {
		if n > 1 {
			delete(out, id)
		}
	}
	return out, nil
}

// serveKey shows one key: user IDs with their validity, subkeys with
// their capabilities, and where to download it.
func (h *Handler) serveKey(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if id, ok := parseKeyID(r.PathValue("fingerprint")); ok {
		h.serveKeyID(w, r, id)
		return
	}
	f, err := identity.ParsePGPFingerprint(r.PathValue("fingerprint"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Not a fingerprint", "A key's page is /keys/ and its fingerprint (40 or 64 hex digits) or 64-bit key ID (16).")
		return
	}
	fp, _ := hex.DecodeString(f.Value)
	sk, err := h.findKey(ctx, fp, true)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if sk != nil && !bytes.Equal(sk.Fingerprint, fp) {
		// A subkey's fingerprint: its key's page.
		http.Redirect(w, r, "/keys/"+strings.ToUpper(hex.EncodeToString(sk.Fingerprint)), http.StatusMovedPermanently)
		return
	}
	if sk == nil {
		h.fail(w, r, http.StatusNotFound, "No such key", "This server holds no key with the fingerprint "+pgp.GroupFingerprint(f.Value)+".")
		return
	}
	v, err := h.keyView(ctx, sk)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	// The layout (a session lookup) only for the page itself: the
	// redirects and refusals above need none, and fail builds its own.
	p := h.page(w, r, "Key "+v.Grouped)
	h.render(w, r, http.StatusOK, keyPage(p, v))
}

// keyView builds a key's page from the stored key.
func (h *Handler) keyView(ctx context.Context, sk *keys.Stored) (keyView, error) {
	k, err := pgp.ParseKey(sk.Packets)
	if err != nil {
		return keyView{}, fmt.Errorf("web: stored key %X: %w", sk.Fingerprint, err)
	}
	d := k.Describe()
	now := h.now()
	fpHex := strings.ToUpper(hex.EncodeToString(sk.Fingerprint))
	v := keyView{
		Fingerprint: fpHex, Grouped: pgp.GroupFingerprint(fpHex), KeyID: fmt.Sprintf("%016X", d.KeyID),
		Algorithm: pgp.AlgorithmName(int(d.Algorithm), d.Bits, d.Curve),
		Created:   date(d.Created), Expires: date(d.Expires), Revoked: d.Revoked,
		Revocation:   revocation(d.Revocation),
		Expired:      !d.Expires.IsZero() && !d.Expires.After(now),
		Capabilities: capabilityNames(d.Capabilities),
		Download:     "/pks/lookup?op=get&options=mr&search=0x" + fpHex,
	}
	var armored bytes.Buffer
	if err := pgp.WriteArmored(&armored, k); err == nil {
		v.Armored = armored.String()
	}
	corroborated := map[string]bool{}
	f := identity.PGPFactor(sk.Fingerprint)
	if handle, err := h.deps.Identities.WhoProves(ctx, f); err == nil {
		v.Identities = append(v.Identities, string(handle))
		if _, a, recs, err := h.deps.Identities.Lookup(ctx, string(handle)); err == nil {
			for _, st := range identity.CorroboratedEmails(a, recs) {
				if st.Parent.Same(f) {
					corroborated[st.Factor.Value] = true
				}
			}
		}
	} else if identity.CodeOf(err) == "" {
		return keyView{}, err
	}
	verified, err := h.verifiedEmails(ctx, sk)
	if err != nil {
		return keyView{}, err
	}
	certifiers, err := h.certifiers(ctx, d)
	if err != nil {
		return keyView{}, err
	}
	for _, u := range d.UserIDs {
		// A revoked user ID is never shown as the primary one.
		uv := uidView{Text: u.Text, Email: u.Email, Primary: u.Primary && !u.Revoked, Created: date(u.Created), Expires: date(u.Expires), Status: "valid"}
		// A user ID is no more valid than its key.
		switch {
		case u.Revoked:
			uv.Status, uv.Revocation = "revoked", revocation(u.Revocation)
		case v.Revoked:
			uv.Status = "revoked"
		case !u.Expires.IsZero() && !u.Expires.After(now), v.Expired:
			uv.Status = "expired"
		}
		uv.Corroborated = u.Email != "" && corroborated[u.Email] && uv.Status == "valid"
		uv.Verified = u.Email != "" && verified[u.Email] && uv.Status == "valid"
		uv.Attested = u.Attested
		for _, c := range u.Certifications {
			cv := certifiers[c.Issuer]
			cv.Issuer, cv.Created = fmt.Sprintf("%016X", c.Issuer), date(c.Created)
			uv.Certifications = append(uv.Certifications, cv)
		}
		v.Certified = v.Certified || len(u.Certifications) > 0
		v.UserIDs = append(v.UserIDs, uv)
	}
	// Revoked user IDs last.
	slices.SortStableFunc(v.UserIDs, func(a, b uidView) int {
		return cmpBool(a.Status == "revoked", b.Status == "revoked")
	})
	for _, s := range d.Subkeys {
		sv := subkeyView{
			Fingerprint: strings.ToUpper(hex.EncodeToString(s.Fingerprint)), Algorithm: pgp.AlgorithmName(int(s.Algorithm), s.Bits, s.Curve),
			Capabilities: capabilityNames(s.Capabilities), Created: date(s.Created), Expires: date(s.Expires), Status: "valid",
		}
		switch {
		case s.Revoked:
			sv.Status, sv.Revocation = "revoked", revocation(s.Revocation)
		case v.Revoked:
			sv.Status = "revoked"
		case !s.Expires.IsZero() && !s.Expires.After(now), v.Expired:
			sv.Status = "expired"
		}
		v.Subkeys = append(v.Subkeys, sv)
	}
	return v, nil
}

// uploadResult is what happened to one uploaded key.
type uploadResult struct {
	Fingerprint string
	Result      string // inserted, updated, unchanged, rejected, error
	Reason      string
	Dropped     string
	// Addresses are the stored key's addresses with their status, when
	// the pages mail links.
	Addresses []addressView
}

// serveUploadForm shows the upload form.
func (h *Handler) serveUploadForm(w http.ResponseWriter, r *http.Request) {
	s, err := h.current(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	p := h.pageFor(w, r, s, "Upload a key")
	p.CSRF = h.csrfToken(w, r, s)
	h.render(w, r, http.StatusOK, uploadPage(p, hkpURL(h.publicURL()), nil))
}

// serveUpload reads the pasted keys, runs each through the policy and the
// store, and says per key what happened. Before reading the body, it
// answers 429 past the client's upload budget; once the size-capped body
// is read (a client sending it slowly holds no upload slot meanwhile),
// 503 when the upload path admits no more requests at once (both with
// Retry-After).
func (h *Handler) serveUpload(w http.ResponseWriter, r *http.Request) {
	if !h.opts.UploadLimit.Allow(w, r) {
		h.fail(w, r, http.StatusTooManyRequests, "Too many uploads", "Too many uploads came from your address; try again in a minute.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxUploadSize)
	pasted, file, err := readUploadForm(r, h.opts.MaxUploadSize)
	if err != nil {
		h.fail(w, r, http.StatusRequestEntityTooLarge, "Upload too large", fmt.Sprintf("An upload may be at most %d bytes.", h.opts.MaxUploadSize))
		return
	}
	s, ok := h.postSession(w, r)
	if !ok {
		return
	}
	if len(bytes.TrimSpace(pasted)) == 0 && len(file) == 0 {
		p := h.pageFor(w, r, s, "Upload a key")
		p.CSRF = h.csrfToken(w, r, s)
		h.render(w, r, http.StatusBadRequest, uploadPage(p, hkpURL(h.publicURL()), []uploadResult{{Result: "rejected", Reason: "nothing was pasted and no file was chosen"}}))
		return
	}
	adm, ok := h.deps.Uploads.Admit(r.Context())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(keys.UploadRetryAfterSeconds))
		h.fail(w, r, http.StatusServiceUnavailable, "Too many uploads", "The server is checking too many uploads at once. Try again in a few seconds.")
		return
	}
	defer adm.Done()
	loggedIn := s != nil && s.Handle != ""
	var results []uploadResult
	// The pasted text and the file are read apart: one may be armored and
	// the other binary.
	for _, data := range [][]byte{pasted, file} {
		if len(bytes.TrimSpace(data)) > 0 {
			results = append(results, h.addKeys(r.Context(), adm, data, loggedIn)...)
		}
	}
	h.uploadAddresses(r.Context(), results)
	status := http.StatusOK
	if !slices.ContainsFunc(results, func(u uploadResult) bool { return u.Result != "rejected" && u.Result != "error" }) {
		status = http.StatusUnprocessableEntity
	}
	p := h.pageFor(w, r, s, "Upload a key")
	p.CSRF = h.csrfToken(w, r, s)
	h.render(w, r, status, uploadPage(p, hkpURL(h.publicURL()), results))
}

// uploadFileField is the upload form's file input.
const uploadFileField = "keyfile"

// readUploadForm reads the upload form, URL-encoded or multipart (with a
// file), from a body already capped at max bytes: the pasted text and the
// chosen file's bytes (nil when none was chosen).
func readUploadForm(r *http.Request, max int64) (pasted, file []byte, err error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := r.ParseForm(); err != nil {
			return nil, nil, fmt.Errorf("web: upload form: %w", err)
		}
		return []byte(r.PostFormValue("keytext")), nil, nil
	}
	if err := r.ParseMultipartForm(max); err != nil {
		return nil, nil, fmt.Errorf("web: upload form: %w", err)
	}
	pasted = []byte(r.PostFormValue("keytext"))
	f, _, err := r.FormFile(uploadFileField)
	if errors.Is(err, http.ErrMissingFile) {
		return pasted, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("web: upload form: %w", err)
	}
	defer f.Close()
	file, err = io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, nil, fmt.Errorf("web: upload form: file: %w", err)
	}
	return pasted, file, nil
}

// addKeys stores every key in data that passes the policy.
// loggedIn says a logged-in session uploads them (the upload policy may
// accept more then); they share the request's admission adm.
func (h *Handler) addKeys(ctx context.Context, adm *keys.Admission, data []byte, loggedIn bool) []uploadResult {
	var out []uploadResult
	rd := pgp.NewReader(bytes.NewReader(data))
	for ctx.Err() == nil {
		k, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *pgp.ReadError
			if errors.As(err, &re) {
				out = append(out, uploadResult{Result: "rejected", Reason: fmt.Sprintf("key %d is unreadable: %v", re.Index+1, re.Err)})
				continue
			}
			out = append(out, uploadResult{Result: "rejected", Reason: "the rest of the text is not OpenPGP data"})
			break
		}
		out = append(out, h.addKey(ctx, adm, k, loggedIn))
	}
	if len(out) == 0 {
		out = append(out, uploadResult{Result: "rejected", Reason: "no OpenPGP public key was found in the text"})
	}
	return out
}

func (h *Handler) addKey(ctx context.Context, adm *keys.Admission, k *pgp.Key, loggedIn bool) uploadResult {
	res := uploadResult{}
	if fp := k.Fingerprint(); fp != nil {
		res.Fingerprint = strings.ToUpper(hex.EncodeToString(fp))
	}
	up, err := h.deps.Uploads.Upload(ctx, k, keys.UploadOptions{LoggedIn: loggedIn, Admission: adm})
	if up.Key != nil {
		res.Fingerprint = strings.ToUpper(hex.EncodeToString(up.Key.Fingerprint()))
		if up.Report.Total() > 0 {
			res.Dropped = up.Report.String()
		}
	}
	var rej *keys.Rejection
	switch {
	case errors.As(err, &rej):
		res.Result, res.Reason = "rejected", rej.Reason
		return res
	case errors.Is(err, keys.ErrUploadPolicyFailed):
		h.log.ErrorContext(ctx, "web: upload: upload policy", slog.String("fingerprint", res.Fingerprint), slog.Any("error", err))
		res.Result, res.Reason = "error", "the identity store failed; try again later"
		return res
	case err != nil:
		h.log.ErrorContext(ctx, "web: upload: store", slog.String("fingerprint", res.Fingerprint), slog.Any("error", err))
		res.Result, res.Reason = "error", "the key store failed; try again later"
		return res
	}
	res.Result = up.Change.String()
	switch up.Change {
	case keys.Blocked:
		res.Result, res.Reason = "rejected", up.Change.Reason()
	case keys.Reduced:
		res.Reason = up.Change.Reason()
	}
	return res
}

// serveStats shows how many keys the store holds and links to HKP's
// statistics.
func (h *Handler) serveStats(w http.ResponseWriter, r *http.Request) {
	p := h.page(w, r, "Statistics")
	st, err := h.deps.Keys.KeyStats(r.Context())
	if err != nil {
		h.internal(w, r, fmt.Errorf("web: stats: %w", err))
		return
	}
	h.render(w, r, http.StatusOK, statsPage(p, st))
}

// countKeys says how many keys there are, e.g. "1 key", "3 keys".
func countKeys(n int) string {
	if n == 1 {
		return "1 key"
	}
	return fmt.Sprintf("%d keys", n)
}

// verifiedEmails returns the addresses verified by mail for the key (none
// without Deps.VerifiedEmails).
func (h *Handler) verifiedEmails(ctx context.Context, k *keys.Stored) (map[string]bool, error) {
	out := map[string]bool{}
	if h.deps.VerifiedEmails == nil {
		return out, nil
	}
	emails, err := h.deps.VerifiedEmails.VerifiedEmails(ctx, identity.PGPFactor(k.Fingerprint).Value)
	if err != nil {
		return nil, err
	}
	for _, e := range emails {
		out[e] = true
	}
	return out, nil
}
