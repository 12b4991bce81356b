// armor.go: stored keys (canonical binary packets) as one ASCII-armored
// public-key block, the body of op=get and op=hget.

package hkp

import (
	"fmt"
	"io"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/kith-keyserver/kith/identity"
)

// writeArmoredPackets writes the keys' packets, in order, as one armored
// block. The packets are stored in the canonical form pgp.WriteArmored
// would write, so they are not parsed again here.
func writeArmoredPackets(w io.Writer, keys []identity.StoredKey) error {
	aw, err := armor.Encode(w, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		return fmt.Errorf("hkp: armor: %w", err)
	}
	for i := range keys {
		if _, err := aw.Write(keys[i].Packets); err != nil {
			return fmt.Errorf("hkp: armor: %w", err)
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("hkp: armor: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("hkp: armor: %w", err)
	}
	return nil
}
