// openapi.go: the OpenAPI 3.1 document of the API, served at
// /api/v1/openapi.json. It is written by hand, with request and response
// examples; a test checks it against the OpenAPI 3.1 schema, checks that
// it lists every /api/v1 route Register adds, and checks real exchanges
// against it.

package api

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.1 document (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(openAPI)
	return nil
}
