// id.go: `kith id`, the client of the identity API. It does the whole
// challenge dance with the tools people already have: it asks the server
// for a statement, signs it with ssh-keygen -Y sign (a key file or the
// agent) or gpg --clearsign, and sends it back. It never sees a private
// key: the signing tools do, and they ask for passphrases themselves.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/ssh"
	"github.com/kith-keyserver/kith/web/api"
)

// idServerEnv names the server when --server is not given.
const idServerEnv = "KITH_SERVER"

// idMaxBody bounds an answer of the API: an identity document is a few KiB.
const idMaxBody = 4 << 20

// idSubcommands are the verbs of kith id, for its usage text.
var idSubcommands = []struct{ name, synopsis, summary string }{
	{"claim", "claim HANDLE (--ssh-key FILE | --pgp FPR)", "create the identity HANDLE, proven by one key"},
	{"add", "add HANDLE (--ssh-key FILE | --pgp FPR) [--by-ssh-key FILE | --by-pgp FPR]", "link another key, co-signed by a key already proven for HANDLE"},
	{"revoke", "revoke HANDLE FACTOR [--by-ssh-key FILE | --by-pgp FPR]", "unlink a factor (SHA256:... fingerprint, OpenPGP fingerprint or key file)"},
	{"show", "show HANDLE", "print an identity's factors and how each is proven"},
}

func idUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("Usage: kith id COMMAND [flags]\n\n")
	b.WriteString("Claims a handle and links keys at a Kith server, signing its statements\n")
	b.WriteString("with ssh-keygen -Y sign (a key file, or the agent for a .pub file) or gpg.\n\nCommands:\n")
	for _, c := range idSubcommands {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nA host's keys are published as host:NAME, as root, signed by the host key:\n")
	b.WriteString("  kith id claim host:git.example.org --ssh-key /etc/ssh/ssh_host_ed25519_key\n")
	b.WriteString("\nEvery command takes --server URL (default $" + idServerEnv + ").\n")
	b.WriteString("Run 'kith id COMMAND --help' for a command's flags.\n")
	io.WriteString(w, b.String())
}

func runID(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		idUsage(env.stderr)
		return fmt.Errorf("%w: kith id needs a command", errUsage)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		idUsage(env.stdout)
		return flag.ErrHelp
	}
	for _, c := range idSubcommands {
		if c.name == args[0] {
			return runIDCommand(ctx, env, c.name, c.synopsis, c.summary, args[1:])
		}
	}
	fmt.Fprintf(env.stderr, "kith id: unknown command %q; run 'kith id --help' for the list\n", args[0])
	return fmt.Errorf("%w: unknown command %q", errQuietUsage, args[0])
}

// errQuietUsage is a usage error whose explanation is already printed.
var errQuietUsage = fmt.Errorf("%w (see above)", errUsage)

// idFlags are the flags of the kith id commands.
type idFlags struct {
	server          string
	sshKey, pgp     string
	bySSHKey, byPGP string
}

func runIDCommand(ctx context.Context, env *environment, name, synopsis, summary string, args []string) error {
	fs := newToolFlags(env, "id "+name, "id "+synopsis, capitalize(summary)+".")
	var f idFlags
	fs.StringVar(&f.server, "server", getenv(env, idServerEnv), "Kith server `URL` (env "+idServerEnv+")")
	switch name {
	case "claim", "add":
		fs.StringVar(&f.sshKey, "ssh-key", "", "SSH key `file` to prove: a private key, or a .pub file whose key is in the agent")
		fs.StringVar(&f.pgp, "pgp", "", "OpenPGP key to prove, by its `fingerprint` (gpg --fingerprint)")
	}
	switch name {
	case "add", "revoke":
		fs.StringVar(&f.bySSHKey, "by-ssh-key", "", "co-sign with this SSH key `file`, already proven for the handle (default: the one proven key found here)")
		fs.StringVar(&f.byPGP, "by-pgp", "", "co-sign with this OpenPGP key (`fingerprint`), already proven for the handle")
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	want := 1
	if name == "revoke" {
		want = 2
	}
	if len(pos) != want {
		fmt.Fprintf(env.stderr, "kith id %s: takes %d argument(s), got %d\nUsage: kith id %s\n", name, want, len(pos), synopsis)
		return fmt.Errorf("%w: kith id %s takes %d argument(s), got %d", errQuietUsage, name, want, len(pos))
	}
	if f.server == "" {
		return fmt.Errorf("%w: no server: give --server URL or set %s", errUsage, idServerEnv)
	}
	u, err := url.Parse(f.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --server %q is not an http(s) URL", errUsage, f.server)
	}
	c := &idClient{env: env, server: strings.TrimSuffix(f.server, "/"), http: &http.Client{Timeout: 30 * time.Second}}
	switch name {
	case "claim":
		return c.claim(ctx, pos[0], f)
	case "add":
		return c.add(ctx, pos[0], f)
	case "revoke":
		return c.revoke(ctx, pos[0], pos[1], f)
	default:
		return c.show(ctx, pos[0])
	}
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// getenv reads a variable of the command's environment.
func getenv(env *environment, name string) string {
	for _, kv := range env.environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// idClient talks to one server's identity API.
type idClient struct {
	env    *environment
	server string
	http   *http.Client
}

// signer is a key that can sign statements here: an SSH key file (or a
// .pub file whose key is in the agent) or an OpenPGP key in gpg.
type signer struct {
	kind identity.FactorKind
	// file is what ssh-keygen -f takes (empty: a key of the agent); pub
	// the key's line.
	file, pub string
	// id is the factor's value: SHA256:... or the OpenPGP fingerprint.
	id string
	// label is an SSH key's comment.
	label string
}

// factor is how requests name the signer's factor.
func (s signer) factor() string {
	if s.kind == identity.KindSSH {
		return s.pub
	}
	return s.id
}

func (s signer) String() string { return string(s.kind) + " " + s.id }

// expandHome turns a leading ~/ into the home directory.
func (c *idClient) expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home := getenv(c.env, "HOME"); home != "" {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// sshSigner reads the SSH key of a key file: FILE.pub beside a private
// key, the file itself when it is a .pub, or what ssh-keygen -y derives.
func (c *idClient) sshSigner(ctx context.Context, file string) (signer, error) {
	file = c.expandHome(file)
	var line []byte
	var err error
	if strings.HasSuffix(file, ".pub") {
		line, err = os.ReadFile(file)
	} else if line, err = os.ReadFile(file + ".pub"); errors.Is(err, os.ErrNotExist) {
		line, err = c.tool(ctx, nil, "ssh-keygen", "-y", "-f", file)
	}
	if err != nil {
		return signer{}, fmt.Errorf("SSH key %s: %w", file, err)
	}
	k, err := ssh.ParseAuthorizedKey(bytes.TrimSpace(line))
	if err != nil {
		return signer{}, fmt.Errorf("SSH key %s: %w", file, err)
	}
	if k.Cert != nil {
		return signer{}, fmt.Errorf("SSH key %s is a certificate: give the plain key", file)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ssh.NewKey(k.Public, ""))))
	return signer{kind: identity.KindSSH, file: file, pub: pub, id: k.Fingerprint().String(), label: ssh.SanitizeComment(k.Comment)}, nil
}

// pgpSigner names an OpenPGP key in gpg by its fingerprint.
func (c *idClient) pgpSigner(fpr string) (signer, error) {
	f, err := identity.ParsePGPFingerprint(fpr)
	if err != nil {
		return signer{}, fmt.Errorf("--pgp: %w", err)
	}
	return signer{kind: identity.KindPGP, id: f.Value}, nil
}

// tool runs a signing tool in the command's environment, with stdin as
// input, and returns its output; its prompts and messages go to stderr.
func (c *idClient) tool(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env.environ
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg != "" {
			return nil, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out.Bytes(), nil
}

// sign signs a statement with s.
func (c *idClient) sign(ctx context.Context, s signer, statement string) (string, error) {
	if s.kind == identity.KindPGP {
		out, err := c.tool(ctx, []byte(statement), "gpg", "--local-user", s.id+"!", "--clearsign", "--output", "-")
		if err != nil {
			return "", fmt.Errorf("sign with OpenPGP key %s: %w", s.id, err)
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
	file := s.file
	if file == "" { // a key of the agent: ssh-keygen finds it by its public half
		file = filepath.Join(dir, "agent-key.pub")
		if err := os.WriteFile(file, []byte(s.pub+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	if _, err := c.tool(ctx, nil, "ssh-keygen", "-Y", "sign", "-n", ssh.Namespace, "-f", file, msg); err != nil {
		return "", fmt.Errorf("sign with SSH key %s: %w", s.file, err)
	}
	sig, err := os.ReadFile(msg + ".sig")
	if err != nil {
		return "", fmt.Errorf("sign with SSH key %s: %w", s.file, err)
	}
	return string(sig), nil
}

// refusal is the server's answer to a request it refused.
type refusal struct {
	op, code, msg string
	status        int
	hint          string
}

func (r *refusal) Error() string {
	s := fmt.Sprintf("%s: the server refused (%d %s): %s", r.op, r.status, r.code, r.msg)
	if r.hint != "" {
		s += "\n  what to do: " + r.hint
	}
	return s
}

// hintFor says what to do about a refusal.
func hintFor(code, handle string) string {
	switch identity.Code(code) {
	case identity.CodeHandleTaken:
		return fmt.Sprintf("choose another handle; if %q is yours, link the key with 'kith id add %s'", handle, handle)
	case identity.CodeUnknownIdentity:
		return fmt.Sprintf("check the spelling, or create it with 'kith id claim %s'", handle)
	case identity.CodeNotAuthorized, identity.CodeNotProven:
		return fmt.Sprintf("co-sign with a key already proven for %s: --by-ssh-key FILE or --by-pgp FPR ('kith id show %s' lists them)", handle, handle)
	case identity.CodeFactorLinked:
		return "the key is proven for another identity; revoke it there first"
	case identity.CodeAlreadyLinked:
		return "nothing to do: the key is already proven"
	case identity.CodeNotLinked:
		return fmt.Sprintf("'kith id show %s' lists what is linked", handle)
	case identity.CodeUnknownKey:
		return "upload the OpenPGP key first (gpg --export --armor FPR, then POST it to /pks/add)"
	case identity.CodeBadSignature, identity.CodeWrongKey, identity.CodeWrongNamespace:
		return "sign with the very key the statement names (for SSH: ssh-keygen -Y sign -n kith)"
	case identity.CodeExpired, identity.CodeNonceUsed, identity.CodeUnknownNonce:
		return "run the command again: it asks for a new statement"
	case identity.CodeBadHandle, identity.CodeReservedHandle:
		return "a handle is 2 to 39 lower-case letters, digits and '-', and not one the server keeps for itself; a host's is host:NAME, NAME its lower-case DNS name"
	case identity.CodeHostNotAllowed:
		return "the server's operator lists the host names whose keys it publishes (hosts.names); ask them to add this one"
	case "rate_limited":
		return "wait a minute and try again"
	}
	return ""
}

// call sends a JSON request (nil in: a GET) and decodes the answer into
// out; a refusal comes back as a *refusal.
func (c *idClient) call(ctx context.Context, op, method, path, handle string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, idMaxBody))
	if err != nil {
		return fmt.Errorf("%s: read the answer: %w", op, err)
	}
	if resp.StatusCode >= 300 {
		var e api.ErrorBody
		if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
			e.Error.Code, e.Error.Message = "http", strings.TrimSpace(string(raw))
			if resp.StatusCode == http.StatusNotFound && handle != "" {
				e.Error.Code = string(identity.CodeUnknownIdentity)
			}
		}
		return &refusal{op: op, status: resp.StatusCode, code: e.Error.Code, msg: e.Error.Message, hint: hintFor(e.Error.Code, handle)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: the server's answer is not the expected JSON: %w", op, err)
		}
	}
	return nil
}

// challenge asks for a statement about s.
func (c *idClient) challenge(ctx context.Context, purpose, handle, factor string) (string, error) {
	var ch api.ChallengeResponse
	err := c.call(ctx, "ask for a "+purpose+" statement", http.MethodPost, "/api/v1/challenges", handle,
		api.ChallengeRequest{Handle: handle, Factor: factor, Purpose: purpose}, &ch)
	return ch.Statement, err
}

// uploadKey sends gpg's copy of an OpenPGP key to the server, which must
// hold it before it can check the key's signatures.
func (c *idClient) uploadKey(ctx context.Context, s signer) error {
	armored, err := c.tool(ctx, nil, "gpg", "--export", "--armor", s.id)
	if err != nil {
		return fmt.Errorf("export OpenPGP key %s: %w", s.id, err)
	}
	if len(bytes.TrimSpace(armored)) == 0 {
		return fmt.Errorf("gpg has no key %s (gpg --list-keys lists the ones it has)", s.id)
	}
	form := url.Values{"keytext": {string(armored)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.server+"/pks/add", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("upload OpenPGP key %s: %w", s.id, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upload OpenPGP key %s: the server refused (%s): %s", s.id, resp.Status, strings.TrimSpace(string(msg)))
	}
	fmt.Fprintf(c.env.stdout, "uploaded OpenPGP key %s\n", s.id)
	return nil
}

// newSigner reads the --ssh-key or --pgp flag.
func (c *idClient) newSigner(ctx context.Context, sshFile, fpr, sshFlag, pgpFlag string) (signer, bool, error) {
	switch {
	case sshFile != "" && fpr != "":
		return signer{}, false, fmt.Errorf("%w: give --%s or --%s, not both", errUsage, sshFlag, pgpFlag)
	case sshFile != "":
		s, err := c.sshSigner(ctx, sshFile)
		return s, true, err
	case fpr != "":
		s, err := c.pgpSigner(fpr)
		return s, true, err
	}
	return signer{}, false, nil
}

func (c *idClient) claim(ctx context.Context, handle string, f idFlags) error {
	s, ok, err := c.newSigner(ctx, f.sshKey, f.pgp, "ssh-key", "pgp")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: kith id claim needs the key to prove: --ssh-key FILE or --pgp FPR", errUsage)
	}
	if s.kind == identity.KindPGP {
		if err := c.uploadKey(ctx, s); err != nil {
			return err
		}
	}
	stmt, err := c.challenge(ctx, "claim", handle, s.factor())
	if err != nil {
		return err
	}
	sig, err := c.sign(ctx, s, stmt)
	if err != nil {
		return err
	}
	var doc api.IdentityDoc
	req := api.ClaimRequest{SignedStatement: api.SignedStatement{Statement: stmt, Signature: sig}, Label: s.label}
	if err := c.call(ctx, "claim "+handle, http.MethodPost, "/api/v1/identities", handle, req, &doc); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "claimed %s with %s (proven by its signature)\n", doc.Handle, s)
	c.printWhere(identity.Handle(doc.Handle), "  ")
	return nil
}

func (c *idClient) add(ctx context.Context, handle string, f idFlags) error {
	s, ok, err := c.newSigner(ctx, f.sshKey, f.pgp, "ssh-key", "pgp")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: kith id add needs the key to link: --ssh-key FILE or --pgp FPR", errUsage)
	}
	doc, err := c.lookup(ctx, handle)
	if err != nil {
		return err
	}
	by, err := c.coSigner(ctx, doc, f, s.id)
	if err != nil {
		return err
	}
	if s.kind == identity.KindPGP {
		if err := c.uploadKey(ctx, s); err != nil {
			return err
		}
	}
	stmt, err := c.challenge(ctx, "add", handle, s.factor())
	if err != nil {
		return err
	}
	sig, err := c.sign(ctx, s, stmt)
	if err != nil {
		return err
	}
	bySig, err := c.sign(ctx, by, stmt)
	if err != nil {
		return err
	}
	req := api.AddRequest{Statement: stmt, Signature: sig, By: by.factor(), BySignature: bySig, Label: s.label}
	if err := c.call(ctx, "link "+s.String()+" to "+handle, http.MethodPost, "/api/v1/identities/"+url.PathEscape(handle)+"/factors", handle, req, &doc); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "linked %s to %s (%s), co-signed by %s\n", s, doc.Handle, assuranceOf(doc, s.id), by)
	return nil
}

func (c *idClient) revoke(ctx context.Context, handle, factor string, f idFlags) error {
	doc, err := c.lookup(ctx, handle)
	if err != nil {
		return err
	}
	// The factor as the identity holds it: by value, or by a key file.
	want := strings.TrimSpace(factor)
	if pf, err := identity.ParsePGPFingerprint(want); err == nil {
		want = pf.Value
	} else if !strings.HasPrefix(want, "SHA256:") {
		s, err := c.sshSigner(ctx, want)
		if err != nil {
			return fmt.Errorf("%w: FACTOR %q is neither a SHA256:... fingerprint, an OpenPGP fingerprint nor a readable SSH key file (%v)", errUsage, factor, err)
		}
		want = s.id
	}
	var fd *api.FactorDoc
	for i := range doc.Factors {
		if doc.Factors[i].Value == want {
			fd = &doc.Factors[i]
		}
	}
	if fd == nil {
		return fmt.Errorf("%s has no factor %s ('kith id show %s' lists its factors)", handle, want, handle)
	}
	name := fd.Value
	if fd.Kind == string(identity.KindSSH) {
		name = fd.Key
	}
	by, err := c.coSigner(ctx, doc, f, "")
	if err != nil {
		return err
	}
	stmt, err := c.challenge(ctx, "revoke", handle, name)
	if err != nil {
		return err
	}
	sig, err := c.sign(ctx, by, stmt)
	if err != nil {
		return err
	}
	req := api.RevokeRequest{Statement: stmt, By: by.factor(), Signature: sig}
	if err := c.call(ctx, "revoke "+fd.Kind+" "+fd.Value, http.MethodPost, "/api/v1/identities/"+url.PathEscape(handle)+"/revocations", handle, req, &doc); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "revoked %s %s from %s (%s), signed by %s\n", fd.Kind, fd.Value, doc.Handle, assuranceOf(doc, fd.Value), by)
	return nil
}

// assuranceOf is a factor's assurance in doc.
func assuranceOf(doc api.IdentityDoc, value string) string {
	for _, f := range doc.Factors {
		if f.Value == value {
			return f.Assurance
		}
	}
	return "not listed"
}

// printWhere prints where the identity h is served.
func (c *idClient) printWhere(h identity.Handle, indent string) {
	if name, ok := h.Host(); ok {
		fmt.Fprintf(c.env.stdout, "%sknown_hosts: %s/hosts/%s.known_hosts\n", indent, c.server, name)
		return
	}
	fmt.Fprintf(c.env.stdout, "%sprofile:  %s/u/%s\n%sSSH keys: %s/users/%s.keys\n", indent, c.server, h, indent, c.server, h)
}

func (c *idClient) lookup(ctx context.Context, handle string) (api.IdentityDoc, error) {
	var doc api.IdentityDoc
	path := "/users/" + url.PathEscape(handle) + ".json"
	if name, ok := identity.Handle(handle).Host(); ok {
		path = "/hosts/" + url.PathEscape(name) + ".json"
	}
	err := c.call(ctx, "look up "+handle, http.MethodGet, path, handle, nil, &doc)
	return doc, err
}

// coSigner is the key that signs for the identity: the --by-* flag's, or
// else the one key here that is proven for it (other than skip).
func (c *idClient) coSigner(ctx context.Context, doc api.IdentityDoc, f idFlags, skip string) (signer, error) {
	s, ok, err := c.newSigner(ctx, f.bySSHKey, f.byPGP, "by-ssh-key", "by-pgp")
	if err != nil || ok {
		return s, err
	}
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
		return signer{}, fmt.Errorf("%s has no proven SSH or OpenPGP key to co-sign with ('kith id show %s')", doc.Handle, doc.Handle)
	}
	var found []signer
	seen := map[string]bool{}
	for _, s := range c.localSigners(ctx) {
		if proven[s.id] && !seen[s.id] {
			seen[s.id] = true
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return signer{}, fmt.Errorf("none of the keys proven for %s (%s) is in ~/.ssh, the SSH agent or gpg's secret keys here: say which to co-sign with, --by-ssh-key FILE or --by-pgp FPR",
			doc.Handle, strings.Join(names, ", "))
	}
	var list []string
	for _, s := range found {
		list = append(list, s.String())
	}
	return signer{}, fmt.Errorf("several keys here are proven for %s (%s): choose one with --by-ssh-key FILE or --by-pgp FPR",
		doc.Handle, strings.Join(list, ", "))
}

// localSigners lists the keys this machine can sign with: ~/.ssh/*.pub
// with a private key beside them, the SSH agent's keys, and gpg's secret
// keys. Tools that are missing or fail contribute nothing.
func (c *idClient) localSigners(ctx context.Context) []signer {
	var out []signer
	if home := getenv(c.env, "HOME"); home != "" {
		pubs, _ := filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
		for _, p := range pubs {
			if _, err := os.Stat(strings.TrimSuffix(p, ".pub")); err != nil {
				continue
			}
			if s, err := c.sshSigner(ctx, strings.TrimSuffix(p, ".pub")); err == nil {
				out = append(out, s)
			}
		}
	}
	if getenv(c.env, "SSH_AUTH_SOCK") != "" {
		if lines, err := c.tool(ctx, nil, "ssh-add", "-L"); err == nil {
			for _, l := range strings.Split(string(lines), "\n") {
				k, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(l)))
				if err != nil || k.Cert != nil {
					continue
				}
				out = append(out, signer{kind: identity.KindSSH, pub: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ssh.NewKey(k.Public, "")))),
					id: k.Fingerprint().String()})
			}
		}
	}
	if colons, err := c.tool(ctx, nil, "gpg", "--batch", "--with-colons", "--list-secret-keys"); err == nil {
		primary := false
		for _, l := range strings.Split(string(colons), "\n") {
			f := strings.Split(l, ":")
			switch {
			case f[0] == "sec":
				primary = true
			case f[0] == "ssb":
				primary = false
			case f[0] == "fpr" && primary && len(f) > 9:
				if s, err := c.pgpSigner(f[9]); err == nil {
					out = append(out, s)
				}
				primary = false
			}
		}
	}
	return out
}

func (c *idClient) show(ctx context.Context, handle string) error {
	doc, err := c.lookup(ctx, handle)
	if err != nil {
		return err
	}
	w := c.env.stdout
	fmt.Fprintf(w, "%s (since %s)\n", doc.Handle, doc.Created.Format("2006-01-02"))
	if len(doc.Factors) == 0 {
		fmt.Fprintln(w, "  no factors")
	}
	for _, f := range doc.Factors {
		line := fmt.Sprintf("  %-8s %-5s %s", f.Assurance, f.Kind, f.Value)
		if f.Label != "" {
			line += " (" + f.Label + ")"
		}
		var how []string
		for _, e := range f.Evidence {
			if e.Counts {
				how = append(how, e.Method)
			}
		}
		if len(how) > 0 {
			line += " by " + strings.Join(how, ", ")
		}
		if f.Parent != "" {
			line += " via " + f.Parent
		}
		fmt.Fprintln(w, line)
	}
	c.printWhere(identity.Handle(doc.Handle), "")
	return nil
}
