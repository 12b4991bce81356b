package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/web/api/client"
)

// logServer serves key at /log/key and checkpoint at /log/checkpoint
// (503 when empty), as a Kith server's log does, or as an attacker's
// server may.
func logServer(t *testing.T, key string, checkpoint []byte) *client.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /log/key", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(key + "\n")) })
	mux.HandleFunc("GET /log/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		if checkpoint == nil {
			http.Error(w, "no checkpoint signed yet", http.StatusServiceUnavailable)
			return
		}
		w.Write(checkpoint)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func logKey(t *testing.T, origin string, seed byte) *tlog.Key {
	t.Helper()
	k, err := tlog.NewKey(origin, bytes.Repeat([]byte{seed}, tlog.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signedCheckpoint(t *testing.T, k *tlog.Key, size int64) []byte {
	t.Helper()
	b, err := k.SignCheckpoint(tlog.Checkpoint{Origin: k.Name(), Size: size})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLogKeyMustSignTheServersCheckpoint: LogKey returns the served key
// only when the served checkpoint verifies with it; a key swapped for
// another (of the same name, or not), no key, or no checkpoint to check
// it against are refused, a swap as ErrLogInvalid.
func TestLogKeyMustSignTheServersCheckpoint(t *testing.T) {
	real := logKey(t, "keys.example.org/log", 1)
	forged := logKey(t, "keys.example.org/log", 2) // same name, another key
	other := logKey(t, "elsewhere.example.org/log", 1)
	cp := signedCheckpoint(t, real, 42)

	got, c, err := logServer(t, real.VerifierKey(), cp).LogKey(context.Background())
	if err != nil || got != real.VerifierKey() || c.Size != 42 {
		t.Fatalf("honest server: %q, size %d, %v; want %q", got, c.Size, err, real.VerifierKey())
	}
	for name, srv := range map[string]*client.Client{
		"another key of the same name":       logServer(t, forged.VerifierKey(), cp),
		"a key of another name":              logServer(t, other.VerifierKey(), cp),
		"no key":                             logServer(t, "not a key", cp),
		"a checkpoint signed by another key": logServer(t, real.VerifierKey(), signedCheckpoint(t, forged, 42)),
	} {
		if got, _, err := srv.LogKey(context.Background()); !errors.Is(err, client.ErrLogInvalid) || got != "" {
			t.Errorf("%s: %q, %v; want ErrLogInvalid and no key", name, got, err)
		}
	}
	if got, _, err := logServer(t, real.VerifierKey(), nil).LogKey(context.Background()); err == nil || got != "" {
		t.Errorf("no checkpoint: %q, %v; want an error and no key", got, err)
	}
}
