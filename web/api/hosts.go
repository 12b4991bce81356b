// hosts.go: /hosts/{name}.known_hosts, the proven SSH host keys of a host
// identity (host:NAME) as known_hosts lines, for ssh's KnownHostsCommand
// (kith known-hosts), and /hosts/{name}.json, its identity document;
// /ssh/ca.known_hosts, the @cert-authority line for the host certificates
// the CA issues; and /.well-known/ssh-known-hosts (C2SP
// well-known-ssh-hosts), both for the name the request was made to.

package api

import (
	"bytes"
	"net"
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

// certAuthorityLine is the @cert-authority line that trusts the CA for
// host certificates of the host name patterns, each also with any port
// ("[PATTERN]:*", as ssh looks up a host on a port other than 22).
func (h *Handler) certAuthorityLine(patterns []string) ([]byte, error) {
	line, err := h.caKeyLineNamed("SSH CA of ")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range patterns {
		names = append(names, p, "["+p+"]:*")
	}
	return append([]byte("@cert-authority "+strings.Join(names, ",")+" "), line...), nil
}

// getCertAuthority serves /ssh/ca.known_hosts: the @cert-authority line
// that makes ssh accept the host certificates this CA issues, for the
// host names the operator's policy lists.
func (h *Handler) getCertAuthority(w http.ResponseWriter, r *http.Request) error {
	patterns := h.svc.HostPatterns("")
	if len(patterns) == 0 && h.svc.CAEnabled() {
		return identity.Refuse(identity.CodeUnknownIdentity, "this server certifies no host: its operator lists no host names")
	}
	line, err := h.certAuthorityLine(patterns)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", h.maxAgeHV)
	w.Write(line)
	return nil
}

// getWellKnownHosts serves /.well-known/ssh-known-hosts (C2SP
// well-known-ssh-hosts) for the name the request was made to: the proven
// keys of that host and of every host below it, and, when this server
// certifies hosts there, the @cert-authority line for those names alone.
// A name that is no host name (an address) or has nothing to serve is a
// 404 with an empty body.
func (h *Handler) getWellKnownHosts(w http.ResponseWriter, r *http.Request) error {
	name := r.Host
	if host, _, err := net.SplitHostPort(name); err == nil {
		name = host
	}
	name = identity.FoldHostName(name)
	notFound := cached{status: http.StatusNotFound, ctype: "text/plain; charset=utf-8"}
	if _, err := identity.ParseHostName(name); err != nil {
		w.Header().Set("Cache-Control", h.maxAgeHV)
		w.WriteHeader(http.StatusNotFound)
		return nil
	}
	// The answer depends on every host below the name: it is cached
	// whole and dropped with the rest of the cache on any change.
	return h.serveCached(w, r, wellKnownHostsKey(name), "known_hosts", notFound, func() (cached, error) {
		hosts, err := h.svc.HostsUnder(r.Context(), name)
		if err != nil {
			return cached{}, err
		}
		var b bytes.Buffer
		if patterns := h.svc.HostPatterns(name); len(patterns) > 0 && h.svc.CAEnabled() {
			line, err := h.certAuthorityLine(patterns)
			if err != nil {
				return cached{}, err
			}
			b.Write(line)
		}
		for _, host := range hosts {
			b.Write(KnownHosts(host.Name, host.Assessment))
		}
		if b.Len() == 0 {
			return notFound, nil
		}
		return cached{status: http.StatusOK, ctype: "text/plain; charset=utf-8", body: b.Bytes()}, nil
	})
}

// wellKnownHostsKey is the cache's key of the well-known answer for a
// name; no handle has a space, so it names no identity's answers.
func wellKnownHostsKey(name string) string { return "well-known-ssh-hosts " + name }

// dropWellKnownHosts drops the well-known answers that the host name is
// in: its own and each of its parent domains'.
func dropWellKnownHosts(c *cache, name string) {
	for {
		c.drop(wellKnownHostsKey(name))
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return
		}
		name = name[i+1:]
	}
}
