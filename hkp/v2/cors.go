// cors.go: the CORS headers and OPTIONS answers every v2 route shares.

package v2

import (
	"net/http"
	"strings"
)

// Handle registers h on mux for method at path, with the CORS headers a
// page of any origin needs to read its answers, and registers the
// OPTIONS answer (a CORS preflight or a plain OPTIONS) for path. Each path
// is registered once: a path with several methods names them all in
// method, separated by commas ("GET, PUT"), and h dispatches on them.
//
// Any origin may read v2 answers, but never with credentials: keys are
// public, and Kith's v2 routes take no cookie, so
// Access-Control-Allow-Credentials is never sent and
// Access-Control-Allow-Origin is "*" (which browsers refuse to combine
// with credentials).
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

// Preflight answers OPTIONS for a path serving methods: 204 with Allow and,
// for a CORS preflight, the methods and request headers a page may use.
func Preflight(methods ...string) http.Handler {
	allow := strings.Join(append(methods, http.MethodOptions), ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		setCORS(hd)
		hd.Set("Allow", allow)
		hd.Set("Access-Control-Allow-Methods", allow)
		hd.Set("Access-Control-Allow-Headers", "Content-Type")
		// A day: the answer depends on nothing but the route.
		hd.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
	})
}

func setCORS(hd http.Header) {
	hd.Set("Access-Control-Allow-Origin", "*")
	// A 429's Retry-After is for the page too.
	hd.Set("Access-Control-Expose-Headers", "Retry-After")
}
