// hosts.go: /hosts/{name}.known_hosts, the proven SSH host keys of a host
// identity (host:NAME) as known_hosts lines, for ssh's KnownHostsCommand
// (kith known-hosts), and /hosts/{name}.json, its identity document.

package api

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// getHost serves /hosts/{name}.known_hosts and /hosts/{name}.json. An
// unknown host (or one the operator's list no longer names) is a 404 with
// an empty body: ssh reads no output as no keys.
func (h *Handler) getHost(w http.ResponseWriter, r *http.Request) error {
	file := r.PathValue("file")
	var name, ext string
	switch {
	case strings.HasSuffix(file, ".known_hosts"):
		name, ext = strings.TrimSuffix(file, ".known_hosts"), "known_hosts"
	case strings.HasSuffix(file, ".json"):
		name, ext = strings.TrimSuffix(file, ".json"), "json"
	default:
		http.NotFound(w, r)
		return nil
	}
	name = identity.FoldHostName(name)
	if _, err := identity.ParseHostName(name); err != nil {
		w.Header().Set("Cache-Control", h.maxAgeHV)
		w.WriteHeader(http.StatusNotFound)
		return nil
	}
	notFound := cached{status: http.StatusNotFound, ctype: "text/plain; charset=utf-8"}
	if wantsProof(r) {
		id, a, recs, err := h.svc.LookupHost(r.Context(), name)
		if identity.CodeOf(err) == identity.CodeUnknownIdentity {
			w.WriteHeader(http.StatusNotFound)
			return nil
		}
		if err != nil {
			return err
		}
		c, err := h.hostAnswer(name, ext, id, a, recs)
		if err != nil {
			return err
		}
		return h.serveProof(w, r, c, a, recs, provenFactors(a, identity.KindSSH))
	}
	return h.serveCached(w, r, string(identity.HostHandle(name)), ext, notFound, func() (cached, error) {
		id, a, recs, err := h.svc.LookupHost(r.Context(), name)
		if err != nil {
			return cached{}, err
		}
		return h.hostAnswer(name, ext, id, a, recs)
	})
}

// hostAnswer is the known_hosts or json answer for a host identity.
func (h *Handler) hostAnswer(name, ext string, id identity.Identity, a *identity.Assessment, recs []identity.Evidence) (cached, error) {
	if ext == "json" {
		var b bytes.Buffer
		if err := jsonIndent(&b, newIdentityDoc(id, a, recs, h.now())); err != nil {
			return cached{}, err
		}
		return cached{status: http.StatusOK, ctype: "application/json", body: b.Bytes()}, nil
	}
	return cached{status: http.StatusOK, ctype: "text/plain; charset=utf-8", body: KnownHosts(name, a)}, nil
}

// KnownHosts renders a host identity's proven SSH keys as known_hosts
// lines for name ("name keytype base64"); revoked, expired and only
// claimed keys are left out.
func KnownHosts(name string, a *identity.Assessment) []byte {
	var b bytes.Buffer
	for _, st := range a.Of(identity.KindSSH, identity.LevelProven) {
		pub, err := ssh.ParsePublicKey(st.Factor.Data)
		if err != nil {
			continue
		}
		b.WriteString(name + " ")
		b.Write(ssh.MarshalAuthorizedKey(&ssh.Key{Public: pub}))
	}
	return b.Bytes()
}
