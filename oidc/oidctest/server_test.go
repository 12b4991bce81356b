package oidctest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestAutoLoginCodeFlow drives the provider with a bare OAuth 2.0 client:
// discovery, /authorize with PKCE, auto-approved login, code, token.
func TestAutoLoginCodeFlow(t *testing.T) {
	const redirect = "https://127.0.0.1:9/cb"
	s, err := Start(Config{
		Users:     []User{{Subject: "u1", Username: "ann", Email: "ann@example.org", EmailVerified: true}},
		Clients:   []Client{{ID: "c", Secret: "s", RedirectURIs: []string{redirect}}},
		AutoLogin: "ann",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hc := s.HTTPClient()

	resp, err := hc.Get(s.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Issuer        string   `json:"issuer"`
		AuthURL       string   `json:"authorization_endpoint"`
		TokenURL      string   `json:"token_endpoint"`
		JWKSURI       string   `json:"jwks_uri"`
		PKCEMethods   []string `json:"code_challenge_methods_supported"`
		SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
		ResponseTypes []string `json:"response_types_supported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if meta.Issuer != s.Issuer || !slices.Contains(meta.PKCEMethods, "S256") || !slices.Contains(meta.SigningAlgs, "RS256") || meta.JWKSURI == "" {
		t.Fatalf("discovery document %+v", meta)
	}

	cfg := oauth2.Config{ClientID: "c", ClientSecret: "s", RedirectURL: redirect, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: meta.AuthURL, TokenURL: meta.TokenURL}}
	verifier := oauth2.GenerateVerifier()
	stop := *hc
	stop.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err = stop.Get(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "nn")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || loc.Query().Get("state") != "st" || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %s %v %v", resp.Status, loc, err)
	}
	if s.CodesIssued() != 1 {
		t.Errorf("CodesIssued = %d", s.CodesIssued())
	}
	ctx := context.WithValue(t.Context(), oauth2.HTTPClient, hc)
	if _, err := cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption("wrong-verifier-wrong-verifier-wrong-verifier")); err == nil {
		t.Error("the code exchanged with a wrong PKCE verifier")
	}
	tok, err := cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if id, _ := tok.Extra("id_token").(string); strings.Count(id, ".") != 2 {
		t.Errorf("id_token %q", id)
	}
	if _, err := cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier)); err == nil {
		t.Error("the code exchanged twice")
	}
}
