package settings

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Setting is one scalar setting of a configuration struct C, reachable by
// TOML key, flag and environment variable alike.
type Setting[C any] struct {
	// Key is the TOML key ("recon.listen"); the flag is the key with '_'
	// and '.' as '-' ("recon-listen").
	Key string
	// Usage is the flag's usage line; a word in back quotes names the
	// flag's argument, as in package flag.
	Usage string
	// Bind returns the flag.Value that reads and sets the setting's field
	// in c.
	Bind func(c *C) flag.Value
}

// FlagName is the setting's flag: the key with '_' and '.' as '-'.
func (s Setting[C]) FlagName() string {
	return strings.NewReplacer("_", "-", ".", "-").Replace(s.Key)
}

// EnvName is the setting's environment variable: prefix followed by the
// key in upper case with '.' and '-' as '_'.
func (s Setting[C]) EnvName(prefix string) string {
	return prefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(s.Key))
}

// Table is a program's settings and how it loads them.
type Table[C any] struct {
	// EnvPrefix starts every variable of the program ("KITH_"). A
	// variable with the prefix that names no setting is refused unless
	// Expected says otherwise.
	EnvPrefix string
	// FileEnv is the variable that names the TOML file when the --config
	// flag does not.
	FileEnv string
	// Settings are the scalar settings, in the order their flags are
	// registered.
	Settings []Setting[C]
	// Defaults returns the configuration when nothing says otherwise.
	Defaults func() C
	// Expected reports whether a variable with EnvPrefix is expected
	// although it names no setting; cfg holds the defaults and the file.
	// Nil expects none.
	Expected func(cfg *C, name string) bool
	// Validate checks the loaded configuration; nil checks nothing.
	Validate func(C) error
}

// Load builds the configuration from a command's arguments and
// environment: it registers --config and the flags of the settings in
// flagged (nil: all) on fs, parses args, and applies the file, the
// environment and the flags given, in that order, over the defaults. It
// returns the arguments left after the flags. The file and the
// environment may hold any setting, flagged or not.
func (t Table[C]) Load(fs *flag.FlagSet, args []string, environ []string, flagged map[string]bool) (C, []string, error) {
	cfg := t.Defaults()
	var configFile string
	fs.StringVar(&configFile, "config", "", fmt.Sprintf("TOML configuration `file` (env %s)", t.FileEnv))
	// Flags parse into a scratch configuration; only the ones given are
	// applied, after the file and the environment.
	scratch := t.Defaults()
	for _, s := range t.Settings {
		if flagged == nil || flagged[s.Key] {
			fs.Var(s.Bind(&scratch), s.FlagName(), fmt.Sprintf("%s (env %s, file key %s)", s.Usage, s.EnvName(t.EnvPrefix), s.Key))
		}
	}
	if err := fs.Parse(args); err != nil {
		return cfg, nil, err
	}
	env := map[string]string{}
	for _, kv := range environ {
		// An empty variable counts as unset, as in most tools.
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" && strings.HasPrefix(k, t.EnvPrefix) {
			env[k] = v
		}
	}
	if configFile == "" {
		configFile = env[t.FileEnv]
	}
	if configFile != "" {
		if err := ReadFile(configFile, &cfg); err != nil {
			return cfg, nil, err
		}
	}
	known := map[string]Setting[C]{}
	for _, s := range t.Settings {
		known[s.EnvName(t.EnvPrefix)] = s
	}
	var names []string
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s, ok := known[k]
		if !ok {
			if k == t.FileEnv || (t.Expected != nil && t.Expected(&cfg, k)) {
				continue
			}
			return cfg, nil, fmt.Errorf("unknown setting in environment: %s", k)
		}
		if err := s.Bind(&cfg).Set(env[k]); err != nil {
			return cfg, nil, fmt.Errorf("setting %s (%s): %w", s.Key, k, err)
		}
	}
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		for _, s := range t.Settings {
			if s.FlagName() == f.Name && flagErr == nil {
				if err := s.Bind(&cfg).Set(f.Value.String()); err != nil {
					flagErr = fmt.Errorf("setting %s (--%s): %w", s.Key, f.Name, err)
				}
			}
		}
	})
	if flagErr != nil {
		return cfg, nil, flagErr
	}
	if t.Validate != nil {
		if err := t.Validate(cfg); err != nil {
			return cfg, nil, err
		}
	}
	return cfg, fs.Args(), nil
}

// ReadFile decodes the TOML file at path into v, refusing keys v has no
// field for. Its errors name the file, and the line and key where the
// file is malformed.
func ReadFile(path string, v any) error {
	md, err := toml.DecodeFile(path, v)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			if perr.LastKey != "" {
				return fmt.Errorf("config file %s: line %d: setting %s: %s", path, perr.Position.Line, perr.LastKey, perr.Message)
			}
			return fmt.Errorf("config file %s: line %d: %s", path, perr.Position.Line, perr.Message)
		}
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = k.String()
		}
		return fmt.Errorf("config file %s: unknown setting %s", path, strings.Join(keys, ", "))
	}
	return nil
}
