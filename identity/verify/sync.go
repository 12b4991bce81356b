// sync.go: hooking the identity service to a key store's changes, where
// the identity package (which knows no OpenPGP) meets package pgp.

package verify

import (
	"context"
	"log/slog"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
)

// KeyChangeSource is a key store that reports every key a write through
// it changed, before the write returns (identity/postgres.Store is one).
type KeyChangeSource interface {
	OnKeysChanged(fn func(ctx context.Context, changed []*pgp.Key))
}

// SyncLinksOnKeyChange has svc refresh the links of every key src
// changes (identity.Service.SyncKeys), whichever path wrote it; failures
// go to log (the next change of the key, or a restart's
// SyncLinkedKeys, catches up).
func SyncLinksOnKeyChange(src KeyChangeSource, svc *identity.Service, log *slog.Logger) {
	src.OnKeysChanged(func(ctx context.Context, changed []*pgp.Key) {
		fps := make([][]byte, len(changed))
		for i, k := range changed {
			fps[i] = k.Fingerprint()
		}
		if err := svc.SyncKeys(ctx, fps); err != nil {
			log.Warn("sync the identity links of changed keys", "keys", len(fps), "err", err)
		}
	})
}
