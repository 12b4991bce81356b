// users.go: the read endpoints: /users/{handle}.keys, .gpg and .json, who
// proved an SSH key, and the evidence log. Lookups of a handle are cached
// on this node until an evidence append names it.

package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/verify"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/ssh"
)

// IdentityDoc is the JSON form of an identity (GET /users/{handle}.json).
type IdentityDoc struct {
	Handle  string      `json:"handle"`
	Created time.Time   `json:"created"`
	Factors []FactorDoc `json:"factors"`
	// Certificates are the SSH certificates ever issued for the identity.
	Certificates []CertificateDoc `json:"certificates,omitempty"`
}

// FactorDoc is one factor of an identity and how it is linked.
type FactorDoc struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
	// Key is an SSH key's authorized_keys form.
	Key string `json:"key,omitempty"`
	// Assurance is proven, claimed, expired, revoked or none; an email is
	// at most claimed (Kith does not prove mailboxes).
	Assurance string `json:"assurance"`
	Label     string `json:"label,omitempty"`
	// Parent is the OpenPGP key that carries this factor, if any.
	Parent   string        `json:"parent,omitempty"`
	Evidence []EvidenceDoc `json:"evidence"`
}

// EvidenceDoc summarises one record; Log is the URL of the full record.
type EvidenceDoc struct {
	Seq     int64      `json:"seq"`
	Method  string     `json:"method"`
	Purpose string     `json:"purpose,omitempty"`
	From    string     `json:"from"`
	To      string     `json:"to,omitempty"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revokes int64      `json:"revokes,omitempty"`
	// Counts says whether the record establishes the factor's current
	// assurance.
	Counts bool   `json:"counts"`
	Log    string `json:"log"`
}

func (h *Handler) identityDoc(r *http.Request, handle string) (IdentityDoc, error) {
	id, a, recs, err := h.svc.Lookup(r.Context(), handle)
	if err != nil {
		return IdentityDoc{}, err
	}
	return newIdentityDoc(id, a, recs, h.now()), nil
}

// newIdentityDoc is the document of an identity and its records, with
// its certificates' states at now.
func newIdentityDoc(id identity.Identity, a *identity.Assessment, recs []identity.Evidence, now time.Time) IdentityDoc {
	bySeq := map[int64]*identity.Evidence{}
	for i := range recs {
		bySeq[recs[i].Seq] = &recs[i]
	}
	doc := IdentityDoc{Handle: string(id.Handle), Created: id.Created.UTC(), Factors: []FactorDoc{}}
	for _, st := range a.Factors {
		fd := FactorDoc{Kind: string(st.Factor.Kind), Value: st.Factor.Value, Assurance: st.Level.String(),
			Label: st.Label, Evidence: []EvidenceDoc{}}
		if !st.Parent.IsZero() {
			fd.Parent = st.Parent.String()
		}
		if st.Factor.Kind == identity.KindSSH {
			if line := sshLine(st.Factor, ""); line != nil {
				fd.Key = strings.TrimSpace(string(line))
			}
		}
		for _, seq := range st.Records {
			e := bySeq[seq]
			if e == nil || e.Method == identity.MethodEmailVerified {
				// A mail verification and its withdrawal commit to their
				// address in the log; listed under the address, they would
				// tell anyone that the mailbox answered, even once withdrawn.
				continue
			}
			ed := EvidenceDoc{Seq: e.Seq, Method: string(e.Method), Purpose: string(e.Purpose), From: e.From.String(),
				Created: e.Created, Revokes: e.Revokes, Log: fmt.Sprintf("/api/v1/log?after=%d&limit=1", e.Seq-1)}
			if !e.To.IsZero() {
				ed.To = e.To.String()
			}
			if !e.Expires.IsZero() {
				t := e.Expires
				ed.Expires = &t
			}
			for _, v := range st.Via {
				ed.Counts = ed.Counts || v == e.Seq
			}
			fd.Evidence = append(fd.Evidence, ed)
		}
		doc.Factors = append(doc.Factors, fd)
	}
	doc.Certificates = certificateDocs(a, recs, now)
	return doc
}

// sshLine renders an SSH factor as an authorized_keys line with comment.
func sshLine(f identity.Factor, comment string) []byte {
	pub, err := ssh.ParsePublicKey(f.Data)
	if err != nil {
		return nil
	}
	return ssh.MarshalAuthorizedKey(&ssh.Key{Public: pub, Comment: comment})
}

// getUser serves /users/{handle}.keys, .gpg and .json.
func (h *Handler) getUser(w http.ResponseWriter, r *http.Request) error {
	file := r.PathValue("file")
	handle, ext, ok := strings.Cut(file, ".")
	if !ok {
		// /users/nora is the person's page: send browsers to the profile.
		if hd, err := identity.ParseHandle(identity.FoldHandle(file)); err == nil {
			http.Redirect(w, r, "/u/"+string(hd), http.StatusMovedPermanently)
			return nil
		}
		http.NotFound(w, r)
		return nil
	}
	variant := ext
	all := r.URL.Query().Get("all") == "1"
	switch ext {
	case "keys":
		if all {
			variant = "keys-all"
		}
	case "gpg", "json":
	default:
		http.NotFound(w, r)
		return nil
	}
	parsed, err := identity.ParseHandle(identity.FoldHandle(handle))
	if err != nil {
		return identity.Refuse(identity.CodeUnknownIdentity, "no identity has handle %q", handle)
	}
	handle = string(parsed) // the cache's key, as writes name it
	if wantsProof(r) {
		return h.serveUserProof(w, r, handle, ext, all)
	}
	notFound := cached{status: http.StatusNotFound, ctype: "text/plain; charset=utf-8", body: []byte("no such identity\n")}
	return h.serveCached(w, r, handle, variant, notFound, func() (cached, error) { return h.render(r, handle, ext, all) })
}

// serveCached serves the answer for handle's variant from this node's
// cache, or renders and caches it; a render refused with unknown_identity
// is answered with notFound (cached too, until a write names the handle).
func (h *Handler) serveCached(w http.ResponseWriter, r *http.Request, handle, variant string, notFound cached, render func() (cached, error)) error {
	now := h.now()
	c, ok := h.cache.get(handle, variant, now)
	if !ok {
		gen := h.cache.generation()
		var err error
		c, err = render()
		if err != nil {
			if identity.CodeOf(err) != identity.CodeUnknownIdentity {
				return err
			}
			c = notFound
		}
		sum := sha256.Sum256(c.body)
		c.etag = `"` + hex.EncodeToString(sum[:16]) + `"`
		c.expires = now.Add(h.ttl)
		h.cache.put(handle, variant, gen, c, now)
	}
	hd := w.Header()
	hd.Set("Content-Type", c.ctype)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", h.maxAgeHV)
	hd.Set("ETag", c.etag)
	if c.status == http.StatusOK && etagMatch(r.Header.Get("If-None-Match"), c.etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	hd.Set("Content-Length", strconv.Itoa(len(c.body)))
	w.WriteHeader(c.status)
	if r.Method != http.MethodHead {
		w.Write(c.body)
	}
	return nil
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == etag || t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// render computes one lookup's answer.
func (h *Handler) render(r *http.Request, handle, ext string, all bool) (cached, error) {
	id, a, recs, err := h.svc.Lookup(r.Context(), handle)
	if err != nil {
		return cached{}, err
	}
	c, _, err := h.renderWith(r, ext, all, id, a, recs)
	return c, err
}

// renderWith computes the answer of ext for an identity looked up, and
// the factors it serves as linked (what a proof bundle justifies).
func (h *Handler) renderWith(r *http.Request, ext string, all bool, id identity.Identity, a *identity.Assessment, recs []identity.Evidence) (cached, []identity.Factor, error) {
	switch ext {
	case "json":
		var b bytes.Buffer
		if err := jsonIndent(&b, newIdentityDoc(id, a, recs, h.now())); err != nil {
			return cached{}, nil, err
		}
		return cached{status: http.StatusOK, ctype: "application/json", body: b.Bytes()}, provenFactors(a, ""), nil
	case "gpg":
		var keys []*pgp.Key
		var served []identity.Factor
		for _, st := range a.Of(identity.KindPGP, identity.LevelProven) {
			k, err := (&verify.Verifier{Keys: h.keys}).StoredKey(r.Context(), st.Factor.Value)
			if err != nil {
				continue // proven, but no longer stored: nothing to serve
			}
			keys = append(keys, k)
			served = append(served, st.Factor)
		}
		// gpg --fetch-keys is this answer's client, and gpg refuses a whole
		// answer at a v6 key: the legacy rule decides (pgp.ForLegacyClients).
		keys, served = pgp.KeepForLegacyClients(keys, served, func(i int) int { return keys[i].Version() })
		var b bytes.Buffer
		if len(keys) > 0 {
			if err := pgp.WriteArmored(&b, keys...); err != nil {
				return cached{}, nil, err
			}
		}
		return cached{status: http.StatusOK, ctype: "application/pgp-keys", body: b.Bytes()}, served, nil
	}
	return cached{status: http.StatusOK, ctype: "text/plain; charset=utf-8", body: AuthorizedKeys(a, all)}, provenFactors(a, identity.KindSSH), nil
}

// serveUserProof answers a lookup of handle asked with ?proof=1.
func (h *Handler) serveUserProof(w http.ResponseWriter, r *http.Request, handle, ext string, all bool) error {
	id, a, recs, err := h.svc.Lookup(r.Context(), handle)
	if identity.CodeOf(err) == identity.CodeUnknownIdentity {
		http.Error(w, "no such identity", http.StatusNotFound)
		return nil
	}
	if err != nil {
		return err
	}
	c, served, err := h.renderWith(r, ext, all, id, a, recs)
	if err != nil {
		return err
	}
	return h.serveProof(w, r, c, a, recs, served)
}

// AuthorizedKeys renders an identity's SSH keys as authorized_keys text:
// every proven key, and with all also those only claimed, whose comment
// then starts with "claimed-only". Keys from OpenPGP authentication
// subkeys carry the comment gpg --export-ssh-key writes.
func AuthorizedKeys(a *identity.Assessment, all bool) []byte {
	var keys []*ssh.Key
	min := identity.LevelProven
	if all {
		min = identity.LevelClaimed
	}
	for _, st := range a.Of(identity.KindSSH, min) {
		pub, err := ssh.ParsePublicKey(st.Factor.Data)
		if err != nil {
			continue
		}
		comment := st.Label
		if st.Level != identity.LevelProven {
			comment = strings.TrimSpace("claimed-only " + comment)
		}
		keys = append(keys, &ssh.Key{Public: pub, Comment: comment})
	}
	return ssh.MarshalAuthorizedKeys(keys)
}

// SSHOwner is the answer of GET /api/v1/ssh/{fingerprint}.
type SSHOwner struct {
	Fingerprint string `json:"fingerprint"`
	Handle      string `json:"handle"`
	Key         string `json:"key"`
	Identity    string `json:"identity"`
}

func (h *Handler) getSSH(w http.ResponseWriter, r *http.Request) error {
	fp, err := ssh.ParseFingerprint(r.PathValue("fingerprint"))
	if err != nil {
		return identity.RefuseErr(identity.CodeBadFactor, err, "bad fingerprint (escape each / in it as %%2F: a path with // in it is cleaned to one /)")
	}
	f := identity.Factor{Kind: identity.KindSSH, Value: fp.String()}
	handle, err := h.svc.WhoProves(r.Context(), f)
	if err != nil {
		return err
	}
	_, a, _, err := h.svc.Lookup(r.Context(), string(handle))
	if err != nil {
		return err
	}
	st, _ := a.Status(f)
	w.Header().Set("Cache-Control", h.maxAgeHV)
	writeJSON(w, http.StatusOK, SSHOwner{
		Fingerprint: fp.String(), Handle: string(handle),
		Key:      strings.TrimSpace(string(sshLine(st.Factor, ""))),
		Identity: "/users/" + string(handle) + ".json",
	})
	return nil
}

// Log page sizes.
const (
	defaultLogLimit = 100
	maxLogLimit     = 1000
)

func (h *Handler) getLog(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, limit := int64(0), defaultLogLimit
	if s := q.Get("after"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return identity.Refuse(identity.CodeBadRequest, "after=%q is not a record number", s)
		}
		after = v
	}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			return identity.Refuse(identity.CodeBadRequest, "limit=%q is not a positive number", s)
		}
		limit = min(v, maxLogLimit)
	}
	recs, err := h.svc.Log(r.Context(), after, limit)
	if err != nil {
		return err
	}
	page := LogPage{Records: make([]LogRecord, 0, len(recs))}
	for i := range recs {
		lr, err := NewLogRecord(&recs[i])
		if err != nil {
			return err
		}
		page.Records = append(page.Records, lr)
	}
	if len(recs) == limit {
		page.Next = fmt.Sprintf("/api/v1/log?after=%d&limit=%d", recs[len(recs)-1].Seq, limit)
	}
	w.Header().Set("Cache-Control", "no-cache")
	writeJSON(w, http.StatusOK, page)
	return nil
}
