// Command kith is the Kith keyserver: one binary that serves HKP, the web
// pages and the API from one PostgreSQL store, and the tools that share that
// store.
//
//	kith serve     run the server
//	kith migrate   apply the store's schema migrations and print the version
//	kith load      bulk-load SKS dump files and armored key files
//	kith dump      write the store as SKS dump files
//	kith repair    re-run the key policy over every stored key
//	kith block     the blocklist: keys, user IDs and certifications not stored
//	kith id        claim a handle and link keys at a server (the client)
//	kith ssh-cert  get an SSH certificate for a proven key (the client)
//	kith krl       fetch and install the SSH certificate revocation list
//	kith refresh   refresh the keys you hold through a keyserver's prefix log
//	kith version   print the version
//
// Run "kith COMMAND --help" for a command's settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is Kith's release; builds may override it with
// -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// command is one subcommand of kith.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

// environment is what a command may touch of the process: its streams and
// its environment variables. Tests supply their own.
type environment struct {
	stdout, stderr io.Writer
	environ        []string
	// flagErrorShown: a command's flag set has printed its parse error
	// and a hint; main prints no more of it.
	flagErrorShown bool
}

func commands() []command {
	return []command{
		{"serve", "run the keyserver", runServe},
		{"migrate", "apply the store's schema migrations and print the schema version", runMigrate},
		{"load", "bulk-load SKS dump files and armored key files into the store", runLoad},
		{"dump", "write every stored key as SKS-format dump files", runDump},
		{"repair", "re-run the key policy over every stored key and write back what it changes", runRepair},
		{"authorized-keys", "print a user's proven SSH keys from a Kith server (sshd's AuthorizedKeysCommand)", runAuthorizedKeys},
		{"known-hosts", "print a host's proven SSH host keys from a Kith server (ssh's KnownHostsCommand)", runKnownHosts},
		{"verify-log", "fetch or read the evidence log and re-verify every record and the hash chain", runVerifyLog},
		{"log-key", "print the transparency log's verifier key", runLogKey},
		{"monitor", "follow the transparency log and report new records touching your handles, addresses and keys", runMonitor},
		{"witness-key", "print this server's witness (cosignature) verifier key", runWitnessKey},
		{"block", "add, remove and list blocked keys, user IDs and certifications (every node honours them)", runBlock},
		{"host", "release a host name held by a squatter's key or by keys the host lost (logged)", runHost},
		{"id", "claim a handle and link or revoke keys at a Kith server, signing with ssh-keygen or gpg", runID},
		{"ssh-cert", "get an SSH user certificate for a key proven for a handle; writes KEY-cert.pub", runSSHCert},
		{"ssh-ca-key", "print a Kith server's SSH user CA key (for sshd's TrustedUserCAKeys)", runSSHCAKey},
		{"krl", "fetch, check and install a Kith server's SSH certificate revocation list (sshd's RevokedKeys)", runKRL},
		{"refresh", "refresh gpg's keys (or a file's) from a keyserver, fetching only those whose fingerprint prefix changed", runRefresh},
		{"version", "print Kith's version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &environment{stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ()}
	err := run(ctx, env, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errQuietUsage) && !env.flagErrorShown {
			fmt.Fprintln(os.Stderr, "kith:", err)
		}
		if env.flagErrorShown {
			os.Exit(2)
		}
		os.Exit(exitCode(err))
	}
}

// errUsage marks a command line that names no known command.
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// run dispatches to the subcommand named by args[0].
func run(ctx context.Context, env *environment, args []string) error {
	cmds := commands()
	if len(args) == 0 {
		usage(env.stderr, cmds)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(env.stdout, cmds) // asked for: to stdout, exit 0
		return flag.ErrHelp
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	usage(env.stderr, cmds)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func usage(w io.Writer, cmds []command) {
	var b strings.Builder
	b.WriteString("Kith, a multi-protocol identity keyserver.\n\nUsage: kith COMMAND [flags]\n\nCommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-16s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'kith COMMAND --help' for a command's settings.\n")
	io.WriteString(w, b.String())
}

// newFlagSet returns a flag set that reports errors instead of exiting.
// --help prints the usage to stdout (and the command exits 0); a bad flag
// prints one line and a hint to stderr (exit 2), not the whole usage.
func newFlagSet(env *environment, name, synopsis string) *flag.FlagSet {
	return newFlagSetWith(env, name, func(w io.Writer) {
		fmt.Fprintf(w, "Usage: kith %s\n\n", synopsis)
		fmt.Fprintf(w, "Settings come from the defaults, then the --config file, then KITH_* environment variables, then flags.\n\n")
	})
}

// newFlagSetWith is newFlagSet for a command that writes the text before
// its flags itself.
func newFlagSetWith(env *environment, name string, head func(w io.Writer)) *flag.FlagSet {
	fs := flag.NewFlagSet("kith "+name, flag.ContinueOnError)
	out := &flagOutput{}
	fs.SetOutput(out)
	fs.Usage = func() {
		if out.msg.Len() > 0 { // the flag package wrote an error first
			fmt.Fprintf(env.stderr, "kith %s: %sRun 'kith %s --help' for its flags.\n", name, out.msg.String(), name)
			out.msg.Reset()
			env.flagErrorShown = true
			return
		}
		head(env.stdout)
		fs.SetOutput(env.stdout)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	return fs
}

// misuse reports a command line its flag set parsed but the command cannot
// run, as a bad flag is reported: one line and a hint on stderr, exit 2.
func misuse(env *environment, name, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(env.stderr, "kith %s: %s\nRun 'kith %s --help' for its flags.\n", name, msg, name)
	env.flagErrorShown = true
	return fmt.Errorf("%w: %s", errUsage, msg)
}

// flagOutput keeps what the flag package writes before it calls Usage:
// the parse error, if any.
type flagOutput struct{ msg strings.Builder }

func (o *flagOutput) Write(p []byte) (int, error) { return o.msg.Write(p) }

// newLogger returns the process logger for cfg.
func newLogger(w io.Writer, cfg Config) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

func runVersion(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "version", "version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "kith %s\n", version)
	return nil
}
