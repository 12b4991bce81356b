package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// routeRecorder is a Mux that remembers the patterns registered on it.
type routeRecorder struct{ patterns []string }

func (r *routeRecorder) Handle(pattern string, _ http.Handler) {
	r.patterns = append(r.patterns, pattern)
}

// wildcardRest is a {name...} path wildcard; OpenAPI writes {name}.
var wildcardRest = regexp.MustCompile(`\{([a-z_]+)\.\.\.\}`)

// TestOpenAPIDocumentIsValidAndListsEveryRoute: the document served at
// /api/v1/openapi.json is valid OpenAPI 3.1, and its operations are
// exactly the routes the handler registers.
func TestOpenAPIDocumentIsValidAndListsEveryRoute(t *testing.T) {
	k := newKith(t)
	status, body := k.get("/api/v1/openapi.json")
	if status != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: %d", status)
	}
	doc, err := libopenapi.NewDocument([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		t.Fatalf("OpenAPI version %q, want 3.1", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  at %s: %s", se.FieldPath, se.Reason)
			}
		}
		t.FailNow()
	}

	var parsed struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &parsed); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range parsed.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	rec := &routeRecorder{}
	k.h.Register(rec)
	var registered []string
	for _, p := range rec.patterns {
		registered = append(registered, wildcardRest.ReplaceAllString(p, "{$1}"))
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if !slices.Equal(documented, registered) {
		t.Errorf("the document lists\n  %s\nthe handler registers\n  %s", strings.Join(documented, "\n  "), strings.Join(registered, "\n  "))
	}
	n := 0
	for _, r := range registered {
		if strings.Contains(r, " /api/v1/") {
			n++
		}
	}
	if n < 7 {
		t.Errorf("only %d /api/v1 routes registered: %v", n, registered)
	}
	// Every request body and every answer with a body has an example.
	type content map[string]map[string]json.RawMessage
	var op struct {
		RequestBody struct {
			Content content `json:"content"`
		} `json:"requestBody"`
		Responses map[string]struct {
			Content content `json:"content"`
		} `json:"responses"`
	}
	hasExample := func(c map[string]json.RawMessage) bool { return c["example"] != nil || c["examples"] != nil }
	for path, ops := range parsed.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			op.RequestBody.Content, op.Responses = nil, nil
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			for ct, c := range op.RequestBody.Content {
				if !hasExample(c) {
					t.Errorf("%s %s: request body %s has no example", method, path, ct)
				}
			}
			for code, r := range op.Responses {
				for ct, c := range r.Content {
					if !hasExample(c) {
						t.Errorf("%s %s: answer %s (%s) has no example", method, path, code, ct)
					}
				}
			}
		}
	}
	if !bytes.Equal([]byte(body), api.OpenAPI()) {
		t.Error("the served document is not the embedded one")
	}
}

// TestOpenAPIDescribesRealExchanges: a claim, an add, a refusal, a
// lookup and a log page, made for real, each match the document.
func TestOpenAPIDescribesRealExchanges(t *testing.T) {
	k := newKith(t)
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// exchange makes a request and checks request and answer against the
	// document; a request the document forbids (bad) must fail its check,
	// and its refusal is checked alone.
	check := func(method, path string, in any, bad bool) (int, []byte) {
		t.Helper()
		var raw []byte
		if in != nil {
			raw, _ = json.Marshal(in)
		}
		req, _ := http.NewRequest(method, k.url+path, bytes.NewReader(raw))
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		check, _ := http.NewRequest(method, k.url+path, bytes.NewReader(raw))
		check.Header = req.Header.Clone()
		check.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
		resp.Body = io.NopCloser(bytes.NewReader(out))
		ok, verrs := v.ValidateHttpRequestResponse(check, resp)
		if bad {
			if reqOK, _ := v.ValidateHttpRequest(check); reqOK {
				t.Errorf("%s %s: the document allows this bad request", method, path)
			}
			resp.Body = io.NopCloser(bytes.NewReader(out))
			ok, verrs = v.ValidateHttpResponse(check, resp)
		}
		if !ok {
			for _, e := range verrs {
				t.Errorf("%s %s (%d): %s: %s", method, path, resp.StatusCode, e.Message, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("  at %s: %s", se.FieldPath, se.Reason)
				}
			}
		}
		return resp.StatusCode, out
	}
	exchange := func(method, path string, in any) (int, []byte) {
		t.Helper()
		return check(method, path, in, false)
	}
	refused := func(method, path string, in any) (int, []byte) {
		t.Helper()
		return check(method, path, in, true)
	}
	dir := t.TempDir()
	a, b := newSSHKey(t, dir, "ed25519"), newSSHKey(t, dir, "ed25519")

	var c api.ChallengeResponse
	st, out := exchange("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "nora", Factor: a.pub, Purpose: "claim"})
	if st != http.StatusCreated || json.Unmarshal(out, &c) != nil {
		t.Fatalf("challenge: %d %s", st, out)
	}
	if st, out := refused("POST", "/api/v1/identities", map[string]string{"statement": c.Statement}); st != http.StatusBadRequest || !strings.Contains(string(out), "signature is missing") {
		t.Errorf("claim without signature: %d %s", st, out)
	}
	if st, out := exchange("POST", "/api/v1/identities", api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: c.Statement, Signature: a.sign(t, c.Statement, "kith")}}); st != http.StatusCreated {
		t.Fatalf("claim: %d %s", st, out)
	}
	st, out = exchange("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "nora", Factor: b.pub, Purpose: "add"})
	if st != http.StatusCreated || json.Unmarshal(out, &c) != nil {
		t.Fatalf("add challenge: %d %s", st, out)
	}
	// Without a co-signer: the refusal names the factor that may co-sign.
	st, out = exchange("POST", "/api/v1/identities/nora/factors", api.AddRequest{Statement: c.Statement, Signature: b.sign(t, c.Statement, "kith")})
	if st != http.StatusForbidden || !strings.Contains(string(out), "by_signature") || !strings.Contains(string(out), "ssh SHA256:") {
		t.Errorf("add without co-signer: %d %s", st, out)
	}
	st, out = exchange("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "nora", Factor: b.pub, Purpose: "add"})
	if st != http.StatusCreated || json.Unmarshal(out, &c) != nil {
		t.Fatalf("add challenge: %d %s", st, out)
	}
	if st, out := exchange("POST", "/api/v1/identities/nora/factors", api.AddRequest{Statement: c.Statement, By: a.pub}); st != http.StatusBadRequest || !strings.Contains(string(out), "by_signature is missing") {
		t.Errorf("add with by but no by_signature: %d %s", st, out)
	}
	if st, out := exchange("POST", "/api/v1/identities/nora/factors", api.AddRequest{Statement: c.Statement, Signature: b.sign(t, c.Statement, "kith"),
		By: a.pub, BySignature: a.sign(t, c.Statement, "kith")}); st != http.StatusOK {
		t.Fatalf("add: %d %s", st, out)
	}
	if st, out := refused("POST", "/api/v1/identities/nora/factors", map[string]string{"statement": c.Statement, "sig": "x"}); st != http.StatusBadRequest || !strings.Contains(string(out), `unknown field \"sig\"`) {
		t.Errorf("unknown field: %d %s", st, out)
	}
	st, out = exchange("POST", "/api/v1/challenges", api.ChallengeRequest{Handle: "nora", Factor: a.pub, Purpose: "certificate"})
	if st != http.StatusCreated || json.Unmarshal(out, &c) != nil {
		t.Fatalf("certificate challenge: %d %s", st, out)
	}
	if st, out := exchange("POST", "/api/v1/ssh/certificates", api.CertificateRequest{Statement: c.Statement, Signature: a.sign(t, c.Statement, "kith"), Validity: "2h"}); st != http.StatusCreated {
		t.Fatalf("certificate: %d %s", st, out)
	}
	if st, out := exchange("POST", "/api/v1/ssh/certificates", api.CertificateRequest{Statement: c.Statement, Signature: a.sign(t, c.Statement, "kith")}); st != http.StatusConflict {
		t.Errorf("replayed certificate request: %d %s", st, out)
	}
	for _, path := range []string{"/ssh/ca.pub", "/ssh/krl", "/users/nora.json", "/users/nora.keys", "/users/NORA.keys", "/api/v1/log?limit=2", "/api/v1/ssh/" + url.PathEscape(fingerprint(t, a.pub)), "/api/v1/openapi.json"} {
		if st, out := exchange("GET", path, nil); st != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, st, out)
		}
	}
	refused("GET", "/api/v1/log?limit=x", nil)
}

// fingerprint is an SSH key line's SHA256 fingerprint.
func fingerprint(t *testing.T, line string) string {
	t.Helper()
	k, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k.Fingerprint().String()
}
