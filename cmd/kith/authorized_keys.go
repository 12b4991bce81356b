// authorized_keys.go: `kith authorized-keys`, sshd's AuthorizedKeysCommand.
// It maps the local user to a handle, fetches the handle's proven SSH keys
// from a Kith server over HTTP and prints them; when the server is
// unavailable (unreachable, too slow, 5xx) it prints its last good answer
// from a local cache, if that is young enough and no other user could have
// written it, and otherwise nothing: it fails closed. Serving from the cache
// and plain http to another host are warned of on stderr, which sshd logs.
// It never touches the store and never asks for keys that are only claimed.

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	osuser "os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	// LogKey, when set, is the transparency log's verifier key: only keys
	// whose proofs are in the log are printed (see keysInLog).
	LogKey string
}

// maxKeysBody bounds a fetched answer: a few hundred keys at most.
const maxKeysBody = 1 << 20

// authorizedKeysEnvPrefix starts the command's environment variables.
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
	s, v = str(&cfg.LogKey)
	add("log-key", "the transparency log's verifier `key` (kith log-key prints it): print only keys whose proving records are in a checkpoint consistent with the last one seen", s, v)
	s, v = str(&cfg.CacheDir)
	add("cache-dir", "`directory` of last good answers", s, v)
	add("max-age", "how old (a `duration`) a cached answer may be and still be served when the server is unavailable; 0 or off: no cache",
		func(s string) error {
			if s == "off" || s == "0" {
				cfg.MaxAge = 0
				return nil
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return fmt.Errorf("%q is not a positive duration, 0 or off", s)
			}
			cfg.MaxAge = d
			return nil
		}, func() string {
			if cfg.MaxAge == 0 {
				return "off"
			}
			return cfg.MaxAge.String()
		})
	for _, b := range bs {
		usage := fmt.Sprintf("%s (env %s)", b.usage, b.env)
		if d := b.value(); d != "" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fs.Func(b.name, usage, b.set)
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
		return misuse(env, "authorized-keys", "takes one USER, got %d arguments", fs.NArg())
	}
	if cfg.Server == "" {
		return fmt.Errorf("setting server: no Kith server given (--server or %sSERVER)", authorizedKeysEnvPrefix)
	}
	log := slog.New(slog.NewTextHandler(env.stderr, nil)).With("command", "authorized-keys")
	if err := checkKeyServer(log, cfg.Server, "substitute their own keys and log in"); err != nil {
		return err
	}
	return authorizedKeys(ctx, env.stdout, log, cfg, fs.Arg(0))
}

// checkKeyServer checks that server is an http(s) URL, and warns when it
// is plain http to another machine: then anyone on the path can swap the
// answer, to do what risk says.
func checkKeyServer(log *slog.Logger, server, risk string) error {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("setting server: %q is not an http or https URL", server)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		log.Warn("fetching keys without TLS: anyone on the path to the server can "+risk+"; use an https server URL",
			"server", server)
	}
	return nil
}

// isLoopback reports whether host names this machine: localhost or a
// loopback address, where plain http crosses no network.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errNoKeys marks a run that printed nothing because no answer could be
// had; sshd then refuses the key, and the reason is in the log.
var errNoKeys = errors.New("no keys printed")

// errUnsafeCache marks a cache directory or file that someone other than
// the user running the command could write: whoever can write it can plant
// keys, so it is neither read nor written.
var errUnsafeCache = errors.New("cache writable by others")

// authorizedKeys does the work of the command for user.
//
// Only an unavailable server lets a cached answer be served: one that
// cannot be reached, does not answer within the timeout, fails (5xx) or
// sends something that is not authorized_keys text. Any other answer is
// the server's word: a 200 (even with no keys) replaces the cached one, a
// 404 (no such identity) deletes it, and other statuses (4xx) print
// nothing and leave it be. So a key revoked on a live server does not come
// back from the cache.
func authorizedKeys(ctx context.Context, out io.Writer, log *slog.Logger, cfg authorizedKeysConfig, user string) error {
	handle, err := mapUser(cfg.Map, user)
	if err != nil {
		log.Warn("printing no keys", "user", user, "reason", err.Error())
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	log = log.With("user", user, "handle", handle)
	cacheFile := filepath.Join(cfg.CacheDir, string(handle)+".keys")

	body, status, err := fetchKeys(ctx, cfg, handle)
	if err == nil && status == http.StatusOK && cfg.LogKey != "" {
		var lerr error
		if body, lerr = keysInLog(ctx, cfg, log, handle, body); lerr != nil {
			// The server answered, but not with a log that holds: its
			// answer is not to be trusted, nor replaced by the cache's.
			log.Warn("the server's log does not hold; printing no keys", "server", cfg.Server, "err", lerr)
			return fmt.Errorf("%w: %v", errNoKeys, lerr)
		}
	}
	switch {
	case err != nil:
		// Unreachable, timed out or a garbled answer: fall through.
	case status == http.StatusOK:
		if cfg.MaxAge > 0 {
			if err := writeCache(cfg.CacheDir, cacheFile, body); err != nil {
				warnCacheUnwritable(log, cfg.CacheDir, err)
				// The old answer must not outlive the server's new word.
				if rerr := os.Remove(cacheFile); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					log.Error("could not remove the previous cached answer either: "+
						"it may be served in place of this one if the server goes away", "file", cacheFile, "err", rerr)
				}
			}
		}
		return printKeys(out, log, body, cfg.Fingerprint)
	case status == http.StatusNotFound:
		// An authoritative answer: the handle has no identity.
		if rerr := os.Remove(cacheFile); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			log.Error("could not remove the cached answer of an identity the server no longer has", "file", cacheFile, "err", rerr)
		}
		log.Info("no such identity on the server; printing no keys")
		return nil
	case status >= 500:
		err = fmt.Errorf("server answered %d", status)
	default:
		// The server is up and said no (403, 410, 429, ...): its word,
		// not an outage, so the cache is no stand-in for it.
		log.Warn("server refused the lookup; printing no keys", "server", cfg.Server, "status", status)
		return fmt.Errorf("%w: server answered %d", errNoKeys, status)
	}

	if cfg.MaxAge == 0 {
		log.Warn("server unavailable and the cache is off; printing no keys", "server", cfg.Server, "err", err)
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	cachedBody, cachedAt, cerr := readCache(cfg.CacheDir, cacheFile)
	switch {
	case errors.Is(cerr, fs.ErrNotExist):
		log.Warn("server unavailable and no cached answer; printing no keys", "server", cfg.Server, "err", err)
		return fmt.Errorf("%w: %v", errNoKeys, err)
	case errors.Is(cerr, errUnsafeCache):
		log.Warn("server unavailable and not using the cache: another user could have planted keys in it; printing no keys",
			"server", cfg.Server, "err", err, "cache_err", cerr, "hint", cacheDirHint(cfg.CacheDir))
		return fmt.Errorf("%w: %v", errNoKeys, err)
	case cerr != nil:
		log.Warn("server unavailable and not using the cache: it is unreadable; printing no keys",
			"server", cfg.Server, "err", err, "cache_err", cerr, "hint", cacheDirHint(cfg.CacheDir))
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	age := time.Since(cachedAt)
	if age > cfg.MaxAge {
		log.Warn("server unavailable and the cached answer is too old; printing no keys", "server", cfg.Server,
			"err", err, "age", age.Round(time.Second).String(), "max_age", cfg.MaxAge.String())
		return fmt.Errorf("%w: %v", errNoKeys, err)
	}
	log.Warn("server unavailable; serving the cached answer instead of a live one: "+
		"keys revoked since it was fetched still log in", "server", cfg.Server, "err", err,
		"age", age.Round(time.Second).String(), "max_age", cfg.MaxAge.String(),
		"fetched", cachedAt.UTC().Format(time.RFC3339))
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

// keysClient follows redirects, but not from https to plain http, where
// the keys could be swapped on the way.
var keysClient = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect from https to %s", req.URL.Redacted())
	}
	return nil
}}

// fetchKeys gets /users/{handle}.keys within the timeout.
func fetchKeys(ctx context.Context, cfg authorizedKeysConfig, h identity.Handle) ([]byte, int, error) {
	return fetchText(ctx, cfg.Server, "/users/"+url.PathEscape(string(h))+".keys", "kith-authorized-keys", cfg.Timeout,
		func(body []byte) error {
			if _, err := ssh.ParseAuthorizedKeys(body); err != nil {
				return fmt.Errorf("answer is not authorized_keys text: %w", err)
			}
			return nil
		})
}

// fetchText gets path from the server within the timeout, with keysClient
// (no redirect from https to http), reading at most maxKeysBody bytes. A
// 200 answer must pass check, or it is an error.
func fetchText(ctx context.Context, server, path, agent string, timeout time.Duration, check func([]byte) error) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := strings.TrimRight(server, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("User-Agent", agent+"/"+version)
	resp, err := keysClient.Do(req)
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
		if err := check(body); err != nil {
			return nil, 0, err
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

// writeCache replaces the cached answer atomically. The directory is made
// if missing; an existing one must be the running user's and writable by
// no one else.
func writeCache(dir, file string, body []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := checkPrivate(dir, fi); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".keys-") // mode 0600
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return fmt.Errorf("cache: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cache: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// readCache returns a cached answer and when it was fetched, after
// checking that neither it nor its directory could have been written by
// anyone but the running user (errUnsafeCache otherwise). A missing
// answer is an fs.ErrNotExist.
func readCache(dir, file string) ([]byte, time.Time, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: %w", err)
	}
	if err := checkPrivate(dir, fi); err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: %w", err)
	}
	// O_NOFOLLOW and fstat: the file checked is the file read.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, time.Time{}, fmt.Errorf("cache: %s is a symbolic link: %w", file, errUnsafeCache)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, time.Time{}, fmt.Errorf("cache: %s is not a regular file: %w", file, errUnsafeCache)
	}
	if err := checkPrivate(file, fi); err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(f, maxKeysBody+1))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: read %s: %w", file, err)
	}
	if len(body) > maxKeysBody {
		return nil, time.Time{}, fmt.Errorf("cache: %s is larger than %d bytes", file, maxKeysBody)
	}
	return body, fi.ModTime(), nil
}

// checkPrivate returns an errUnsafeCache unless path (described by fi)
// is owned by the user running the command and writable by no group and
// no other user.
func checkPrivate(path string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by uid %d that runs this command: %w", path, st.Uid, os.Geteuid(), errUnsafeCache)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %04o): %w", path, fi.Mode().Perm(), errUnsafeCache)
	}
	return nil
}

// warnCacheUnwritable says that an answer could not be cached, and with
// a permission problem, how to give the cache directory to the user the
// command runs as (sshd's AuthorizedKeysCommandUser).
func warnCacheUnwritable(log *slog.Logger, dir string, err error) {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, errUnsafeCache) {
		log.Warn("could not cache the answer, so a dead server will leave this user locked out", "err", err, "hint", cacheDirHint(dir))
		return
	}
	log.Warn("could not cache the answer", "err", err)
}

// cacheDirHint is the command that gives dir to the running user, as the
// README's sshd setup does.
func cacheDirHint(dir string) string {
	name := strconv.Itoa(os.Geteuid())
	if u, err := osuser.Current(); err == nil {
		name = u.Username
	}
	return fmt.Sprintf("as root: install -d -o %s -m 0700 %s (or run with --max-age off to go without a cache)", name, dir)
}
