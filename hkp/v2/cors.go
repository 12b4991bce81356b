// cors.go: the CORS headers and OPTIONS answers every v2 route shares.

package v2

import (
	"net/http"
	"strings"
)

// Handle registers h on mux for method at path, with the CORS headers a
// page of any origin needs to read its answers, and registers the
// OPTIONS answer (Preflight) for path. Each path is registered once: a
// path with several methods names them all in method, separated by
// commas ("GET, PUT"), and h dispatches on them. A GET route answers
// HEAD too, with the same header fields (ServeMux's rule, and the
// draft's section 5.1.8).
//
// Any origin may read v2 answers, but never with credentials: keys are
// public and Kith's v2 routes read no cookie, so
// Access-Control-Allow-Credentials is never sent and
// Access-Control-Allow-Origin is "*", which the draft's section 7.1
// requires of every v2 answer (and which browsers refuse to combine with
// credentials).
func Handle(mux *http.ServeMux, method, path string, h http.Handler) {
	methods := strings.Split(method, ",")
	for i := range methods {
		methods[i] = strings.TrimSpace(methods[i])
	}
	for _, m := range methods {
		mux.Handle(m+" "+path, CORS(h))
	}
	mux.Handle("OPTIONS "+path, Preflight(methods...))
}

// CORS wraps h so its answers, errors included, carry the CORS headers of
// a public, credential-less resource.
func CORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setCORS(w.Header())
		h.ServeHTTP(w, r)
	})
}

// Preflight answers OPTIONS for a path serving methods: 200 with Allow,
// as the draft's feature detection asks (section 5.1.7: "200 OK" and an
// Allow header naming GET), and, for a CORS preflight from any origin,
// the methods and request headers a page may use.
func Preflight(methods ...string) http.Handler {
	return preflight(methods, nil)
}

// preflight is Preflight with the Accept values of a submission route
// (section 5.2.6: one or more Accept headers).
func preflight(methods, accept []string) http.Handler {
	allow := strings.Join(append(methods, http.MethodOptions), ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		setCORS(hd)
		hd.Set("Allow", allow)
		hd.Set("Access-Control-Allow-Methods", allow)
		// Authorization: PUT canonical's token (a header a page sets
		// itself; no credential the browser keeps is ever read).
		hd.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
		// A day: the answer depends on nothing but the route.
		hd.Set("Access-Control-Max-Age", "86400")
		for _, a := range accept {
			hd.Add("Accept", a)
		}
		w.WriteHeader(http.StatusOK)
	})
}

func setCORS(hd http.Header) {
	hd.Set("Access-Control-Allow-Origin", "*")
	// A 429's or 503's Retry-After is for the page too.
	hd.Set("Access-Control-Expose-Headers", "Retry-After")
}
