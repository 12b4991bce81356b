// identity.go: identities: ask for a statement, sign it, send it back.

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/web/api"
)

// Challenge asks for a statement for purpose about factor (an SSH key
// line or an OpenPGP fingerprint) and handle.
func (c *Client) Challenge(ctx context.Context, purpose identity.Purpose, handle, factor string) (string, error) {
	var ch api.ChallengeResponse
	err := c.call(ctx, "ask for a "+string(purpose)+" statement", http.MethodPost, "/api/v1/challenges", handle,
		api.ChallengeRequest{Handle: handle, Factor: factor, Purpose: string(purpose)}, &ch)
	return ch.Statement, err
}

// Lookup returns the identity document of handle (a person's, or a
// host's as host:NAME).
func (c *Client) Lookup(ctx context.Context, handle string) (api.IdentityDoc, error) {
	var doc api.IdentityDoc
	path := "/users/" + url.PathEscape(handle) + ".json"
	if name, ok := identity.Handle(handle).Host(); ok {
		path = "/hosts/" + url.PathEscape(name) + ".json"
	}
	err := c.call(ctx, "look up "+handle, http.MethodGet, path, handle, nil, &doc)
	return doc, err
}

// Claim creates the identity handle, proven by s's signature.
func (c *Client) Claim(ctx context.Context, handle string, s Signer) (api.IdentityDoc, error) {
	stmt, err := c.Challenge(ctx, identity.PurposeClaim, handle, s.Factor())
	if err != nil {
		return api.IdentityDoc{}, err
	}
	return c.ClaimWith(ctx, handle, s, stmt)
}

// ClaimWith is Claim answering the claim statement stmt, which
// Challenge issued: asking for it first has the server check the handle
// (its syntax, the names it keeps, whether it is taken) before anything
// else is sent, such as an OpenPGP key (UploadKey), which the server
// must hold before it can check the key's signature.
func (c *Client) ClaimWith(ctx context.Context, handle string, s Signer, stmt string) (api.IdentityDoc, error) {
	var doc api.IdentityDoc
	sig, err := s.Sign(ctx, stmt)
	if err != nil {
		return doc, err
	}
	req := api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: stmt, Signature: sig}, Label: s.Label}
	err = c.call(ctx, "claim "+handle, http.MethodPost, "/api/v1/identities", handle, req, &doc)
	return doc, err
}

// Add links s to handle, signed by s and co-signed by by, a key already
// proven for handle. An OpenPGP key must be on the server first
// (UploadKey).
func (c *Client) Add(ctx context.Context, handle string, s, by Signer) (api.IdentityDoc, error) {
	var doc api.IdentityDoc
	stmt, err := c.Challenge(ctx, identity.PurposeAdd, handle, s.Factor())
	if err != nil {
		return doc, err
	}
	sig, err := s.Sign(ctx, stmt)
	if err != nil {
		return doc, err
	}
	bySig, err := by.Sign(ctx, stmt)
	if err != nil {
		return doc, err
	}
	req := api.AddRequest{Statement: stmt, Signature: sig, By: by.Factor(), BySignature: bySig, Label: s.Label}
	err = c.call(ctx, "link "+s.String()+" to "+handle, http.MethodPost, "/api/v1/identities/"+url.PathEscape(handle)+"/factors", handle, req, &doc)
	return doc, err
}

// Revoke unlinks the factor f of handle's document, signed by by, a key
// proven for handle.
func (c *Client) Revoke(ctx context.Context, handle string, f api.FactorDoc, by Signer) (api.IdentityDoc, error) {
	var doc api.IdentityDoc
	name := f.Value
	if f.Kind == string(identity.KindSSH) {
		name = f.Key
	}
	stmt, err := c.Challenge(ctx, identity.PurposeRevoke, handle, name)
	if err != nil {
		return doc, err
	}
	sig, err := by.Sign(ctx, stmt)
	if err != nil {
		return doc, err
	}
	req := api.RevokeRequest{Statement: stmt, By: by.Factor(), Signature: sig}
	err = c.call(ctx, "revoke "+f.Kind+" "+f.Value, http.MethodPost, "/api/v1/identities/"+url.PathEscape(handle)+"/revocations", handle, req, &doc)
	return doc, err
}

// UploadKey sends gpg's copy of an OpenPGP signer's key to the server
// (POST /pks/add), which must hold it before it can check the key's
// signatures.
func (c *Client) UploadKey(ctx context.Context, s Signer) error {
	armored, err := s.ExportPGP(ctx)
	if err != nil {
		return err
	}
	form := url.Values{"keytext": {string(armored)}}
	status, msg, err := c.do(ctx, http.MethodPost, "/pks/add", "application/x-www-form-urlencoded", []byte(form.Encode()), maxSmallBody)
	if err != nil {
		return fmt.Errorf("upload OpenPGP key %s: %w", s.ID, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("upload OpenPGP key %s: the server refused (%d %s): %s", s.ID, status, http.StatusText(status), clip(strings.TrimSpace(string(msg))))
	}
	return nil
}

// ErrBadFactor marks an argument that names no factor at all.
var ErrBadFactor = errors.New("not a factor")

// Find returns the factor of doc that arg names: its value (SHA256:...
// or an OpenPGP fingerprint), or an SSH key file whose key it is.
func (t *Tools) Find(ctx context.Context, doc api.IdentityDoc, arg string) (api.FactorDoc, error) {
	want := strings.TrimSpace(arg)
	if pf, err := identity.ParsePGPFingerprint(want); err == nil {
		want = pf.Value
	} else if !strings.HasPrefix(want, "SHA256:") {
		s, err := t.SSHKey(ctx, want)
		if err != nil {
			return api.FactorDoc{}, fmt.Errorf("%w: %q is neither a SHA256:... fingerprint, an OpenPGP fingerprint nor a readable SSH key file (%v)", ErrBadFactor, arg, err)
		}
		want = s.ID
	}
	for _, f := range doc.Factors {
		if f.Value == want {
			return f, nil
		}
	}
	return api.FactorDoc{}, fmt.Errorf("%s has no factor %s ('kith id show %s' lists its factors)", doc.Handle, want, doc.Handle)
}

// Assurance is the assurance of the factor with value in doc.
func Assurance(doc api.IdentityDoc, value string) string {
	for _, f := range doc.Factors {
		if f.Value == value {
			return f.Assurance
		}
	}
	return "not listed"
}
