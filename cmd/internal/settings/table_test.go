package settings

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// conf is a configuration with one setting of each kind.
type conf struct {
	Name   string     `toml:"name"`
	Count  int        `toml:"count"`
	On     bool       `toml:"on"`
	Tags   StringList `toml:"tags"`
	Wait   Duration   `toml:"wait"`
	Nested struct {
		Addr string `toml:"addr"`
	} `toml:"nested"`
	Secrets []string `toml:"secrets"`
}

func table() Table[conf] {
	return Table[conf]{
		EnvPrefix: "T_",
		FileEnv:   "T_CONFIG",
		Settings: []Setting[conf]{
			{Key: "name", Usage: "a `name`", Bind: func(c *conf) flag.Value { return (*StringValue)(&c.Name) }},
			{Key: "count", Usage: "a `number`", Bind: func(c *conf) flag.Value { return (*IntValue)(&c.Count) }},
			{Key: "on", Usage: "on or off", Bind: func(c *conf) flag.Value { return (*BoolValue)(&c.On) }},
			{Key: "tags", Usage: "`tags`", Bind: func(c *conf) flag.Value { return (*ListValue)(&c.Tags) }},
			{Key: "wait", Usage: "a `duration`", Bind: func(c *conf) flag.Value { return (*DurationValue)(&c.Wait) }},
			{Key: "nested.addr", Usage: "an `address`", Bind: func(c *conf) flag.Value { return (*StringValue)(&c.Nested.Addr) }},
		},
		Defaults: func() conf { return conf{Name: "default", Count: 1, Wait: Duration(time.Second)} },
		Expected: func(c *conf, name string) bool {
			for _, s := range c.Secrets {
				if s == name {
					return true
				}
			}
			return name == "T_AUX"
		},
		Validate: func(c conf) error {
			if c.Count < 0 {
				return errors.New("setting count: must not be negative")
			}
			return nil
		},
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, flagged map[string]bool, args, env []string) (conf, []string, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return table().Load(fs, args, env, flagged)
}

func TestLoadAppliesDefaultsFileEnvironmentFlagsInOrder(t *testing.T) {
	file := writeFile(t, "name = \"file\"\ncount = 2\ntags = [\"a\", \"b\"]\n[nested]\naddr = \"file:1\"\n")
	cases := []struct {
		name string
		args []string
		env  []string
		want func(conf) bool
	}{
		{"defaults", nil, nil, func(c conf) bool { return c.Name == "default" && c.Count == 1 && c.Wait == Duration(time.Second) }},
		{"file beats default", []string{"--config", file}, nil, func(c conf) bool {
			return c.Name == "file" && c.Count == 2 && strings.Join(c.Tags, "|") == "a|b" && c.Nested.Addr == "file:1"
		}},
		{"file from its variable", nil, []string{"T_CONFIG=" + file}, func(c conf) bool { return c.Name == "file" }},
		{"environment beats file", []string{"--config", file}, []string{"T_NAME=env", "T_NESTED_ADDR=env:2"}, func(c conf) bool {
			return c.Name == "env" && c.Count == 2 && c.Nested.Addr == "env:2"
		}},
		{"flag beats environment", []string{"--config", file, "--name", "flag", "--nested-addr", "flag:3"}, []string{"T_NAME=env"}, func(c conf) bool {
			return c.Name == "flag" && c.Nested.Addr == "flag:3"
		}},
		{"empty variable is unset", nil, []string{"T_NAME="}, func(c conf) bool { return c.Name == "default" }},
		{"other prefixes ignored", nil, []string{"PATH=/bin", "X_NAME=x"}, func(c conf) bool { return c.Name == "default" }},
		{"each kind from flags", []string{"--count", "7", "--on", "--tags", " x, ,y ", "--wait", "1m30s"}, nil, func(c conf) bool {
			return c.Count == 7 && c.On && strings.Join(c.Tags, "|") == "x|y" && c.Wait == Duration(90*time.Second)
		}},
		{"each kind from environment", nil, []string{"T_COUNT=8", "T_ON=true", "T_TAGS=p,q", "T_WAIT=2s"}, func(c conf) bool {
			return c.Count == 8 && c.On && strings.Join(c.Tags, "|") == "p|q" && c.Wait == Duration(2*time.Second)
		}},
		{"expected variables pass", nil, []string{"T_AUX=1"}, func(c conf) bool { return c.Name == "default" }},
		{"variables the file expects pass", []string{"--config", writeFile(t, "secrets = [\"T_SECRET\"]\n")}, []string{"T_SECRET=s"}, func(c conf) bool {
			return c.Name == "default"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := load(t, nil, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(c) {
				t.Errorf("got %+v", c)
			}
		})
	}
}

func TestLoadRefusesAndNamesTheSetting(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     []string
		wantErr string
	}{
		{"unknown variable", nil, []string{"T_COLOUR=red"}, "unknown setting in environment: T_COLOUR"},
		{"bad variable", nil, []string{"T_COUNT=many"}, `setting count (T_COUNT): "many" is not a whole number`},
		{"bad flag", []string{"--on=maybe"}, nil, "invalid boolean value"},
		{"bad flag value given", []string{"--wait", "-1s"}, nil, "negative duration -1s"},
		{"unknown file key", []string{"--config", writeFile(t, "colour = 1\n")}, nil, "unknown setting colour"},
		{"malformed file", []string{"--config", writeFile(t, "name = \n")}, nil, "line 1"},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "none.toml")}, nil, "config file "},
		{"validation", []string{"--count", "-1"}, nil, "setting count: must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := load(t, nil, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoadFlagsOnlyTheFlaggedSettingsButReadsAllElsewhere(t *testing.T) {
	flagged := map[string]bool{"name": true}
	c, rest, err := load(t, flagged, []string{"--name", "n", "arg"}, []string{"T_COUNT=5"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "n" || c.Count != 5 || strings.Join(rest, " ") != "arg" {
		t.Errorf("got %+v, rest %q", c, rest)
	}
	if _, _, err := load(t, flagged, []string{"--count", "5"}, nil); err == nil {
		t.Error("a setting without its flag was accepted as a flag")
	}
}

func TestNames(t *testing.T) {
	s := Setting[conf]{Key: "ssh_ca.max-validity"}
	if got := s.FlagName(); got != "ssh-ca-max-validity" {
		t.Errorf("FlagName = %q", got)
	}
	if got := s.EnvName("KITH_"); got != "KITH_SSH_CA_MAX_VALIDITY" {
		t.Errorf("EnvName = %q", got)
	}
}

func TestUsageNamesVariableAndKey(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, _, err := table().Load(fs, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := fs.Lookup("nested-addr").Usage, "an `address` (env T_NESTED_ADDR, file key nested.addr)"; got != want {
		t.Errorf("usage = %q, want %q", got, want)
	}
	if got, want := fs.Lookup("config").Usage, "TOML configuration `file` (env T_CONFIG)"; got != want {
		t.Errorf("usage = %q, want %q", got, want)
	}
}
