package v2_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v2 "github.com/kith-keyserver/kith/hkp/v2"
	"github.com/kith-keyserver/kith/identity/keys/inprocess"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// TestPreflightFromAnyOriginWithoutCredentials: a page of any origin may
// read v2 answers, never with credentials.
func TestPreflightFromAnyOriginWithoutCredentials(t *testing.T) {
	st := inprocess.New(inprocess.Options{})
	raw, err := keygen.PublicEd25519("Alice", "alice@example.org", time.Unix(1700000000, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	k, err := pgp.ParseKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	k, _, err = pgp.DefaultPolicy().Apply(k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	v2.NewHandler(st, nil, v2.Options{}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	path := "/pks/v2/certs/by-vfingerprint/4/" + hex.EncodeToString(k.Fingerprint())
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+path, nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "*" ||
		res.Header.Get("Access-Control-Allow-Credentials") != "" || res.Header.Get("Allow") != "GET, OPTIONS" {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+path, nil)
	req.Header.Set("Origin", "https://evil.example")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != "*" ||
		res.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("get: %d %v", res.StatusCode, res.Header)
	}
	got, err := pgp.ParseKey(body)
	if err != nil || hex.EncodeToString(got.Fingerprint()) != hex.EncodeToString(k.Fingerprint()) {
		t.Fatalf("get answered %x (%v)", body, err)
	}
}
