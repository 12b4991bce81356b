// auth.go: who may connect to the embedded cluster. The server listens on
// a Unix socket inside its data directory (mode 0700), so only its OS
// user and root reach the socket at all; on top of that every connection
// must give the password of the cluster's one role, kith, which is random
// and kept in PassFile (mode 0600, owned by Kith's own user). A process
// running as the cluster's OS user but not as Kith (the distribution's
// own PostgreSQL server, say) can reach the socket but not the password.

package embedded

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/identity/retry"
)

// PassFile is the name, inside the cluster directory, of the libpq
// password file holding the kith role's password: PGPASSFILE for
// PostgreSQL's own tools (pg_dump, psql), and what URL points pgx at.
const PassFile = "kith.pgpass"

// hbaMarker opens a pg_hba.conf that Kith wrote; any other file (initdb's
// trust rules, from before Kith used passwords) is replaced at start.
const hbaMarker = "# Written by Kith: every connection needs the kith role's password (see kith.pgpass)."

const hbaConf = hbaMarker + `
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
`

func (c *Cluster) passPath() string { return filepath.Join(c.opts.Dir, PassFile) }

// newPassword returns a random password of URL-safe characters, so it
// needs no escaping in a password file and no SASLprep.
func newPassword() string {
	var b [24]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writePassFile writes the password file for password, replacing any,
// readable by Kith's user only.
func (c *Cluster) writePassFile(password string) error {
	tmp := c.passPath() + ".tmp"
	// Any host (socket directory), this port, any database, role kith.
	line := fmt.Sprintf("*:%d:*:kith:%s\n", port, password)
	if err := os.WriteFile(tmp, []byte(line), 0o600); err != nil {
		return fmt.Errorf("embedded: password file: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("embedded: password file: %w", err)
	}
	if err := os.Rename(tmp, c.passPath()); err != nil {
		return fmt.Errorf("embedded: password file: %w", err)
	}
	return nil
}

// readPassword returns the password in the password file, or "" when
// there is none.
func (c *Cluster) readPassword() (string, error) {
	b, err := os.ReadFile(c.passPath())
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("embedded: password file: %w", err)
	}
	f := strings.Split(strings.TrimSpace(string(b)), ":")
	if len(f) != 5 || f[3] != "kith" || f[4] == "" {
		return "", fmt.Errorf("embedded: password file %s is not one line host:port:db:kith:password", c.passPath())
	}
	return f[4], nil
}

// hbaIsOurs reports whether pg_hba.conf is the one Kith writes.
func (c *Cluster) hbaIsOurs() (bool, error) {
	b, err := os.ReadFile(filepath.Join(c.opts.Dir, "pg_hba.conf"))
	if err != nil {
		return false, fmt.Errorf("embedded: %w", err)
	}
	return string(b) == hbaConf, nil
}

// writeHBA writes Kith's pg_hba.conf, owned by the server's user.
func (c *Cluster) writeHBA() error {
	path := filepath.Join(c.opts.Dir, "pg_hba.conf")
	tmp := path + ".kith-tmp"
	if err := os.WriteFile(tmp, []byte(hbaConf), 0o600); err != nil {
		return fmt.Errorf("embedded: pg_hba.conf: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(tmp, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("embedded: pg_hba.conf: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("embedded: pg_hba.conf: %w", err)
	}
	return nil
}

// requirePassword moves a cluster made before Kith used passwords (initdb
// --auth=trust, no password file) to password authentication: it gives the
// kith role a password (sent as a SCRAM verifier, so the password itself
// never reaches the server or its log), writes the password file, then
// pg_hba.conf, and reloads. Each step can be repeated, so a crash midway
// is finished at the next start. A cluster already migrated is left alone.
func (c *Cluster) requirePassword(ctx context.Context) error {
	ours, err := c.hbaIsOurs()
	if err != nil || ours {
		return err
	}
	c.opts.Logger.Warn("embedded PostgreSQL accepts local connections without a password; switching it to password authentication", "dir", c.opts.Dir)
	password, err := c.readPassword()
	if err != nil {
		return err
	}
	if password == "" {
		password = newPassword()
		if err := c.writePassFile(password); err != nil {
			return err
		}
	}
	// The old rules trust the socket, so this connection needs no
	// password yet.
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("embedded: connect to migrate to password authentication: %w", err)
	}
	defer conn.Close(context.Background())
	verifier, err := scramVerifier(password)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE kith PASSWORD "+quoteLiteral(verifier)); err != nil {
		return fmt.Errorf("embedded: set the kith role's password: %w", err)
	}
	if err := c.writeHBA(); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("embedded: reload pg_hba.conf: %w", err)
	}
	// The reload is asynchronous: wait until a connection without the
	// password is refused.
	bare := fmt.Sprintf("host=%s port=%d user=kith dbname=postgres sslmode=disable passfile=%s password=",
		c.opts.Dir, port, os.DevNull)
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	for {
		probe, err := pgx.Connect(ctx, bare)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("embedded: password authentication not in force after reload: %w", err)
			}
			return nil
		}
		probe.Close(context.Background())
		if !retry.Wait(ctx, 20*time.Millisecond) {
			return fmt.Errorf("embedded: password authentication not in force within %s of the reload", c.opts.StartTimeout)
		}
	}
}

// scramVerifier returns the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5802, RFC 7677; PostgreSQL's "SCRAM-SHA-256$iterations:
// salt$StoredKey:ServerKey" form).
func scramVerifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	rand.Read(salt)
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("embedded: scram: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	serverKey := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(serverKey)), nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
