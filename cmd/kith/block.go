// block.go: kith block, the operator's blocklist: keys, user IDs and
// certifications no node stores or serves, and the log of who changed it.

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/pgp"
)

const blockUsage = `block add FPR --reason TEXT [--keep-revocations] [--user-id HASH | --certification HASH] [--by NAME]
       kith block remove FPR --reason TEXT [--user-id HASH | --certification HASH] [--by NAME]
       kith block list [--log]
       kith block show FPR

Manages the blocklist every node sharing the store honours. "add" blocks
the key with primary fingerprint FPR: it is removed from the store (with
--keep-revocations, reduced to its primary key and revocations, which keep
merging) and refused on upload, load and recon fetch. With --user-id or
--certification it blocks one packet of the key instead, named by the
SHA-256 of its body as "show" lists them: the key is kept without it.
"remove" lifts a block; the key comes back with its next upload or recon
fetch. Every change is logged with who (--by, default the system user),
when and why ("list --log" prints the log).`

func runBlock(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		return misuse(env, "block", "needs a command: add, remove, list or show")
	}
	verb, args := args[0], args[1:]
	name := "block " + verb
	switch verb {
	case "add", "remove", "list", "show":
	case "help", "-h", "-help", "--help":
		name, args = "block", []string{"--help"}
	default:
		return misuse(env, "block", "unknown command %q: add, remove, list or show", verb)
	}
	// The fingerprint may come before the flags.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(args[1:], args[0])
	}
	fs := newFlagSet(env, name, blockUsage)
	reason := fs.String("reason", "", "why (required for add and remove; logged and listed)")
	keep := fs.Bool("keep-revocations", false, "keep the key as a tombstone that accepts revocations, instead of removing it")
	uidHash := fs.String("user-id", "", "block only the user ID with this SHA-256 `hash` (hex)")
	certHash := fs.String("certification", "", "block only the signature with this SHA-256 `hash` (hex)")
	by := fs.String("by", "", "who does it (default USER@HOST)")
	withLog := fs.Bool("log", false, "list: print the log of blocklist changes too")
	cfg, rest, err := loadToolConfig(fs, args, env.environ, "public_url", "listen")
	if err != nil {
		return err
	}
	var fp []byte
	switch verb {
	case "add", "remove", "show":
		if len(rest) != 1 {
			return fmt.Errorf("%w: kith block %s takes one fingerprint", errUsage, verb)
		}
		if fp, err = parseFingerprint(rest[0]); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	case "list":
		if len(rest) != 0 {
			return fmt.Errorf("%w: kith block list takes no arguments", errUsage)
		}
	}
	var hash []byte
	var hashTag pgp.Tag
	switch {
	case *uidHash != "" && *certHash != "":
		return fmt.Errorf("%w: give --user-id or --certification, not both", errUsage)
	case *uidHash != "":
		hash, hashTag = parseHash(*uidHash), pgp.TagUserID
	case *certHash != "":
		hash, hashTag = parseHash(*certHash), pgp.TagSignature
	}
	if (*uidHash != "" || *certHash != "") && len(hash) != 32 {
		return fmt.Errorf("%w: a packet hash is 64 hex digits (SHA-256; kith block show FPR lists them)", errUsage)
	}
	if hash != nil && *keep {
		return fmt.Errorf("%w: --keep-revocations applies to a whole key, not to one packet", errUsage)
	}
	if (verb == "add" || verb == "remove") && strings.TrimSpace(*reason) == "" {
		return fmt.Errorf("%w: kith block %s needs --reason", errUsage, verb)
	}
	actor := actorOr(*by, env)
	log := newLogger(env.stderr, cfg)
	// A removed or reduced key drops the identity links it carried, as
	// any key change does (the keys Service), and the identity Service
	// erases what the log's records about it hold of a person.
	st, svc, err := openOperatorStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	ks := keys.NewService(st.Store, keys.Options{Policy: pgp.DefaultPolicy(), Identities: svc, Logger: log})

	switch verb {
	case "add":
		email := ""
		if hash != nil {
			if email, err = checkPacketOfStoredKey(ctx, st.Store, fp, hash, hashTag); err != nil {
				return err
			}
		}
		out, err := ks.AddBlock(ctx, identity.Block{Fingerprint: fp, PacketHash: hash, KeepRevocations: *keep,
			Origin: identity.BlockByOperator, Reason: *reason, Actor: actor})
		if errors.Is(err, identity.ErrAlreadyBlocked) {
			return fmt.Errorf("block: %X is already blocked (kith block list)", fp)
		}
		if err != nil {
			return fmt.Errorf("block: %w", err)
		}
		// A blocked user ID's address, or everything of a blocked key,
		// leaves the log's artifacts; a blocked certification names no
		// one the key's records hold.
		switch {
		case hash == nil:
			_, err = svc.EraseKey(ctx, fp)
		case hashTag == pgp.TagUserID:
			_, err = svc.EraseUserID(ctx, fp, email)
		}
		if err != nil {
			return fmt.Errorf("block: %w", err)
		}
		fmt.Fprintf(env.stdout, "blocked %X%s: %s\n", fp, packetSuffix(hash), out)
	case "remove":
		err := st.RemoveBlock(ctx, fp, hash, actor, *reason)
		if errors.Is(err, identity.ErrNotBlocked) {
			return fmt.Errorf("block: %X%s is not blocked", fp, packetSuffix(hash))
		}
		if err != nil {
			return fmt.Errorf("block: %w", err)
		}
		fmt.Fprintf(env.stdout, "unblocked %X%s: its next upload or recon fetch is stored\n", fp, packetSuffix(hash))
	case "list":
		bl, err := st.Blocks(ctx)
		if err != nil {
			return fmt.Errorf("block: %w", err)
		}
		writeBlocks(env.stdout, bl)
		if *withLog {
			acts, err := st.OperatorActions(ctx, nil)
			if err != nil {
				return fmt.Errorf("block: %w", err)
			}
			writeActions(env.stdout, acts)
		}
	case "show":
		return showBlockable(ctx, env.stdout, st.Store, fp)
	}
	return nil
}

// parseFingerprint reads 40 or 64 hex digits, with or without 0x and
// spaces.
func parseFingerprint(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(strings.ReplaceAll(s, " ", ""), "0x"), "0X")
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 20 && len(b) != 32) {
		return nil, fmt.Errorf("%q is not a v4 or v6 fingerprint (40 or 64 hex digits)", s)
	}
	return b, nil
}

func parseHash(s string) []byte {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return b
}

func packetSuffix(hash []byte) string {
	if hash == nil {
		return ""
	}
	return " packet " + hex.EncodeToString(hash)
}

// defaultActor names the operator as USER@HOST.
// actorOr returns by, or when it is empty the system user running the
// command (defaultActor): who an operator command records as acting.
func actorOr(by string, env *environment) string {
	if by != "" {
		return by
	}
	return defaultActor(env.environ)
}

// openOperatorStore opens the existing store of an operator command and
// the identity Service over it; the caller closes the store.
func openOperatorStore(ctx context.Context, cfg Config, log *slog.Logger) (*openedStore, *identity.Service, error) {
	st, err := openExistingStore(ctx, cfg, log, postgres.Options{})
	if err != nil {
		return nil, nil, err
	}
	svc, err := newIdentityService(st.Store, cfg.serverName(), cfg.hostPolicy())
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("identity service: %w", err)
	}
	return st, svc, nil
}

func defaultActor(environ []string) string {
	user := "unknown"
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "USER="); ok && v != "" {
			user = v
		}
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return user + "@" + host
}

// storedKey returns the stored key with primary fingerprint fp, or nil.
func storedKey(ctx context.Context, st *postgres.Store, fp []byte) (*pgp.Key, error) {
	keys, _, err := st.FindKeys(ctx, keys.Query{Fingerprints: [][]byte{fp}, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("block: %w", err)
	}
	for _, k := range keys {
		if bytes.Equal(k.Fingerprint, fp) {
			pk, err := pgp.ParseKey(k.Packets)
			if err != nil {
				return nil, fmt.Errorf("block: stored key %X: %w", fp, err)
			}
			return pk, nil
		}
	}
	return nil, nil
}

// checkPacketOfStoredKey refuses a packet block that names no packet of
// that kind in the stored key (a mistyped hash would block nothing). For
// a user ID it returns the user ID's address ("" when it has none).
func checkPacketOfStoredKey(ctx context.Context, st *postgres.Store, fp, hash []byte, tag pgp.Tag) (string, error) {
	k, err := storedKey(ctx, st, fp)
	if err != nil || k == nil {
		return "", err // not stored: the block waits for the key
	}
	for _, bp := range pgp.BlockablePackets(k) {
		if bytes.Equal(bp.Hash[:], hash) && (bp.Tag == tag || (tag == pgp.TagUserID && bp.Tag == pgp.TagUserAttribute)) {
			if bp.Tag != pgp.TagUserID {
				return "", nil
			}
			for _, u := range k.Describe().UserIDs {
				if u.Text == bp.UserID {
					return u.Email, nil
				}
			}
			return "", nil
		}
	}
	kind := "user ID"
	if tag == pgp.TagSignature {
		kind = "signature"
	}
	return "", fmt.Errorf("block: the stored key %X carries no %s with hash %x (kith block show %X lists them)", fp, kind, hash, fp)
}

func showBlockable(ctx context.Context, w io.Writer, st *postgres.Store, fp []byte) error {
	k, err := storedKey(ctx, st, fp)
	if err != nil {
		return err
	}
	if k == nil {
		return fmt.Errorf("block: no stored key has fingerprint %X", fp)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tHASH\tISSUER\tON")
	for _, bp := range pgp.BlockablePackets(k) {
		switch bp.Tag {
		case pgp.TagUserID:
			fmt.Fprintf(tw, "user-id\t%x\t\t%q\n", bp.Hash, bp.UserID)
		case pgp.TagUserAttribute:
			fmt.Fprintf(tw, "user-attribute\t%x\t\t\n", bp.Hash)
		default:
			on := "key"
			if bp.UserID != "" {
				on = fmt.Sprintf("%q", bp.UserID)
			}
			fmt.Fprintf(tw, "signature 0x%02x\t%x\t%016X\t%s\n", bp.SigType, bp.Hash, bp.Issuer, on)
		}
	}
	return tw.Flush()
}

func writeBlocks(w io.Writer, bl []identity.Block) {
	if len(bl) == 0 {
		fmt.Fprintln(w, "no blocks")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FINGERPRINT\tWHAT\tBY\tWHEN\tREASON")
	for _, b := range bl {
		what := "key"
		switch {
		case !b.WholeKey():
			what = "packet " + hex.EncodeToString(b.PacketHash)
		case b.KeepRevocations:
			what = "key, revocations kept"
		}
		if b.Origin == identity.BlockByOwner {
			what += " (deleted by its owner)"
		}
		fmt.Fprintf(tw, "%X\t%s\t%s\t%s\t%s\n", b.Fingerprint, what, b.Actor, b.Created.UTC().Format(time.RFC3339), b.Reason)
	}
	tw.Flush()
}

func writeActions(w io.Writer, acts []identity.OperatorAction) {
	fmt.Fprintln(w, "\nlog:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tACTION\tFINGERPRINT\tBY\tREASON")
	for _, a := range acts {
		fmt.Fprintf(tw, "%s\t%s\t%X%s\t%s\t%s\n", a.Created.UTC().Format(time.RFC3339), a.Action, a.Fingerprint,
			packetSuffix(a.PacketHash), a.Actor, a.Reason)
	}
	tw.Flush()
}
