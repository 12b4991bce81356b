package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/identity/testkit"
)

// withCluster runs the tests with the package's throwaway PostgreSQL.
type withCluster struct{ m *testing.M }

// Run also removes the kith binary the tests made, if they made one.
func (w withCluster) Run() int {
	code := pgtest.Main(w.m)
	if builtKith.dir != "" {
		os.RemoveAll(builtKith.dir)
	}
	return code
}

func TestMain(m *testing.M) {
	testscript.Main(withCluster{m}, map[string]func(){"kith": main})
}

// TestScripts runs testdata/script/*.txtar against the real binary:
// good_* succeed, fail_* show how kith refuses bad input. Besides
// testscript's commands they have:
//
//	kith-db                  a fresh database of the test cluster, in $DB
//	kith-server              the API, HKP and the log over a fresh store,
//	                         in-process, at $SERVER
//	kith-server integrate    have the log's checkpoint cover every record
//	kith-server get PATH     GET PATH of the server, to stdout
//
// and the condition [tool:NAME], true when NAME is installed or CI=true
// (so that a missing tool fails the script in CI).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ADMINDB", os.Getenv(pgtest.EnvURL))
			// A kith serve that gets as far as listening binds port 0,
			// never the default ports a quick-start server may hold.
			env.Setenv("KITH_LISTEN", "127.0.0.1:0")
			env.Setenv("KITH_RECON_LISTEN", "127.0.0.1:0")
			// The script's own test, for what it starts to end with it.
			env.Values["t"] = env.T().(testing.TB)
			env.Values["server"] = new(*apiServer)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if tool, ok := strings.CutPrefix(cond, "tool:"); ok {
				_, err := exec.LookPath(tool)
				return err == nil || testkit.CI(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"kith-db": func(ts *testscript.TestScript, neg bool, args []string) {
				ts.Setenv("DB", pgtest.NewDatabase(ts.Value("t").(testing.TB)))
			},
			"kith-server": scriptServer,
		},
	})
}

// scriptServer is the kith-server command of the scripts.
func scriptServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! kith-server")
	}
	switch {
	case len(args) == 0:
		a := newAPIServer(ts.Value("t").(testing.TB))
		*ts.Value("server").(**apiServer) = a
		ts.Setenv("SERVER", a.srv.URL)
	case args[0] == "integrate":
		(*ts.Value("server").(**apiServer)).integrate()
	case args[0] == "get" && len(args) == 2:
		resp, err := http.Get(ts.Getenv("SERVER") + args[1])
		ts.Check(err)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			ts.Fatalf("GET %s: %s", args[1], resp.Status)
		}
		_, err = io.Copy(ts.Stdout(), resp.Body)
		ts.Check(err)
	default:
		ts.Fatalf("usage: kith-server [integrate | get PATH]")
	}
}
