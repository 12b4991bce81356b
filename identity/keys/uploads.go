// uploads.go: which uploaded keys a server accepts (the upload policy),
// the one check every upload path (HKP, the pages, recon fetches, VKS)
// makes before it stores a key, and how the store's outcomes read.

package keys

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/kith-keyserver/kith/identity"
)

// UploadPolicy says which uploads a server stores.
type UploadPolicy string

// The upload policies.
const (
	// UploadsOpen stores every key that passes the key policy.
	UploadsOpen UploadPolicy = "open"
	// UploadsIdentities stores only keys whose primary key is proven for
	// an identity here, or keys uploaded by a logged-in session; recon
	// fetches follow the same rule.
	UploadsIdentities UploadPolicy = "identities"
	// UploadsOff stores nothing from uploads or recon (a read-only mirror).
	UploadsOff UploadPolicy = "off"
)

// ParseUploadPolicy parses "open", "identities" or "off".
func ParseUploadPolicy(s string) (UploadPolicy, error) {
	switch p := UploadPolicy(s); p {
	case UploadsOpen, UploadsIdentities, UploadsOff:
		return p, nil
	}
	return "", fmt.Errorf("upload policy %q: want open, identities or off", s)
}

// Upload is one key offered for storing.
type Upload struct {
	// Fingerprint of the key's primary key.
	Fingerprint []byte
	// LoggedIn: a logged-in session uploads it (the web upload page).
	LoggedIn bool
}

// Prover says for which identity a factor is proven
// (identity.Service.WhoProves).
type Prover interface {
	WhoProves(ctx context.Context, f identity.Factor) (identity.Handle, error)
}

// MayUpload decides whether u may be stored under policy, asking ids
// whether the key is proven: nil when it may, an *identity.Error with
// CodeUploadRefused whose message says why when it may not, or another
// error when the identity store failed.
func MayUpload(ctx context.Context, ids Prover, policy UploadPolicy, u Upload) error {
	switch policy {
	case UploadsOpen, "":
		return nil
	case UploadsOff:
		return identity.Refuse(identity.CodeUploadRefused, "this server accepts no uploads: it is a read-only mirror")
	case UploadsIdentities:
		if u.LoggedIn {
			return nil
		}
		_, err := ids.WhoProves(ctx, identity.PGPFactor(u.Fingerprint))
		if err == nil {
			return nil
		}
		if identity.CodeOf(err) == identity.CodeNotLinked {
			return identity.Refuse(identity.CodeUploadRefused, "this server accepts only keys proven for one of its identities, and key %s is not: prove it at the server, or upload it while logged in",
				hex.EncodeToString(u.Fingerprint))
		}
		return fmt.Errorf("keys: may upload: %w", err)
	}
	return fmt.Errorf("keys: may upload: unknown upload policy %q", policy)
}

// Reason says, for an uploader, why the store refused or reduced a key
// (Blocked, Reduced); it is empty for other outcomes.
func (c Change) Reason() string {
	switch c {
	case Blocked:
		return "this key is blocked on this server"
	case Reduced:
		return "this server keeps only part of this key (deleted by its owner, or blocked in part); only what is not blocked, such as revocations, was merged"
	}
	return ""
}
