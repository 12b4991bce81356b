// host.go: kith host release, the operator's command that frees a host
// name held by a squatter's key or by keys the host lost: every key's link
// to host:NAME ends with a host.release record in the log, and the name
// may be claimed again by a new host key.

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/kith-keyserver/kith/identity"
)

const hostUsage = `host release NAME --reason TEXT [--by NAME]

Releases the host name NAME (the host identity host:NAME): the link of
every SSH key published for it ends, as a revocation would (the keys are
no longer served, and their host certificates go into the revocation
list), and the name may be claimed again, by the first valid claim signed
with a host key, as any host name in hosts.names. Each released key is a
host.release record in the public log; who did it and why (--by, --reason)
go to this command's log on stderr, not into the public log. Claim the
name from the right host at once: until then it is first come again.`

func runHost(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		return misuse(env, "host", "needs a command: release")
	}
	verb, args := args[0], args[1:]
	switch verb {
	case "release":
	case "help", "-h", "-help", "--help":
		args = []string{"--help"}
	default:
		return misuse(env, "host", "unknown command %q: release", verb)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(args[1:], args[0])
	}
	fs := newFlagSet(env, "host release", hostUsage)
	reason := fs.String("reason", "", "why (required; logged on stderr, not in the public log)")
	by := fs.String("by", "", "who does it (default USER@HOST)")
	cfg, rest, err := loadToolConfig(fs, args, env.environ, "public_url", "listen")
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: kith host release takes one host NAME", errUsage)
	}
	if strings.TrimSpace(*reason) == "" {
		return fmt.Errorf("%w: kith host release needs --reason", errUsage)
	}
	actor := actorOr(*by, env)
	log := newLogger(env.stderr, cfg)
	st, svc, err := openOperatorStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	name := identity.FoldHostName(rest[0])
	released, err := svc.ReleaseHost(ctx, name)
	if err != nil {
		return err
	}
	if len(released) == 0 {
		fmt.Fprintf(env.stdout, "host:%s has no key left to release; its name may be claimed\n", name)
		return nil
	}
	for _, f := range released {
		log.Info("released a host key", "host", name, "key", f.Value, "by", actor, "reason", *reason)
		fmt.Fprintf(env.stdout, "released %s from host:%s\n", f.Value, name)
	}
	fmt.Fprintf(env.stdout, "host:%s may be claimed again\n", name)
	return nil
}
