// armor.go: stored keys (canonical binary packets) as one ASCII-armored
// public-key block, the body of op=get and op=hget.

package hkp

import (
	"context"
	"fmt"
	"io"

	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/pgp"
)

// writeArmoredPackets writes the keys' packets, in order, as one armored
// block. The packets are stored in the canonical form pgp.WriteArmored
// would write, so they are not parsed again here.
func writeArmoredPackets(w io.Writer, keys []keys.Stored) error {
	return writeArmored(w, func(write func([]byte) error) error {
		for i := range keys {
			if err := write(keys[i].Packets); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeArmoredStream is writeArmoredPackets for keys read one at a time
// through stream (a Store's StreamPackets), so that an answer of many
// large keys never sits in memory whole.
func writeArmoredStream(ctx context.Context, w io.Writer, fps [][]byte, stream func(ctx context.Context, fps [][]byte, fn func(fp, packets []byte) error) error) error {
	return writeArmored(w, func(write func([]byte) error) error {
		n := 0
		err := stream(ctx, fps, func(_, packets []byte) error {
			n++
			return write(packets)
		})
		if err == nil && n != len(fps) {
			// A key went away between the query and the read: the count
			// in X-HKP-Results-Count is already sent, so cut the answer.
			err = fmt.Errorf("hkp: armor: %d of %d keys still stored", n, len(fps))
		}
		return err
	})
}

// writeArmored writes one armored public-key block whose body each
// writes, a key's packets at a time, and a final newline.
func writeArmored(w io.Writer, each func(write func([]byte) error) error) error {
	aw := pgp.NewArmorWriter(w)
	err := each(func(packets []byte) error {
		if _, err := aw.Write(packets); err != nil {
			return fmt.Errorf("hkp: armor: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("hkp: armor: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("hkp: armor: %w", err)
	}
	return nil
}
