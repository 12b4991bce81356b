// witness.go: wiring witnessed checkpoints: the witnesses the log asks to
// cosign (log.witness_policy), this server as a witness of other logs
// (witness.enabled, witness.policy), and `kith witness-key`, which prints
// the witness's cosignature verifier key.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/identity/postgres"
	"github.com/kith-keyserver/kith/identity/tlog"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/identity/tlog/witness"
)

// witnessKeySecret names the witness's cosignature key seed in the
// secrets table: every node of one database cosigns with the same key.
const witnessKeySecret = "witness.key"

// witnessName is the witness's cosigner name: public_url without its
// scheme, and "/witness" (its submission prefix, as the log's origin is
// its URL).
func (c Config) witnessName() string {
	u := c.publicURL()
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	return strings.TrimSuffix(u, "/") + witness.Prefix
}

// witnessKey returns the node's cosigner, from the store's shared
// secret.
func witnessKey(ctx context.Context, cfg Config, st *postgres.Store) (*tlog.Cosigner, error) {
	seed, err := st.Secret(ctx, witnessKeySecret, tlog.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	return tlog.NewCosigner(cfg.witnessName(), seed)
}

// logWitnesses returns the submitter that asks log.witness_policy's
// witnesses to cosign, or nil when the setting is empty.
func logWitnesses(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*witness.Submitter, error) {
	if cfg.Log.WitnessPolicy == "" {
		return nil, nil
	}
	p, err := policy.ReadFile(cfg.Log.WitnessPolicy)
	if err != nil {
		return nil, fmt.Errorf("setting log.witness_policy: %w", err)
	}
	s, err := witness.NewSubmitter(p, witness.SubmitterOptions{Logger: log, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("setting log.witness_policy: %w", err)
	}
	return s, nil
}

// mountWitness serves the witness API when witness.enabled is set.
func mountWitness(ctx context.Context, mux *http.ServeMux, cfg Config, st *postgres.Store, reg prometheus.Registerer, log *slog.Logger) error {
	if !cfg.Witness.Enabled {
		return nil
	}
	p, err := policy.ReadFile(cfg.Witness.Policy)
	if err != nil {
		return fmt.Errorf("setting witness.policy: %w", err)
	}
	if len(p.Logs) == 0 {
		return fmt.Errorf("setting witness.policy: %s lists no log to cosign", cfg.Witness.Policy)
	}
	key, err := witnessKey(ctx, cfg, st)
	if err != nil {
		return err
	}
	witness.NewHandler(p, key, st, witness.HandlerOptions{Logger: log, Registerer: reg}).Register(mux)
	origins := make([]string, len(p.Logs))
	for i, l := range p.Logs {
		origins[i] = l.Origin()
	}
	log.Info("witnessing", "vkey", key.VerifierKey(), "logs", origins)
	return nil
}

func runWitnessKey(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "witness-key", "witness-key [flags]\n\nPrints this server's witness key, the C2SP cosignature verifier key (vkey)\nits cosignatures verify with, from the store of the server (its data directory\nor database); a log's policy names it on a witness line.")
	cfg, rest, err := loadToolConfig(fs, args, env.environ, "public_url", "listen")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return misuse(env, "witness-key", "takes no arguments, got %q", rest)
	}
	log := newLogger(env.stderr, cfg)
	st, err := openExistingStore(ctx, cfg, log, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := witnessKey(ctx, cfg, st.Store)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, key.VerifierKey())
	return nil
}

// readLogPolicy reads a client's witness policy (verify-log --policy,
// authorized-keys --log-policy) and returns it with the log key its one
// log line gives, which stands for --log-key.
func readLogPolicy(file string) (*policy.Policy, string, error) {
	p, err := policy.ReadFile(file)
	if err != nil {
		return nil, "", err
	}
	if len(p.Logs) != 1 {
		return nil, "", fmt.Errorf("%s: want exactly one log line, the log's key, not %d", file, len(p.Logs))
	}
	return p, p.Logs[0].VerifierKey, nil
}
