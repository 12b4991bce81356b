// authorized_keys.go: a user's proven SSH keys for sshd's
// AuthorizedKeysCommand. It fails closed: when the server is unavailable
// (unreachable, too slow, 5xx, a garbled answer) it serves its last good
// answer from a private cache, if young enough, and otherwise nothing. It
// never asks for keys that are only claimed.

package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/tlog/policy"
	"github.com/kith-keyserver/kith/ssh"
)

// ErrNoKeys marks an answer of no keys because none could be had (the
// server unavailable and no cache to stand in, a log that does not hold,
// a refusal): sshd then refuses the key, and the reason is in the log.
var ErrNoKeys = errors.New("no keys printed")

// errUnsafeCache marks a cache directory or file that someone other than
// the running user could write: whoever can write it can plant keys, so
// it is neither read nor written.
var errUnsafeCache = errors.New("cache writable by others")

// KeysOptions say how AuthorizedKeys answers.
type KeysOptions struct {
	// Fingerprint, when set, keeps only the key with this SHA256
	// fingerprint (sshd's %f).
	Fingerprint string
	// CacheDir holds the last good answers, one file per handle, and the
	// last checkpoint seen; it must be the running user's, mode 0700.
	CacheDir string
	// MaxAge is how old a cached answer may be and still be served while
	// the server is unavailable; zero means no cache at all.
	MaxAge time.Duration
	// LogKey, when set, is the transparency log's verifier key: only keys
	// whose proving records are in a checkpoint consistent with the last
	// one seen are returned.
	LogKey string
	// LogPolicy, when set, is a witness policy (C2SP tlog-policy): the
	// checkpoint must be signed by one of its logs (which stands for
	// LogKey when that is empty) and cosigned by its quorum of witnesses.
	LogPolicy *policy.Policy
	// Logger receives what sshd should log (warnings of a cached answer
	// served, a key left out, a cache that could not be written); nil
	// discards it.
	Logger *slog.Logger
}

// AuthorizedKeys returns handle's proven SSH keys as authorized_keys
// lines, re-rendered so that no options slip through.
//
// Only an unavailable server lets a cached answer be served: one that
// cannot be reached, does not answer within the timeout, fails (5xx) or
// sends something that is not authorized_keys text. Any other answer is
// the server's word: a 200 (even with no keys) replaces the cached one, a
// 404 (no such identity) deletes it and returns no keys, and other
// statuses (4xx) return ErrNoKeys and leave it be. So a key revoked on a
// live server does not come back from the cache.
func (c *Client) AuthorizedKeys(ctx context.Context, handle identity.Handle, opts KeysOptions) ([]byte, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cacheFile := filepath.Join(opts.CacheDir, string(handle)+".keys")

	var status int
	var body []byte
	var err error
	if opts.LogKey != "" || opts.LogPolicy != nil {
		var lerr error
		status, body, err, lerr = c.keysInLog(ctx, opts, log, handle)
		if lerr != nil {
			// The server answered, but not with a log that holds: its
			// answer is not to be trusted, nor replaced by the cache's.
			log.Warn("the server's log does not hold; printing no keys", "server", c.server, "err", lerr)
			return nil, fmt.Errorf("%w: %v", ErrNoKeys, lerr)
		}
	} else {
		status, body, err = c.do(ctx, http.MethodGet, "/users/"+url.PathEscape(string(handle))+".keys", "", nil, maxTextBody)
		if err == nil && status == http.StatusOK {
			if _, perr := ssh.ParseAuthorizedKeys(body); perr != nil {
				err = fmt.Errorf("answer is not authorized_keys text: %w", perr)
			}
		}
	}
	switch {
	case err != nil:
		// Unreachable, timed out or a garbled answer: fall through.
	case status == http.StatusOK:
		if opts.MaxAge > 0 {
			if err := writeCache(opts.CacheDir, cacheFile, body); err != nil {
				warnCacheUnwritable(log, opts.CacheDir, err)
				// The old answer must not outlive the server's new word.
				if rerr := os.Remove(cacheFile); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					log.Error("could not remove the previous cached answer either: "+
						"it may be served in place of this one if the server goes away", "file", cacheFile, "err", rerr)
				}
			}
		}
		return renderKeys(log, body, opts.Fingerprint)
	case status == http.StatusNotFound:
		// An authoritative answer: the handle has no identity.
		if rerr := os.Remove(cacheFile); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			log.Error("could not remove the cached answer of an identity the server no longer has", "file", cacheFile, "err", rerr)
		}
		log.Info("no such identity on the server; printing no keys")
		return nil, nil
	case status >= 500:
		err = fmt.Errorf("server answered %d", status)
	default:
		// The server is up and said no (403, 410, 429, ...): its word,
		// not an outage, so the cache is no stand-in for it.
		log.Warn("server refused the lookup; printing no keys", "server", c.server, "status", status)
		return nil, fmt.Errorf("%w: server answered %d", ErrNoKeys, status)
	}

	if opts.MaxAge == 0 {
		log.Warn("server unavailable and the cache is off; printing no keys", "server", c.server, "err", err)
		return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
	}
	cachedBody, cachedAt, cerr := readCache(opts.CacheDir, cacheFile)
	switch {
	case errors.Is(cerr, fs.ErrNotExist):
		log.Warn("server unavailable and no cached answer; printing no keys", "server", c.server, "err", err)
		return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
	case errors.Is(cerr, errUnsafeCache):
		log.Warn("server unavailable and not using the cache: another user could have planted keys in it; printing no keys",
			"server", c.server, "err", err, "cache_err", cerr, "hint", cacheDirHint(opts.CacheDir))
		return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
	case cerr != nil:
		log.Warn("server unavailable and not using the cache: it is unreadable; printing no keys",
			"server", c.server, "err", err, "cache_err", cerr, "hint", cacheDirHint(opts.CacheDir))
		return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
	}
	age := time.Since(cachedAt)
	if age > opts.MaxAge {
		log.Warn("server unavailable and the cached answer is too old; printing no keys", "server", c.server,
			"err", err, "age", age.Round(time.Second).String(), "max_age", opts.MaxAge.String())
		return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
	}
	log.Warn("server unavailable; serving the cached answer instead of a live one: "+
		"keys revoked since it was fetched still log in", "server", c.server, "err", err,
		"age", age.Round(time.Second).String(), "max_age", opts.MaxAge.String(),
		"fetched", cachedAt.UTC().Format(time.RFC3339))
	return renderKeys(log, cachedBody, opts.Fingerprint)
}

// MapUser returns the handle of a local user: the user name itself, or
// the handle its line in mapFile ("user handle" lines, # comments) names.
// A system account (identity.IsSystemAccount: ubuntu, www-data, ...) has
// a handle only by a line: no stranger may claim its name, but someone
// may hold it from before the names were kept.
func MapUser(mapFile, user string) (identity.Handle, error) {
	name := user
	if mapFile == "" && identity.IsSystemAccount(user) {
		return "", fmt.Errorf("user %q is a system account, which has a handle only by a line in a map file", user)
	}
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
	return identity.ParseHandle(name)
}

// renderKeys re-renders the keys of an answer so that no authorized_keys
// options can slip through, only the one with the fingerprint when one
// is given.
func renderKeys(log *slog.Logger, body []byte, fingerprint string) ([]byte, error) {
	keys, err := ssh.ParseAuthorizedKeys(body)
	if err != nil {
		log.Warn("bad answer; printing no keys", "err", err)
		return nil, fmt.Errorf("%w: %v", ErrNoKeys, err)
	}
	var b bytes.Buffer
	for _, k := range keys {
		if fingerprint != "" && k.Fingerprint().String() != fingerprint {
			continue
		}
		b.Write(ssh.MarshalAuthorizedKey(k))
	}
	return b.Bytes(), nil
}

// writeCache replaces a cached answer atomically. The directory is made
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
	body, err := io.ReadAll(io.LimitReader(f, maxTextBody+1))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("cache: read %s: %w", file, err)
	}
	if len(body) > maxTextBody {
		return nil, time.Time{}, fmt.Errorf("cache: %s is larger than %d bytes", file, maxTextBody)
	}
	return body, fi.ModTime(), nil
}

// checkPrivate returns an errUnsafeCache unless path (described by fi)
// is owned by the running user and writable by no group and no other
// user.
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
// a permission problem, how to give the cache directory to the running
// user (sshd's AuthorizedKeysCommandUser).
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
