// signer.go: the keys statements are signed with, and the tools that sign
// them (ssh-keygen -Y sign with a key file or the agent, gpg
// --clearsign), run in the user's environment so that they find the
// agent and ask for passphrases themselves.

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// Tools runs ssh-keygen, ssh-add and gpg for the client.
type Tools struct {
	// Env is the environment the tools run in (HOME, SSH_AUTH_SOCK,
	// GNUPGHOME, PATH); nil means the process's.
	Env []string
}

// getenv reads a variable of the tools' environment.
func (t *Tools) getenv(name string) string {
	if t.Env == nil {
		return os.Getenv(name)
	}
	for _, kv := range t.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// run runs a tool with stdin as input and returns its output; its
// messages go into the error.
func (t *Tools) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = t.Env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return nil, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out.Bytes(), nil
}

// ExpandHome turns a leading ~/ into the home directory.
func (t *Tools) ExpandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home := t.getenv("HOME"); home != "" {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// Signer is a key that can sign statements: an SSH key file (or a .pub
// file whose key is in the agent) or an OpenPGP key in gpg. Make one with
// Tools.SSHKey or Tools.PGPKey.
type Signer struct {
	Kind identity.FactorKind
	// File is what ssh-keygen -f takes (empty: a key of the agent).
	File string
	// Pub is an SSH key's authorized_keys line, without comment.
	Pub string
	// ID is the factor's value: SHA256:... or the OpenPGP fingerprint.
	ID string
	// Label is an SSH key's comment.
	Label string

	tools *Tools
}

// Factor is how requests name the signer's factor.
func (s Signer) Factor() string {
	if s.Kind == identity.KindSSH {
		return s.Pub
	}
	return s.ID
}

func (s Signer) String() string { return string(s.Kind) + " " + s.ID }

// SSHKey reads the SSH key of a key file: FILE.pub beside a private key,
// the file itself when it is a .pub, or what ssh-keygen -y derives.
func (t *Tools) SSHKey(ctx context.Context, file string) (Signer, error) {
	file = t.ExpandHome(file)
	var line []byte
	var err error
	if strings.HasSuffix(file, ".pub") {
		line, err = os.ReadFile(file)
	} else if line, err = os.ReadFile(file + ".pub"); errors.Is(err, os.ErrNotExist) {
		line, err = t.run(ctx, nil, "ssh-keygen", "-y", "-f", file)
	}
	if err != nil {
		return Signer{}, fmt.Errorf("SSH key %s: %w", file, err)
	}
	k, err := ssh.ParseAuthorizedKey(bytes.TrimSpace(line))
	if err != nil {
		return Signer{}, fmt.Errorf("SSH key %s: %w", file, err)
	}
	if k.Cert != nil {
		return Signer{}, fmt.Errorf("SSH key %s is a certificate: give the plain key", file)
	}
	return Signer{Kind: identity.KindSSH, File: file, Pub: plainKey(k), ID: k.Fingerprint().String(),
		Label: ssh.SanitizeComment(k.Comment), tools: t}, nil
}

// plainKey is a key's authorized_keys line without options or comment.
func plainKey(k *ssh.Key) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ssh.NewKey(k.Public, ""))))
}

// PGPKey names an OpenPGP key in gpg by its fingerprint.
func (t *Tools) PGPKey(fpr string) (Signer, error) {
	f, err := identity.ParsePGPFingerprint(fpr)
	if err != nil {
		return Signer{}, err
	}
	return Signer{Kind: identity.KindPGP, ID: f.Value, tools: t}, nil
}

// Sign signs a statement with the key: gpg --clearsign, or ssh-keygen -Y
// sign in Kith's namespace.
func (s Signer) Sign(ctx context.Context, statement string) (string, error) {
	if s.tools == nil {
		return "", errors.New("sign: a Signer made without Tools")
	}
	if s.Kind == identity.KindPGP {
		out, err := s.tools.run(ctx, []byte(statement), "gpg", "--local-user", s.ID+"!", "--clearsign", "--output", "-")
		if err != nil {
			return "", fmt.Errorf("sign with OpenPGP key %s: %w", s.ID, err)
		}
		return string(out), nil
	}
	dir, err := os.MkdirTemp("", "kith-id-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	msg := filepath.Join(dir, "statement.txt")
	if err := os.WriteFile(msg, []byte(statement), 0o600); err != nil {
		return "", err
	}
	file := s.File
	if file == "" { // a key of the agent: ssh-keygen finds it by its public half
		file = filepath.Join(dir, "agent-key.pub")
		if err := os.WriteFile(file, []byte(s.Pub+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	if _, err := s.tools.run(ctx, nil, "ssh-keygen", "-Y", "sign", "-n", ssh.Namespace, "-f", file, msg); err != nil {
		return "", fmt.Errorf("sign with SSH key %s: %w", s.File, err)
	}
	sig, err := os.ReadFile(msg + ".sig")
	if err != nil {
		return "", fmt.Errorf("sign with SSH key %s: %w", s.File, err)
	}
	return string(sig), nil
}

// ExportPGP returns gpg's armored copy of an OpenPGP signer's public key.
func (s Signer) ExportPGP(ctx context.Context) ([]byte, error) {
	armored, err := s.tools.run(ctx, nil, "gpg", "--export", "--armor", s.ID)
	if err != nil {
		return nil, fmt.Errorf("export OpenPGP key %s: %w", s.ID, err)
	}
	if len(bytes.TrimSpace(armored)) == 0 {
		return nil, fmt.Errorf("gpg has no key %s (gpg --list-keys lists the ones it has)", s.ID)
	}
	return armored, nil
}

// LocalSigners lists the keys this machine can sign with: ~/.ssh/*.pub
// with a private key beside them, the SSH agent's keys, and gpg's secret
// keys. Tools that are missing or fail contribute nothing.
func (t *Tools) LocalSigners(ctx context.Context) []Signer {
	var out []Signer
	if home := t.getenv("HOME"); home != "" {
		pubs, _ := filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
		for _, p := range pubs {
			if _, err := os.Stat(strings.TrimSuffix(p, ".pub")); err != nil {
				continue
			}
			if s, err := t.SSHKey(ctx, strings.TrimSuffix(p, ".pub")); err == nil {
				out = append(out, s)
			}
		}
	}
	if t.getenv("SSH_AUTH_SOCK") != "" {
		if lines, err := t.run(ctx, nil, "ssh-add", "-L"); err == nil {
			for _, l := range strings.Split(string(lines), "\n") {
				k, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(l)))
				if err != nil || k.Cert != nil {
					continue
				}
				out = append(out, Signer{Kind: identity.KindSSH, Pub: plainKey(k), ID: k.Fingerprint().String(), tools: t})
			}
		}
	}
	if colons, err := t.run(ctx, nil, "gpg", "--batch", "--with-colons", "--list-secret-keys"); err == nil {
		primary := false
		for _, l := range strings.Split(string(colons), "\n") {
			f := strings.Split(l, ":")
			switch {
			case f[0] == "sec":
				primary = true
			case f[0] == "ssb":
				primary = false
			case f[0] == "fpr" && primary && len(f) > 9:
				if s, err := t.PGPKey(f[9]); err == nil {
					out = append(out, s)
				}
				primary = false
			}
		}
	}
	return out
}

// CoSigner finds the key here that can sign for the identity doc: the
// one key among LocalSigners that is proven for it (other than skip). It
// fails when there is none or more than one, naming them.
func (t *Tools) CoSigner(ctx context.Context, doc api.IdentityDoc, skip string) (Signer, error) {
	proven := map[string]bool{}
	var names []string
	for _, fd := range doc.Factors {
		if fd.Assurance == "proven" && fd.Parent == "" && fd.Value != skip &&
			(fd.Kind == string(identity.KindSSH) || fd.Kind == string(identity.KindPGP)) {
			proven[fd.Value] = true
			names = append(names, fd.Kind+" "+fd.Value)
		}
	}
	if len(names) == 0 {
		return Signer{}, fmt.Errorf("%s has no proven SSH or OpenPGP key to co-sign with ('kith id show %s')", doc.Handle, doc.Handle)
	}
	var found []Signer
	seen := map[string]bool{}
	for _, s := range t.LocalSigners(ctx) {
		if proven[s.ID] && !seen[s.ID] {
			seen[s.ID] = true
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Signer{}, fmt.Errorf("none of the keys proven for %s (%s) is in ~/.ssh, the SSH agent or gpg's secret keys here: say which to co-sign with, --by-ssh-key FILE or --by-pgp FPR",
			doc.Handle, strings.Join(names, ", "))
	}
	var list []string
	for _, s := range found {
		list = append(list, s.String())
	}
	return Signer{}, fmt.Errorf("several keys here are proven for %s (%s): choose one with --by-ssh-key FILE or --by-pgp FPR",
		doc.Handle, strings.Join(list, ", "))
}
