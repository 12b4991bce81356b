// id.go: `kith id`, the client of the identity API: flags and output
// around package web/api/client, which asks the server for a statement,
// signs it with ssh-keygen -Y sign (a key file or the agent) or gpg
// --clearsign, and sends it back. It never sees a private key.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/maillink"
	"github.com/kith-keyserver/kith/web/api"
	"github.com/kith-keyserver/kith/web/api/client"
)

// idServerEnv names the server when --server is not given.
const idServerEnv = "KITH_SERVER"

// idSubcommands are the verbs of kith id, for its usage text.
var idSubcommands = []struct{ name, synopsis, summary string }{
	{"claim", "claim HANDLE (--ssh-key FILE | --pgp FPR)", "create the identity HANDLE, proven by one key"},
	{"add", "add HANDLE (--ssh-key FILE | --pgp FPR) [--by-ssh-key FILE | --by-pgp FPR]", "link another key, co-signed by a key already proven for HANDLE"},
	{"revoke", "revoke HANDLE FACTOR [--by-ssh-key FILE | --by-pgp FPR]", "unlink a factor (SHA256:... fingerprint, OpenPGP fingerprint or key file)"},
	{"show", "show HANDLE", "print an identity's factors and how each is proven"},
	{"email", "email (verify|withdraw) ADDRESS --pgp FPR", "have the server mail ADDRESS a link that publishes it for the OpenPGP key, or withdraws it"},
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
	sshKey, pgp     string
	bySSHKey, byPGP string
}

func runIDCommand(ctx context.Context, env *environment, name, synopsis, summary string, args []string) error {
	fs := newToolFlags(env, "id "+name, "id "+synopsis, strings.ToUpper(summary[:1])+summary[1:]+".")
	server := serverFlag(fs, env)
	var f idFlags
	switch name {
	case "email":
		fs.StringVar(&f.pgp, "pgp", "", "the OpenPGP key (`fingerprint`) whose user ID carries the address; gpg's copy is uploaded first")
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
	if name == "revoke" || name == "email" {
		want = 2
	}
	if len(pos) != want {
		fmt.Fprintf(env.stderr, "kith id %s: takes %d argument(s), got %d\nUsage: kith id %s\n", name, want, len(pos), synopsis)
		return fmt.Errorf("%w: kith id %s takes %d argument(s), got %d", errQuietUsage, name, want, len(pos))
	}
	c, err := newServerClient(*server, 0)
	if err != nil {
		return err
	}
	tools := &client.Tools{Env: env.environ}
	if name == "email" {
		return idEmail(ctx, env, c, tools, pos[0], pos[1], f.pgp)
	}
	handle := pos[0]
	var s client.Signer
	if name == "claim" || name == "add" {
		s, err = signerFlags(ctx, tools, f.sshKey, f.pgp, "ssh-key", "pgp")
		if err == nil && s.Kind == "" {
			err = fmt.Errorf("%w: kith id %s needs the key: --ssh-key FILE or --pgp FPR", errUsage, name)
		}
		if err != nil {
			return err
		}
	}
	if name == "claim" {
		// The statement first: the server refuses a handle it keeps or
		// that is taken before the key is uploaded.
		stmt, err := c.Challenge(ctx, identity.PurposeClaim, handle, s.Factor())
		if err != nil {
			return err
		}
		if err := uploadPGP(ctx, env, c, s); err != nil {
			return err
		}
		doc, err := c.ClaimWith(ctx, handle, s, stmt)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "claimed %s with %s (proven by its signature)\n", doc.Handle, s)
		printWhere(env.stdout, c, identity.Handle(doc.Handle), "  ")
		return nil
	}
	doc, err := c.Lookup(ctx, handle)
	if err != nil || name == "show" {
		return showIdentity(env.stdout, c, doc, err)
	}
	var fd api.FactorDoc
	skip := s.ID
	if name == "revoke" {
		if fd, err = tools.Find(ctx, doc, pos[1]); errors.Is(err, client.ErrBadFactor) {
			return fmt.Errorf("%w: FACTOR %w", errUsage, err)
		} else if err != nil {
			return err
		}
		skip = ""
	}
	by, err := signerFlags(ctx, tools, f.bySSHKey, f.byPGP, "by-ssh-key", "by-pgp")
	if err == nil && by.Kind == "" {
		by, err = tools.CoSigner(ctx, doc, skip)
	}
	if err != nil {
		return err
	}
	if name == "revoke" {
		var refusal *client.Refusal
		if doc, err = c.Revoke(ctx, handle, fd, by); errors.As(err, &refusal) && refusal.Code == identity.CodeAlreadyRevoked {
			// What the command is for is true already: done.
			fmt.Fprintf(env.stdout, "%s %s is already revoked from %s: nothing to do\n", fd.Kind, fd.Value, handle)
			return nil
		} else if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "revoked %s %s from %s (%s), signed by %s\n", fd.Kind, fd.Value, doc.Handle, client.Assurance(doc, fd.Value), by)
		return nil
	}
	if err := uploadPGP(ctx, env, c, s); err != nil {
		return err
	}
	if doc, err = c.Add(ctx, handle, s, by); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "linked %s to %s (%s), co-signed by %s\n", s, doc.Handle, client.Assurance(doc, s.ID), by)
	return nil
}

// idEmail runs kith id email: verify or withdraw an address of an
// OpenPGP key by mail, through the server's VKS API.
func idEmail(ctx context.Context, env *environment, c *client.Client, tools *client.Tools, verb, addr, fpr string) error {
	var action identity.EmailAction
	switch verb {
	case "verify":
		action = identity.EmailVerify
	case "withdraw":
		action = identity.EmailWithdraw
	default:
		return fmt.Errorf("%w: kith id email verify|withdraw ADDRESS --pgp FPR, not %q", errUsage, verb)
	}
	if fpr == "" {
		return fmt.Errorf("%w: kith id email %s needs the key: --pgp FPR", errUsage, verb)
	}
	s, err := tools.PGPKey(fpr)
	if err != nil {
		return fmt.Errorf("--pgp: %w", err)
	}
	st, err := c.RequestEmail(ctx, s, action, addr)
	if err != nil {
		return err
	}
	addr = strings.ToLower(strings.TrimSpace(addr))
	switch {
	case action == identity.EmailVerify && st.Status[addr] == maillink.StatusPublished:
		fmt.Fprintf(env.stdout, "%s is already published for %s: no mail sent\n", addr, st.KeyFpr)
	case action == identity.EmailVerify && st.Status[addr] == maillink.StatusRevoked:
		fmt.Fprintf(env.stdout, "the key %s revokes its user ID with %s: it cannot be published; no mail sent\n", st.KeyFpr, addr)
	case action == identity.EmailVerify:
		fmt.Fprintf(env.stdout, "a mail went to %s: open its link and confirm to publish the address for %s\n", addr, st.KeyFpr)
	case st.Status[addr] == maillink.StatusPublished:
		fmt.Fprintf(env.stdout, "a mail went to %s: open its link and confirm to withdraw the address from %s\n", addr, st.KeyFpr)
	default:
		fmt.Fprintf(env.stdout, "%s is not published for %s: nothing to withdraw; no mail sent\n", addr, st.KeyFpr)
	}
	return nil
}

// signerFlags reads a pair of --ssh-key and --pgp flags: a zero Signer
// when neither is given.
func signerFlags(ctx context.Context, tools *client.Tools, sshFile, fpr, sshFlag, pgpFlag string) (client.Signer, error) {
	switch {
	case sshFile != "" && fpr != "":
		return client.Signer{}, fmt.Errorf("%w: give --%s or --%s, not both", errUsage, sshFlag, pgpFlag)
	case sshFile != "":
		return tools.SSHKey(ctx, sshFile)
	case fpr != "":
		s, err := tools.PGPKey(fpr)
		if err != nil {
			return s, fmt.Errorf("--%s: %w", pgpFlag, err)
		}
		return s, nil
	}
	return client.Signer{}, nil
}

// uploadPGP sends an OpenPGP key to the server, which must hold it to
// check its signatures; other keys need no upload.
func uploadPGP(ctx context.Context, env *environment, c *client.Client, s client.Signer) error {
	if s.Kind != identity.KindPGP {
		return nil
	}
	if err := c.UploadKey(ctx, s); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "uploaded OpenPGP key %s\n", s.ID)
	return nil
}

// printWhere prints where the identity h is served.
func printWhere(w io.Writer, c *client.Client, h identity.Handle, indent string) {
	if name, ok := h.Host(); ok {
		fmt.Fprintf(w, "%sknown_hosts: %s/hosts/%s.known_hosts\n", indent, c.Server(), name)
		return
	}
	fmt.Fprintf(w, "%sprofile:  %s/u/%s\n%sSSH keys: %s/users/%s.keys\n", indent, c.Server(), h, indent, c.Server(), h)
}

// showIdentity prints an identity's factors and how each is proven.
func showIdentity(w io.Writer, c *client.Client, doc api.IdentityDoc, err error) error {
	if err != nil {
		return err
	}
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
	printWhere(w, c, identity.Handle(doc.Handle), "")
	return nil
}
