// tlog.go: wiring the transparency log: its key (log.key_file, or the
// database's shared secret), its origin (from public_url), the background
// signer, and `kith log-key`, which prints the verifier key.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/tlog"
)

// logKeySecret names the log key's seed in the secrets table.
const logKeySecret = "log.key"

// logOrigin is the log's origin line and key name: public_url without
// its scheme, and "/log".
func (c Config) logOrigin() string {
	u := c.publicURL()
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	return strings.TrimSuffix(u, "/") + "/log"
}

// logKey returns the log's signing key: from log.key_file when set (32
// random bytes, the Ed25519 seed), else the store's shared secret, so
// that every node of one database signs with the same key.
func logKey(ctx context.Context, cfg Config, st *postgres.Store) (*tlog.Key, error) {
	var seed []byte
	var err error
	if cfg.Log.KeyFile == "" {
		seed, err = st.Secret(ctx, logKeySecret, tlog.SeedSize)
	} else if seed, err = os.ReadFile(cfg.Log.KeyFile); err == nil && len(seed) != tlog.SeedSize {
		err = fmt.Errorf("%s holds %d bytes, want exactly %d random bytes", cfg.Log.KeyFile, len(seed), tlog.SeedSize)
	}
	if err != nil {
		return nil, fmt.Errorf("setting log.key_file: %w", err)
	}
	return tlog.NewKey(cfg.logOrigin(), seed)
}

// newTransparencyLog returns the signer that integrates svc's appends
// into the tree (its Run is the caller's to start), told of each of
// them, and the handler serving /log/.
func newTransparencyLog(ctx context.Context, cfg Config, st *postgres.Store, svc *identity.Service, reg prometheus.Registerer, log *slog.Logger) (*tlog.Log, *tlog.Handler, error) {
	key, err := logKey(ctx, cfg, st)
	if err != nil {
		return nil, nil, err
	}
	opts := tlog.Options{Logger: log}
	// A nil *Submitter in the interface would not be nil.
	if w, err := logWitnesses(cfg, reg, log); err != nil {
		return nil, nil, err
	} else if w != nil {
		opts.Witnesses = w
	}
	l := tlog.New(st, key, opts)
	svc.Subscribe(func(context.Context, []identity.Handle) { l.Notify() })
	return l, tlog.NewHandler(st, key.VerifierKey(), log), nil
}

func runLogKey(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "log-key", "log-key [flags]\n\nPrints the transparency log's verifier key (as GET /log/key serves it): from\nthe store of the server (its data directory or database), or with --server\nfrom a running server, checked against the checkpoint it serves.")
	server := fs.String("server", "", "fetch the key from the Kith server at `URL` and check that it signs the server's checkpoint, instead of reading the store")
	cfg, rest, err := loadToolConfig(fs, args, env.environ, "public_url", "listen", "log.key_file")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return misuse(env, "log-key", "takes no arguments, got %q", rest)
	}
	log := newLogger(env.stderr, cfg)
	if *server != "" {
		return printServedLogKey(ctx, env, log, *server)
	}
	st, err := openExistingStore(ctx, cfg, log, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := logKey(ctx, cfg, st.Store)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, key.VerifierKey())
	return nil
}

// printServedLogKey prints the log key server serves, once its served
// checkpoint verifies with it; otherwise it prints nothing and fails.
func printServedLogKey(ctx context.Context, env *environment, log *slog.Logger, server string) error {
	c, err := newServerClient(server, 0)
	if err != nil {
		return err
	}
	warnPlainHTTP(log, c, "hand you a key of their own")
	key, cp, err := c.LogKey(ctx)
	if err != nil {
		return fmt.Errorf("log-key: %s: %w; not printing a key", c.Server(), err)
	}
	log.Debug("the served key signs the served checkpoint", "origin", cp.Origin, "size", cp.Size)
	fmt.Fprintln(env.stdout, key)
	return nil
}
