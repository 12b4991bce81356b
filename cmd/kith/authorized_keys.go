// authorized_keys.go: `kith authorized-keys`, sshd's AuthorizedKeysCommand.
// It maps the local user to a handle and prints the handle's proven SSH
// keys as package web/api/client gets them: from the server, or while the
// server is unavailable from a private cache, and otherwise nothing (it
// fails closed). Serving from the cache and plain http to another host
// are warned of on stderr, which sshd logs.

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/web/api/client"
)

// authorizedKeysEnvPrefix starts the command's environment variables.
// Its settings are not the server's (it runs on every SSH host, far from
// the store), so they have their own flags and variables.
const authorizedKeysEnvPrefix = "KITH_AUTHORIZED_KEYS_"

func runAuthorizedKeys(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSetWith(env, "authorized-keys", func(w io.Writer) {
		fmt.Fprintf(w, "Usage: kith authorized-keys [flags] USER\n\n")
		fmt.Fprintf(w, "Prints USER's proven SSH keys from a Kith server, for sshd's AuthorizedKeysCommand:\n")
		fmt.Fprintf(w, "  AuthorizedKeysCommand /usr/local/bin/kith authorized-keys --server URL --fingerprint %%f %%u\n")
		fmt.Fprintf(w, "  AuthorizedKeysCommandUser kith-ssh\n")
		fmt.Fprintf(w, "The cache directory must belong to that user, mode 0700: install -d -o kith-ssh -m 0700 /var/cache/kith\n\n")
		fmt.Fprintf(w, "Settings come from the defaults, then KITH_AUTHORIZED_KEYS_* environment variables, then flags.\n\n")
	})
	var server, mapFile, policyFile string
	timeout := 2 * time.Second
	opts := client.KeysOptions{CacheDir: "/var/cache/kith", MaxAge: 24 * time.Hour}
	// A setting is set from a string, and shows its default as one.
	type setting struct {
		set   func(string) error
		value func() string
	}
	str := func(p *string) setting {
		return setting{func(s string) error { *p = s; return nil }, func() string { return *p }}
	}
	dur := func(p *time.Duration, off bool) setting {
		return setting{func(s string) error {
			if off && (s == "off" || s == "0") {
				*p = 0
				return nil
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				if off {
					return fmt.Errorf("%q is not a positive duration, 0 or off", s)
				}
				return fmt.Errorf("%q is not a positive duration", s)
			}
			*p = d
			return nil
		}, func() string {
			if *p == 0 {
				return "off"
			}
			return p.String()
		}}
	}
	type binding struct {
		name, usage string
		setting
	}
	bind := func(name, usage string, s setting) binding { return binding{name, usage, s} }
	bs := []binding{
		bind("server", "Kith server `URL`, e.g. https://keys.example.org", str(&server)),
		bind("map", "`file` of \"user handle\" lines; without it the user name is the handle, and a system account (ubuntu, www-data, ...) has none", str(&mapFile)),
		bind("fingerprint", "print only the key with this SHA256 `fingerprint` (sshd's %f)", str(&opts.Fingerprint)),
		bind("timeout", "how long (a `duration`) to wait for the server", dur(&timeout, false)),
		bind("log-key", "the transparency log's verifier `key` (kith log-key prints it): print only keys whose proving records are in a checkpoint consistent with the last one seen", str(&opts.LogKey)),
		bind("log-policy", "witness policy `file` (C2SP tlog-policy): print only keys proven by a checkpoint its quorum of witnesses cosigned; its log line stands for --log-key", str(&policyFile)),
		bind("cache-dir", "`directory` of last good answers", str(&opts.CacheDir)),
		bind("max-age", "how old (a `duration`) a cached answer may be and still be served when the server is unavailable; 0 or off: no cache", dur(&opts.MaxAge, true)),
	}
	// The environment first, so that flags win.
	known := map[string]binding{}
	for _, b := range bs {
		envName := authorizedKeysEnvPrefix + strings.ToUpper(strings.ReplaceAll(b.name, "-", "_"))
		known[envName] = b
		usage := fmt.Sprintf("%s (env %s)", b.usage, envName)
		if d := b.value(); d != "" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fs.Func(b.name, usage, b.set)
	}
	var names []string
	for _, kv := range env.environ {
		if k, val, ok := strings.Cut(kv, "="); ok && val != "" && strings.HasPrefix(k, authorizedKeysEnvPrefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		b, ok := known[k]
		if !ok {
			return fmt.Errorf("unknown setting in environment: %s", k)
		}
		if err := b.set(getenv(env, k)); err != nil {
			return fmt.Errorf("setting %s (%s): %w", b.name, k, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return misuse(env, "authorized-keys", "takes one USER, got %d arguments", fs.NArg())
	}
	if server == "" {
		return fmt.Errorf("setting server: no Kith server given (--server or %sSERVER)", authorizedKeysEnvPrefix)
	}
	c, err := client.New(server, client.Options{Timeout: timeout, UserAgent: "kith-authorized-keys/" + version})
	if err != nil {
		return fmt.Errorf("setting server: %w", err)
	}
	if policyFile != "" {
		if opts.LogPolicy, err = policy.ReadFile(policyFile); err != nil {
			return fmt.Errorf("setting log-policy: %w", err)
		}
	}
	user := fs.Arg(0)
	log := slog.New(slog.NewTextHandler(env.stderr, nil)).With("command", "authorized-keys")
	warnPlainHTTP(log.With("server", server), c, "substitute their own keys and log in")
	handle, err := client.MapUser(mapFile, user)
	if err != nil {
		log.Warn("printing no keys", "user", user, "reason", err.Error())
		return fmt.Errorf("%w: %v", client.ErrNoKeys, err)
	}
	opts.Logger = log.With("user", user, "handle", handle)
	keys, err := c.AuthorizedKeys(ctx, handle, opts)
	if err != nil {
		return err
	}
	_, err = env.stdout.Write(keys)
	return err
}
