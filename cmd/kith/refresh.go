// refresh.go: `kith refresh`, private key refresh: the keys a user holds
// (gpg's public keyring, or a file) refreshed from a keyserver through
// its fingerprint prefix log (package hkp/refresh), fetching only the keys
// whose prefix changed since the last refresh, which a state file
// remembers per server.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kith-keyserver/kith/hkp/refresh"
	"github.com/kith-keyserver/kith/pgp"
)

// refreshFlags are the flags of kith refresh.
type refreshFlags struct {
	server, keys, out, state, since, metrics string
	all                                      bool
}

func runRefresh(ctx context.Context, env *environment, args []string) error {
	fs := newToolFlags(env, "refresh", "refresh [--server URL] [--keys FILE [--out FILE]] [--since YYYY-MM-DD | --all]",
		"Refreshes the keys you hold from a keyserver, fetching only those whose fingerprint prefix\n"+
			"the server's prefix log (/pks/v2/prefixlog/DATE) lists for a day since the last refresh:\n"+
			"the server learns nothing of the other keys. By default the keys are gpg's public keys\n"+
			"and the fetched ones are imported into gpg (gpg --import).")
	var f refreshFlags
	fs.StringVar(&f.server, "server", getenv(env, idServerEnv), "keyserver `URL` (http, https, hkp or hkps; env "+idServerEnv+")")
	fs.StringVar(&f.keys, "keys", "", "refresh the keys of this `file` (OpenPGP keys, armored or binary, or fingerprints one a line) instead of gpg's, writing the fetched ones to --out")
	fs.StringVar(&f.out, "out", "-", "with --keys, write the fetched keys (armored) to this `file`")
	fs.StringVar(&f.state, "state", "", "`file` remembering when each server was last refreshed (default $XDG_STATE_HOME/kith/refresh.json)")
	fs.StringVar(&f.since, "since", "", "refresh the changes since this `day` (YYYY-MM-DD, UTC) instead of the last refresh")
	fs.BoolVar(&f.all, "all", false, "fetch every key held (as gpg --refresh-keys does; the server learns them all), and remember the refresh")
	fs.StringVar(&f.metrics, "metrics-file", "", "write the refresh's counts to this `file` in Prometheus text format (for node_exporter's textfile collector)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: kith refresh takes no arguments, got %q", errUsage, fs.Args())
	}
	if f.server == "" {
		return fmt.Errorf("%w: no server: give --server URL or set %s", errUsage, idServerEnv)
	}
	if f.all && f.since != "" {
		return fmt.Errorf("%w: --all and --since exclude each other", errUsage)
	}
	if f.keys == "" && f.out != "-" {
		return fmt.Errorf("%w: --out goes with --keys (gpg's keys are imported into gpg)", errUsage)
	}
	cl, err := refresh.New(f.server, refresh.Options{UserAgent: "kith/" + version})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	statePath := f.state
	if statePath == "" {
		if statePath, err = defaultRefreshState(env); err != nil {
			return err
		}
	}
	st, err := readRefreshState(statePath)
	if err != nil {
		return err
	}

	var held [][]byte
	if f.keys != "" {
		held, err = heldFromFile(f.keys)
	} else {
		held, err = heldFromGPG(ctx, env)
	}
	if err != nil {
		return err
	}

	var fetched bytes.Buffer
	got := func(k *pgp.Key) error {
		fetched.Write(k.Bytes())
		return nil
	}
	var r refresh.Result
	var since time.Time
	switch {
	case f.all:
		r, err = cl.RefreshAll(ctx, held, got)
	default:
		since, err = refreshSince(f.since, st, f.server, statePath)
		if err != nil {
			return err
		}
		r, err = cl.Refresh(ctx, held, since, got)
		if errors.Is(err, refresh.ErrNoPrefixLog) || errors.Is(err, refresh.ErrTooOld) {
			return fmt.Errorf("%w; run kith refresh --all to fetch every key once (the server then learns them all)", err)
		}
	}
	if err != nil {
		return err
	}
	if err := deliverRefreshed(ctx, env, f, fetched.Bytes()); err != nil {
		return err
	}
	st.Servers[f.server] = r.Began.UTC()
	if err := writeRefreshState(statePath, st); err != nil {
		return err
	}
	from := "every key"
	if !since.IsZero() {
		from = "changes since " + since.UTC().Format(time.DateOnly)
	}
	fmt.Fprintf(env.stderr, "kith refresh: %s, %s: %d keys held, %d daily logs read (%d prefixes), %d fetched, %d not on the server, %d skipped without a download\n",
		f.server, from, r.Held, r.Days, r.Prefixes, r.Fetched, r.Missing, r.Skipped)
	if f.metrics != "" {
		if err := writeRefreshMetrics(f.metrics, r); err != nil {
			return err
		}
	}
	return nil
}

// refreshSince is the time a refresh starts from: --since, or the last
// refresh of server the state remembers.
func refreshSince(flag string, st refreshState, server, statePath string) (time.Time, error) {
	if flag != "" {
		t, err := time.Parse(time.DateOnly, flag)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: --since %q is not a day (YYYY-MM-DD)", errUsage, flag)
		}
		// The whole day: Refresh starts a slack before it.
		return t.Add(refresh.Slack), nil
	}
	t, ok := st.Servers[server]
	if !ok {
		return time.Time{}, fmt.Errorf("%w: %s has no earlier refresh of %s: give --since DAY (when your keys were last fetched), or --all to fetch every key once",
			errUsage, statePath, server)
	}
	return t, nil
}

// deliverRefreshed hands the fetched keys (binary) to gpg, or writes them
// armored to --out.
func deliverRefreshed(ctx context.Context, env *environment, f refreshFlags, fetched []byte) error {
	if f.keys == "" {
		if len(fetched) == 0 {
			return nil
		}
		if _, err := runGPG(ctx, env, fetched, "--batch", "--import"); err != nil {
			return fmt.Errorf("kith refresh: import into gpg: %w", err)
		}
		return nil
	}
	ks, err := pgp.ReadKeys(bytes.NewReader(fetched))
	if err != nil {
		return fmt.Errorf("kith refresh: %w", err)
	}
	var b bytes.Buffer
	if len(ks) > 0 {
		if err := pgp.WriteArmored(&b, ks...); err != nil {
			return fmt.Errorf("kith refresh: %w", err)
		}
	}
	if f.out == "-" {
		_, err := env.stdout.Write(b.Bytes())
		return err
	}
	if err := os.WriteFile(f.out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("kith refresh: %w", err)
	}
	return nil
}

// heldFromGPG lists the primary fingerprints of gpg's public keys.
func heldFromGPG(ctx context.Context, env *environment) ([][]byte, error) {
	out, err := runGPG(ctx, env, nil, "--batch", "--with-colons", "--list-keys")
	if err != nil {
		return nil, fmt.Errorf("kith refresh: list gpg's keys: %w", err)
	}
	var held [][]byte
	inPub := false
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Split(line, ":")
		switch fields[0] {
		case "pub":
			inPub = true
		case "fpr":
			if inPub && len(fields) > 9 {
				if fp, err := hex.DecodeString(fields[9]); err == nil {
					held = append(held, fp)
				}
			}
			inPub = false
		default:
			inPub = false
		}
	}
	return held, nil
}

// runGPG runs gpg with the command's environment (GNUPGHOME, HOME).
func runGPG(ctx context.Context, env *environment, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "gpg", args...)
	cmd.Env = env.environ
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return nil, fmt.Errorf("gpg: %w: %s", err, msg)
		}
		return nil, fmt.Errorf("gpg: %w", err)
	}
	return out.Bytes(), nil
}

// heldFromFile reads the primary fingerprints of a file's OpenPGP keys
// or, if it holds none, its lines of hex fingerprints (spaces allowed,
// # comments).
func heldFromFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kith refresh: %w", err)
	}
	if ks, _ := pgp.ReadKeys(bytes.NewReader(b)); len(ks) > 0 {
		held := make([][]byte, len(ks))
		for i, k := range ks {
			held[i] = k.Fingerprint()
		}
		return held, nil
	}
	var held [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimPrefix(strings.ToLower(strings.Join(strings.Fields(line), "")), "0x")
		if line == "" {
			continue
		}
		fp, err := hex.DecodeString(line)
		if err != nil || (len(fp) != 20 && len(fp) != 32) {
			return nil, fmt.Errorf("kith refresh: %s:%d: neither an OpenPGP key nor a fingerprint (40 or 64 hex digits)", path, n)
		}
		held = append(held, fp)
	}
	return held, sc.Err()
}

// refreshState is the state file: when each server was last refreshed,
// by the server's clock.
type refreshState struct {
	Servers map[string]time.Time `json:"servers"`
}

// defaultRefreshState is $XDG_STATE_HOME/kith/refresh.json, or
// ~/.local/state/kith/refresh.json.
func defaultRefreshState(env *environment) (string, error) {
	if dir := getenv(env, "XDG_STATE_HOME"); dir != "" {
		return filepath.Join(dir, "kith", "refresh.json"), nil
	}
	home := getenv(env, "HOME")
	if home == "" {
		return "", fmt.Errorf("%w: no HOME nor XDG_STATE_HOME: give --state FILE", errUsage)
	}
	return filepath.Join(home, ".local", "state", "kith", "refresh.json"), nil
}

func readRefreshState(path string) (refreshState, error) {
	st := refreshState{Servers: map[string]time.Time{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return st, fmt.Errorf("kith refresh: state %s: %w", path, err)
	}
	if st.Servers == nil {
		st.Servers = map[string]time.Time{}
	}
	return st, nil
}

// writeRefreshState replaces the state file whole (a crash leaves the
// old one).
func writeRefreshState(path string, st refreshState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kith refresh: state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("kith refresh: state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("kith refresh: state: %w", err)
	}
	return nil
}

// writeRefreshMetrics writes the refresh's counts as Prometheus gauges.
func writeRefreshMetrics(path string, r refresh.Result) error {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, v float64) {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		g.Set(v)
		reg.MustRegister(g)
	}
	gauge("kith_refresh_keys_held", "Keys the last refresh was given.", float64(r.Held))
	gauge("kith_refresh_keys_fetched", "Keys the last refresh downloaded, their prefix being in a prefix log.", float64(r.Fetched))
	gauge("kith_refresh_keys_missing", "Keys the last refresh asked for that the server did not have.", float64(r.Missing))
	gauge("kith_refresh_keys_skipped", "Keys the last refresh did not download: their prefix was in no prefix log.", float64(r.Skipped))
	gauge("kith_refresh_prefix_logs", "Daily prefix logs the last refresh read.", float64(r.Days))
	gauge("kith_refresh_last_success_timestamp_seconds", "When the last refresh began, by the server's clock.", float64(r.Began.Unix()))
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("kith refresh: metrics: %w", err)
	}
	return nil
}
