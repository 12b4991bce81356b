package main

import (
	"os"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
)

// withCluster runs the tests with the package's throwaway PostgreSQL.
type withCluster struct{ m *testing.M }

func (w withCluster) Run() int { return pgtest.Main(w.m) }

func TestMain(m *testing.M) {
	testscript.Main(withCluster{m}, map[string]func(){"kith": main})
}

// TestScripts runs testdata/script/*.txtar against the real binary:
// good_* succeed, fail_* show how kith refuses bad input.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ADMINDB", os.Getenv(pgtest.EnvURL))
			return nil
		},
		Condition: func(cond string) (bool, error) {
			return false, nil
		},
	})
}

// eventually polls cond every interval until it holds or within has
// passed, and reports whether it held: a wait on a condition, with within
// generous enough for a loaded machine. The caller says what failed.
func eventually(within, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}
