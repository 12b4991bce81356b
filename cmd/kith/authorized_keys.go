// authorized_keys.go: `kith authorized-keys`, sshd's AuthorizedKeysCommand.
// It maps the local user to a handle, fetches the handle's proven SSH keys
// from a Kith server over HTTP and prints them; when the server does not
// answer in time it prints its last good answer from a local cache, if that
// is young enough, and otherwise nothing: it fails closed. It never touches
// the store and never asks for keys that are only claimed.

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
)

// authorizedKeysConfig is the command's settings. They are not the
// server's (the command runs on every SSH host, far from the store), so
// they have their own flags and KITH_AUTHORIZED_KEYS_* variables.
type authorizedKeysConfig struct {
	Server      string
	Map         string
	Fingerprint string
	Timeout     time.Duration
	CacheDir    string
	MaxAge      time.Duration
}

// maxKeysBody bounds a fetched answer: a few hundred keys at most.
const maxKeysBody = 1 << 20

// authorizedKeysEnvPrefix starts the command's environment variables.
const authorizedKeysEnvPrefix = "KITH_AUTHORIZED_KEYS_"

func runAuthorizedKeys(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("kith authorized-keys", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfg := authorizedKeysConfig{Timeout: 2 * time.Second, CacheDir: "/var/cache/kith", MaxAge: 24 * time.Hour}
	type binding struct {
		name, env, usage string
		set              func(string) error
		value            func() string
	}
	str := func(p *string) (func(string) error, func() string) {
		return func(s string) error { *p = s; return nil }, func() string { return *p }
	}
	dur := func(p *time.Duration) (func(string) error, func() string) {
		return func(s string) error {
				d, err := time.ParseDuration(s)
				if err != nil || d <= 0 {
					return fmt.Errorf("%q is not a positive duration", s)
				}
				*p = d
				return nil
			}, func() string {
				return p.String()
			}
	}
	var bs []binding
	add := func(name, usage string, set func(string) error, value func() string) {
		bs = append(bs, binding{name, authorizedKeysEnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_")), usage, set, value})
	}
	s, v := str(&cfg.Server)
	add("server", "Kith server `URL`, e.g. https://keys.example.org", s, v)
	s, v = str(&cfg.Map)
	add("map", "`file` of \"user handle\" lines; without it the user name is the handle", s, v)
	s, v = str(&cfg.Fingerprint)
	add("fingerprint", "print only the key with this SHA256 `fingerprint` (sshd's %f)", s, v)
	s, v = dur(&cfg.Timeout)
	add("timeout", "how long (a `duration`) to wait for the server", s, v)
	s, v = str(&cfg.CacheDir)
	add("cache-dir", "`directory` of last good answers", s, v)
	s, v = dur(&cfg.MaxAge)
	add("max-age", "how old (a `duration`) a cached answer may be and still be used", s, v)
	for _, b := range bs {
		fs.Func(b.name, fmt.Sprintf("%s (env %s)", b.usage, b.env), b.set)
	}
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: kith authorized-keys [flags] USER\n\n")
		fmt.Fprintf(env.stderr, "Prints USER's proven SSH keys from a Kith server, for sshd's AuthorizedKeysCommand:\n")
		fmt.Fprintf(env.stderr, "  AuthorizedKeysCommand /usr/bin/kith authorized-keys --server URL --fingerprint %%f %%u\n\n")
		fmt.Fprintf(env.stderr, "Settings come from the defaults, then KITH_AUTHORIZED_KEYS_* environment variables, then flags.\n\n")
		fs.PrintDefaults()
	}
	// The environment first, so that flags win.
	known := map[string]binding{}
	for _, b := range bs {
		known[b.env] = b
	}
	var names []string
	vals := map[string]string{}
	for _, kv := range env.environ {
		if k, val, ok := strings.Cut(kv, "="); ok && val != "" && strings.HasPrefix(k, authorizedKeysEnvPrefix) {
			names = append(names, k)
			vals[k] = val
		}
	}
	sort.Strings(names)
	for _, k := range names {
		b, ok := known[k]
		if !ok {
			return fmt.Errorf("unknown setting in environment: %s", k)
		}
		if err := b.set(vals[k]); err != nil {
			return fmt.Errorf("setting %s (%s): %w", b.name, k, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: authorized-keys takes one USER", errUsage)
	}
	if cfg.Server == "" {
		return fmt.Errorf("setting server: no Kith server given (--server or %sSERVER)", authorizedKeysEnvPrefix)
	}
	u, err := url.Parse(cfg.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("setting server: %q is not an http or https URL", cfg.Server)
	}
	log := slog.New(slog.NewTextHandler(env.stderr, nil)).With("command", "authorized-keys")
	return authorizedKeys(ctx, env.stdout, log, cfg, fs.Arg(0))
}

// errNoKeys marks a run that printed nothing because no answer could be
// had; sshd then refuses the key, and the reason is in the log.
var errNoKeys = errors.New("no keys printed")

// authorizedKeys does the work of the command for user.
func authorizedKeys(ctx context.Context, out io.Writer, log *slog.Logger, cfg authorizedKeysConfig, user string) error {
	handle, err := mapUser(cfg.Map, user)
	if err != nil {
		log.Warn("printing no keys", "user", user, "reason", err.Error())
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	log = log.With("user", user, "handle", handle)
	cacheFile := filepath.Join(cfg.CacheDir, string(handle)+".keys")

	body, status, err := fetchKeys(ctx, cfg, handle)
	switch {
	case err == nil && status == http.StatusOK:
		if err := writeCache(cfg.CacheDir, cacheFile, body); err != nil {
			log.Warn("could not cache the answer", "err", err)
		}
		return printKeys(out, log, body, cfg.Fingerprint)
	case err == nil && status == http.StatusNotFound:
		// An authoritative answer: the handle has no identity.
		os.Remove(cacheFile)
		log.Info("no such identity on the server; printing no keys")
		return nil
	case err == nil:
		err = fmt.Errorf("server answered %d", status)
	}
	fi, serr := os.Stat(cacheFile)
	if serr != nil {
		log.Warn("server unavailable and no cached answer; printing no keys", "err", err)
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	if age := time.Since(fi.ModTime()); age > cfg.MaxAge {
		log.Warn("server unavailable and the cached answer is too old; printing no keys",
			"err", err, "age", age.Round(time.Second).String(), "max_age", cfg.MaxAge.String())
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	cachedBody, rerr := os.ReadFile(cacheFile)
	if rerr != nil {
		log.Warn("server unavailable and the cached answer is unreadable; printing no keys", "err", err, "cache_err", rerr)
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	log.Warn("server unavailable; printing the cached answer", "err", err,
		"age", time.Since(fi.ModTime()).Round(time.Second).String())
	return printKeys(out, log, cachedBody, cfg.Fingerprint)
}

// mapUser returns the handle of a local user: the user name itself, or
// its line in the map file.
func mapUser(mapFile, user string) (identity.Handle, error) {
	name := user
	if mapFile != "" {
		f, err := os.Open(mapFile)
		if err != nil {
			return "", fmt.Errorf("map file: %w", err)
		}
		defer f.Close()
		name = ""
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			if len(fields) != 2 {
				return "", fmt.Errorf("map file %s: line %d: want \"user handle\"", mapFile, n)
			}
			if fields[0] == user {
				name = fields[1]
				break
			}
		}
		if err := sc.Err(); err != nil {
			return "", fmt.Errorf("map file %s: %w", mapFile, err)
		}
		if name == "" {
			return "", fmt.Errorf("map file %s has no line for user %q", mapFile, user)
		}
	}
	h, err := identity.ParseHandle(name)
	if err != nil {
		return "", err
	}
	return h, nil
}

// fetchKeys gets /users/{handle}.keys within the timeout.
func fetchKeys(ctx context.Context, cfg authorizedKeysConfig, h identity.Handle) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	u := strings.TrimRight(cfg.Server, "/") + "/users/" + url.PathEscape(string(h)) + ".keys"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("User-Agent", "kith-authorized-keys/"+version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysBody+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read answer: %w", err)
	}
	if len(body) > maxKeysBody {
		return nil, 0, fmt.Errorf("answer larger than %d bytes", maxKeysBody)
	}
	if resp.StatusCode == http.StatusOK {
		if _, err := ssh.ParseAuthorizedKeys(body); err != nil {
			return nil, 0, fmt.Errorf("answer is not authorized_keys text: %w", err)
		}
	}
	return body, resp.StatusCode, nil
}

// printKeys prints the keys of an answer, re-rendered so that no
// authorized_keys options can slip through, and only the one with the
// fingerprint when one is given.
func printKeys(out io.Writer, log *slog.Logger, body []byte, fingerprint string) error {
	keys, err := ssh.ParseAuthorizedKeys(body)
	if err != nil {
		log.Warn("bad answer; printing no keys", "err", err)
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	var b bytes.Buffer
	for _, k := range keys {
		if fingerprint != "" && k.Fingerprint().String() != fingerprint {
			continue
		}
		b.Write(ssh.MarshalAuthorizedKey(k))
	}
	_, err = out.Write(b.Bytes())
	return err
}

// writeCache replaces the cached answer atomically.
func writeCache(dir, file string, body []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".keys-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
