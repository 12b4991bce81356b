package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/jackc/pgx/v5"

	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/oidc"
)

// Config is every setting of the kith binary. Scalar settings come, in
// rising precedence, from the defaults, the TOML file (--config), KITH_*
// environment variables and flags; tables such as [[recon.peer]] come from
// the file only.
type Config struct {
	Listen string `toml:"listen"`
	// PublicURL is how clients reach this server; it names the server in
	// the statements people sign to prove their keys.
	PublicURL   string `toml:"public_url"`
	DataDir     string `toml:"data_dir"`
	DatabaseURL string `toml:"database_url"`
	// DebugListen is a loopback address serving Go's profiler
	// (/debug/pprof/); empty means none.
	DebugListen string `toml:"debug_listen"`
	// DatabaseMaxConns caps each process's pool of database connections.
	DatabaseMaxConns int    `toml:"database_max_conns"`
	LogFormat        string `toml:"log_format"`
	LogLevel         string `toml:"log_level"`
	// ShutdownTimeout bounds how long in-flight requests may take to
	// finish after SIGINT or SIGTERM.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// PostgresUser runs the embedded cluster when Kith runs as root.
	PostgresUser string `toml:"postgres_user"`
	// ChallengesPerMinute caps how many identity challenges one client IP
	// may ask for a minute; negative means no cap (behind a proxy that
	// hides client addresses, cap there instead).
	ChallengesPerMinute int `toml:"challenges_per_minute"`
	// Recon is the [recon] section: SKS set reconciliation with peers.
	Recon ReconConfig `toml:"recon"`
	// Web is the [web] section: sessions and cookies of the pages.
	Web WebConfig `toml:"web"`
	// OIDC is the [oidc] section: the [[oidc.provider]] people log in with.
	OIDC OIDCConfig `toml:"oidc"`
	// SMTP is the [smtp] section: the mail server verification mails go
	// through.
	SMTP SMTPConfig `toml:"smtp"`
	// WKD is the [wkd] section: the domains Kith serves a Web Key
	// Directory for.
	WKD WKDConfig `toml:"wkd"`
	// HKP is the [hkp] section.
	HKP HKPConfig `toml:"hkp"`
	// Log is the [log] section: the transparency log's signing key.
	Log TransparencyLogConfig `toml:"log"`
	// Hosts is the [hosts] section: the host names whose SSH host keys
	// may be published (host:NAME identities).
	Hosts HostsConfig `toml:"hosts"`
	// SSHCA is the [ssh_ca] section: the SSH user certificate authority.
	SSHCA SSHCAConfig `toml:"ssh_ca"`
}

// HostsConfig is the [hosts] section.
type HostsConfig struct {
	// Names are the host names that may be claimed as host identities:
	// exact names ("git.example.org") and "*.DOMAIN" for every name
	// below DOMAIN. Empty: none (no host keys are published).
	Names StringList `toml:"names"`
}

// hostPolicy is the parsed hosts.names (validate has checked it).
func (c Config) hostPolicy() identity.HostPolicy {
	p, _ := identity.ParseHostPolicy(c.Hosts.Names)
	return p
}

// SSHCAConfig is the [ssh_ca] section.
type SSHCAConfig struct {
	// Enabled has the server issue SSH user certificates for proven SSH
	// keys (default false).
	Enabled bool `toml:"enabled"`
	// KeyFile holds the CA's Ed25519 key: 32 random bytes (the seed) or
	// an unencrypted OpenSSH private key. Empty means a key kept in the
	// database, created on first start and shared by every node.
	KeyFile string `toml:"key_file"`
	// Validity is how long a certificate is valid unless the request
	// asks for less; MaxValidity the longest a request may ask for.
	Validity    Duration `toml:"validity"`
	MaxValidity Duration `toml:"max_validity"`
	// CertificatesPerHour caps how many certificates one identity gets
	// in an hour; negative means no cap.
	CertificatesPerHour int `toml:"certificates_per_hour"`
	// PrincipalsFile lists extra principals per identity: lines of
	// "handle principal...", # comments.
	PrincipalsFile string `toml:"principals_file"`
	// CriticalOptions ("force-command=CMD", "source-address=CIDR,...",
	// "verify-required") and Extensions ("permit-pty", ...) go into every
	// certificate.
	CriticalOptions StringList `toml:"critical_options"`
	Extensions      StringList `toml:"extensions"`
}

// TransparencyLogConfig is the [log] section.
type TransparencyLogConfig struct {
	// KeyFile holds the 32-byte seed of the Ed25519 key that signs the
	// log's checkpoints. Empty means a key kept in the database, created
	// on first start and shared by every node.
	KeyFile string `toml:"key_file"`
}

// SMTPConfig is the [smtp] section. With no address, mails are written to
// DATA_DIR/outbox as .eml files.
type SMTPConfig struct {
	// Address is the mail server's host:port; empty means the outbox.
	Address string `toml:"address"`
	// From is the sender address; empty means kith@ the public URL's host.
	From string `toml:"from"`
	// Username authenticates (PLAIN, over TLS); empty sends without.
	Username string `toml:"username"`
	// PasswordFile holds the password (one line).
	PasswordFile string `toml:"password_file"`
	// StartTLS requires STARTTLS before anything is sent (default true).
	StartTLS bool `toml:"starttls"`
}

// WKDConfig is the [wkd] section.
type WKDConfig struct {
	// Domains are the mail domains whose Web Key Directory Kith serves.
	Domains StringList `toml:"domains"`
}

// HKPConfig is the [hkp] section.
type HKPConfig struct {
	// EmailLookup is "all" (as SKS: every key naming the address) or
	// "verified" (only keys whose address is verified by mail).
	EmailLookup string `toml:"email_lookup"`
	// Uploads is the upload policy: "open", "identities" (only keys
	// proven for an identity, or uploaded by a logged-in session) or "off"
	// (a read-only mirror); recon fetches follow it too.
	Uploads string `toml:"uploads"`
	// MaxAnswerBytes caps the keys' bytes one op=get may return; a
	// broader get is refused with 400 before any key is read.
	MaxAnswerBytes int `toml:"max_answer_bytes"`
}

// StringList is a list of strings: a TOML array, or comma-separated in a
// flag or variable.
type StringList []string

// WebConfig is the [web] section.
type WebConfig struct {
	// SessionLifetime is how long a login lasts.
	SessionLifetime Duration `toml:"session_lifetime"`
	// SessionIdle ends a session unused this long; zero never does.
	SessionIdle Duration `toml:"session_idle"`
	// SecureCookies marks cookies Secure, for a server behind a
	// TLS-terminating proxy (they are Secure anyway when public_url is
	// https).
	SecureCookies bool `toml:"secure_cookies"`
	// CookieKeyFile holds the 32-byte key that seals login cookies and
	// CSRF tokens. Empty means a key kept in the database, created on
	// first start and shared by every node.
	CookieKeyFile string `toml:"cookie_key_file"`
}

// OIDCConfig is the [oidc] section.
type OIDCConfig struct {
	Providers []oidc.ProviderConfig `toml:"provider"`
}

// ReconConfig is the [recon] section.
type ReconConfig struct {
	// Listen is the recon address; "off" disables recon.
	Listen string `toml:"listen"`
	// Interval is the mean time between gossip rounds.
	Interval Duration `toml:"interval"`
	// Peers is the membership list, [[recon.peer]] tables.
	Peers []ReconPeer `toml:"peer"`
}

// ReconPeer is one [[recon.peer]] table.
type ReconPeer struct {
	// Address is the peer's recon host:port.
	Address string `toml:"address"`
	// HTTP is the peer's HKP base URL for /pks/hashquery; empty means the
	// peer's host at the HTTP port it announces.
	HTTP string `toml:"http"`
	// Filters is the filter string to announce and expect, e.g.
	// "yminsky.dedup,yminsky.merge" for SKS, or Hockeypuck's own string.
	Filters string `toml:"filters"`
	// Enabled is false to keep the entry without gossiping with it
	// (default true).
	Enabled *bool `toml:"enabled"`
}

// defaultMaxConns is the default database pool: four connections per
// core. On 2 cores, 8 served as many cold lookups as 16 with a lower
// tail (p99 9.0 ms against 11.6 ms at 32 clients) and more uploads
// beside them: more backends than that only take turns on the cores.
func defaultMaxConns() int { return 4 * runtime.NumCPU() }

// defaultConfig returns the settings that apply when nothing says otherwise.
func defaultConfig() Config {
	return Config{
		Listen:              "127.0.0.1:11371",
		DataDir:             "./kith-data",
		LogFormat:           "text",
		LogLevel:            "info",
		ShutdownTimeout:     Duration(30 * time.Second),
		PostgresUser:        "postgres",
		DatabaseMaxConns:    defaultMaxConns(),
		ChallengesPerMinute: 30,
		Recon: ReconConfig{
			Listen:   "127.0.0.1:11370",
			Interval: Duration(60 * time.Second),
		},
		Web:  WebConfig{SessionLifetime: Duration(30 * 24 * time.Hour)},
		SMTP: SMTPConfig{StartTLS: true},
		HKP:  HKPConfig{EmailLookup: "all", Uploads: string(keys.UploadsOpen), MaxAnswerBytes: hkp.DefaultMaxAnswerSize},
		SSHCA: SSHCAConfig{
			Validity:            Duration(identity.DefaultCertificateValidity),
			MaxValidity:         Duration(identity.DefaultMaxCertificateValidity),
			CertificatesPerHour: identity.DefaultCertificatesPerHour,
			// What ssh-keygen -s grants unless told otherwise.
			Extensions: StringList{"permit-X11-forwarding", "permit-agent-forwarding", "permit-port-forwarding", "permit-pty", "permit-user-rc"},
		},
	}
}

// Duration is a time.Duration written as in Go ("60s", "1m30s").
type Duration time.Duration

// UnmarshalText parses a duration such as "60s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("negative duration %s", b)
	}
	*d = Duration(v)
	return nil
}

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// setting is one scalar setting, reachable by TOML key, flag and
// environment variable alike.
type setting struct {
	key   string // TOML key; the flag is the key with '_' and '.' as '-'
	usage string
	bind  func(*Config) flag.Value
}

func (s setting) flagName() string {
	return strings.NewReplacer("_", "-", ".", "-").Replace(s.key)
}

func (s setting) envName() string {
	return "KITH_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(s.key))
}

// settings lists the scalar settings of the server and the tools that
// share its store.
func settings() []setting {
	return []setting{
		{"listen", "HTTP `address` for HKP, the web pages and the API", func(c *Config) flag.Value { return (*stringValue)(&c.Listen) }},
		{"public_url", "`URL` clients reach this server at, named in the statements people sign; empty means http://LISTEN", func(c *Config) flag.Value { return (*stringValue)(&c.PublicURL) }},
		{"data_dir", "`directory` for Kith's state, including the embedded PostgreSQL cluster", func(c *Config) flag.Value { return (*stringValue)(&c.DataDir) }},
		{"database_url", "PostgreSQL connection `string`; empty runs the embedded cluster in the data directory", func(c *Config) flag.Value { return (*stringValue)(&c.DatabaseURL) }},
		{"database_max_conns", "the most database connections this process opens (a `number`)", func(c *Config) flag.Value { return (*intValue)(&c.DatabaseMaxConns) }},
		{"debug_listen", "loopback `address` serving Go's profiler at /debug/pprof/; empty means off", func(c *Config) flag.Value { return (*stringValue)(&c.DebugListen) }},
		{"log_format", "log `format`: text or json", func(c *Config) flag.Value { return (*stringValue)(&c.LogFormat) }},
		{"log_level", "log `level`: debug, info, warn or error", func(c *Config) flag.Value { return (*stringValue)(&c.LogLevel) }},
		{"shutdown_timeout", "how long (a `duration`) in-flight requests may run after SIGINT/SIGTERM", func(c *Config) flag.Value { return (*durationValue)(&c.ShutdownTimeout) }},
		{"postgres_user", "system `user` that runs the embedded cluster when Kith runs as root", func(c *Config) flag.Value { return (*stringValue)(&c.PostgresUser) }},
		{"challenges_per_minute", "identity challenges one client IP may ask for a minute (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*intValue)(&c.ChallengesPerMinute) }},
		{"recon.listen", "SKS recon `address`, or off", func(c *Config) flag.Value { return (*stringValue)(&c.Recon.Listen) }},
		{"recon.interval", "mean time between recon gossip rounds (a `duration`)", func(c *Config) flag.Value { return (*durationValue)(&c.Recon.Interval) }},
		{"web.session_lifetime", "how long a login lasts (a `duration`)", func(c *Config) flag.Value { return (*durationValue)(&c.Web.SessionLifetime) }},
		{"web.session_idle", "end sessions unused this long (a `duration`; 0 never)", func(c *Config) flag.Value { return (*durationValue)(&c.Web.SessionIdle) }},
		{"web.secure_cookies", "mark cookies Secure (behind a TLS-terminating proxy; always so when public_url is https)", func(c *Config) flag.Value { return (*boolValue)(&c.Web.SecureCookies) }},
		{"web.cookie_key_file", "`file` with the 32-byte key sealing cookies; empty means one kept in the database for every node", func(c *Config) flag.Value { return (*stringValue)(&c.Web.CookieKeyFile) }},
		{"smtp.address", "mail server `host:port` for verification mails; empty writes them to DATA_DIR/outbox", func(c *Config) flag.Value { return (*stringValue)(&c.SMTP.Address) }},
		{"smtp.from", "sender `address` of verification mails; empty means kith@ the public URL's host", func(c *Config) flag.Value { return (*stringValue)(&c.SMTP.From) }},
		{"smtp.username", "SMTP `user` (PLAIN over TLS); empty sends without authenticating", func(c *Config) flag.Value { return (*stringValue)(&c.SMTP.Username) }},
		{"smtp.password_file", "`file` holding the SMTP password", func(c *Config) flag.Value { return (*stringValue)(&c.SMTP.PasswordFile) }},
		{"smtp.starttls", "require STARTTLS before sending (false only for a server on a trusted path)", func(c *Config) flag.Value { return (*boolValue)(&c.SMTP.StartTLS) }},
		{"wkd.domains", "mail `domains` (comma-separated) whose Web Key Directory Kith serves", func(c *Config) flag.Value { return (*listValue)(&c.WKD.Domains) }},
		{"hosts.names", "host `names` (comma-separated; *.DOMAIN for every name below DOMAIN) whose SSH host keys may be published as host:NAME, signed by the host key", func(c *Config) flag.Value { return (*listValue)(&c.Hosts.Names) }},
		{"hkp.max_answer_bytes", "the most key `bytes` one op=get answers; a broader get is refused with 400", func(c *Config) flag.Value { return (*intValue)(&c.HKP.MaxAnswerBytes) }},
		{"hkp.email_lookup", "HKP email searches answer `all` keys naming the address (as SKS) or only those it is verified for (verified)", func(c *Config) flag.Value { return (*stringValue)(&c.HKP.EmailLookup) }},
		{"log.key_file", "`file` with the 32-byte seed of the Ed25519 key signing log checkpoints; empty means one kept in the database for every node", func(c *Config) flag.Value { return (*stringValue)(&c.Log.KeyFile) }},
		{"ssh_ca.enabled", "issue SSH user certificates for proven SSH keys (POST /api/v1/ssh/certificates, GET /ssh/krl)", func(c *Config) flag.Value { return (*boolValue)(&c.SSHCA.Enabled) }},
		{"ssh_ca.key_file", "`file` with the SSH CA's Ed25519 key (32-byte seed or unencrypted OpenSSH private key); empty means one kept in the database for every node", func(c *Config) flag.Value { return (*stringValue)(&c.SSHCA.KeyFile) }},
		{"ssh_ca.validity", "how long (a `duration`) a certificate is valid unless the request asks for less", func(c *Config) flag.Value { return (*durationValue)(&c.SSHCA.Validity) }},
		{"ssh_ca.max_validity", "the longest validity (a `duration`, at most 168h) a request may ask for", func(c *Config) flag.Value { return (*durationValue)(&c.SSHCA.MaxValidity) }},
		{"ssh_ca.certificates_per_hour", "certificates one identity may get an hour (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*intValue)(&c.SSHCA.CertificatesPerHour) }},
		{"ssh_ca.principals_file", "`file` of extra principals per identity: lines of \"handle principal...\"", func(c *Config) flag.Value { return (*stringValue)(&c.SSHCA.PrincipalsFile) }},
		{"ssh_ca.critical_options", "critical `options` of every certificate (comma-separated: force-command=CMD, source-address=CIDR, verify-required)", func(c *Config) flag.Value { return (*listValue)(&c.SSHCA.CriticalOptions) }},
		{"ssh_ca.extensions", "`extensions` of every certificate (comma-separated; default those ssh-keygen grants)", func(c *Config) flag.Value { return (*listValue)(&c.SSHCA.Extensions) }},
		{"hkp.uploads", "upload `policy`: open, identities (only keys proven for an identity, or a logged-in session's) or off; recon fetches follow it", func(c *Config) flag.Value { return (*stringValue)(&c.HKP.Uploads) }},
	}
}

// auxiliaryEnv reports whether a KITH_* variable is expected although it
// is not a setting (the test suite's database, for one).
func auxiliaryEnv(name string) bool {
	switch name {
	case "KITH_TEST_DATABASE_URL", "KITH_TEST_DATABASE_UNAVAILABLE", idServerEnv:
		return true
	}
	// kith authorized-keys reads its own settings from these.
	return strings.HasPrefix(name, "KITH_AUTHORIZED_KEYS_")
}

// loadConfig builds the configuration for a subcommand from its
// arguments: it registers the settings' flags (plus --config) on fs, parses
// args, and applies file, environment and flags in that order. It returns
// the arguments left after the flags.
func loadConfig(fs *flag.FlagSet, args []string, environ []string) (Config, []string, error) {
	return loadConfigFlags(fs, args, environ, nil)
}

// storeSettingKeys are the settings every command that works on the store
// uses: where the store is, and how to log.
func storeSettingKeys() []string {
	return []string{"data_dir", "database_url", "database_max_conns", "postgres_user", "log_format", "log_level"}
}

// loadToolConfig is loadConfig for a command that uses only some settings:
// it has flags for the store's settings and the extra keys only, so that
// its --help lists only what it uses. The file and the environment may
// still hold every setting (one file serves kith serve and its tools), and
// are checked alike.
func loadToolConfig(fs *flag.FlagSet, args []string, environ []string, extra ...string) (Config, []string, error) {
	keys := map[string]bool{}
	for _, k := range append(storeSettingKeys(), extra...) {
		keys[k] = true
	}
	return loadConfigFlags(fs, args, environ, keys)
}

// loadConfigFlags is loadConfig with flags for the settings in flagged
// only (nil: all).
func loadConfigFlags(fs *flag.FlagSet, args []string, environ []string, flagged map[string]bool) (Config, []string, error) {
	cfg := defaultConfig()
	all := settings()
	var configFile string
	fs.StringVar(&configFile, "config", "", "TOML configuration `file` (env KITH_CONFIG)")
	// Flags parse into a scratch Config; only the ones given are applied,
	// after the file and the environment.
	scratch := defaultConfig()
	for _, s := range all {
		if flagged == nil || flagged[s.key] {
			fs.Var(s.bind(&scratch), s.flagName(), fmt.Sprintf("%s (env %s, file key %s)", s.usage, s.envName(), s.key))
		}
	}
	if err := fs.Parse(args); err != nil {
		return cfg, nil, err
	}
	env := map[string]string{}
	for _, kv := range environ {
		// An empty variable counts as unset, as in most tools.
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" && strings.HasPrefix(k, "KITH_") {
			env[k] = v
		}
	}
	if configFile == "" {
		configFile = env["KITH_CONFIG"]
	}
	if configFile != "" {
		if err := readConfigFile(configFile, &cfg); err != nil {
			return cfg, nil, err
		}
	}
	known := map[string]setting{"KITH_CONFIG": {}}
	// Variables the file names as holding a provider's client secret.
	for _, p := range cfg.OIDC.Providers {
		if p.ClientSecretEnv != "" {
			known[p.ClientSecretEnv] = setting{}
		}
	}
	for _, s := range all {
		known[s.envName()] = s
	}
	var names []string
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s, ok := known[k]
		if !ok {
			if auxiliaryEnv(k) {
				continue
			}
			return cfg, nil, fmt.Errorf("unknown setting in environment: %s", k)
		}
		if s.bind == nil {
			continue
		}
		if err := s.bind(&cfg).Set(env[k]); err != nil {
			return cfg, nil, fmt.Errorf("setting %s (%s): %w", s.key, k, err)
		}
	}
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		for _, s := range all {
			if s.flagName() == f.Name && flagErr == nil {
				if err := s.bind(&cfg).Set(f.Value.String()); err != nil {
					flagErr = fmt.Errorf("setting %s (--%s): %w", s.key, f.Name, err)
				}
			}
		}
	})
	if flagErr != nil {
		return cfg, nil, flagErr
	}
	if err := cfg.validate(); err != nil {
		return cfg, nil, err
	}
	return cfg, fs.Args(), nil
}

// readConfigFile decodes a TOML file into cfg, refusing keys it does not
// know.
func readConfigFile(path string, cfg *Config) error {
	md, err := toml.DecodeFile(path, cfg)
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

// validate checks every setting and names the one that is wrong.
func (c Config) validate() error {
	if err := validateListen(c.Listen); err != nil {
		return fmt.Errorf("setting listen: %w", err)
	}
	if c.DebugListen != "" {
		if err := validateLoopback(c.DebugListen); err != nil {
			return fmt.Errorf("setting debug_listen: %w", err)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("setting public_url: %q is not an http(s) URL", c.PublicURL)
		}
	}
	if c.DataDir == "" {
		return errors.New("setting data_dir: must not be empty")
	}
	if c.DatabaseURL != "" {
		if _, err := pgx.ParseConfig(c.DatabaseURL); err != nil {
			return fmt.Errorf("setting database_url: %v", errors.Unwrap(err))
		}
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("setting log_format: %q is neither text nor json", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("setting log_level: %w", err)
	}
	if c.Recon.Listen != "off" {
		if err := validateListen(c.Recon.Listen); err != nil {
			return fmt.Errorf("setting recon.listen: %w", err)
		}
	}
	if c.Recon.Interval <= 0 {
		return errors.New("setting recon.interval: must be positive")
	}
	if c.DatabaseMaxConns < 1 || c.DatabaseMaxConns > 1000 {
		return errors.New("setting database_max_conns: must be 1 to 1000")
	}
	if c.ChallengesPerMinute == 0 {
		return errors.New("setting challenges_per_minute: must not be 0 (negative means no cap)")
	}
	if c.Web.SessionLifetime <= 0 {
		return errors.New("setting web.session_lifetime: must be positive")
	}
	if err := c.validateMail(); err != nil {
		return err
	}
	if c.HKP.MaxAnswerBytes < 1<<20 {
		return errors.New("setting hkp.max_answer_bytes: must be at least 1048576 (one key may be 1 MiB)")
	}
	if _, err := identity.ParseHostPolicy(c.Hosts.Names); err != nil {
		return fmt.Errorf("setting hosts.names: %w", err)
	}
	if _, err := keys.ParseUploadPolicy(c.HKP.Uploads); err != nil {
		return fmt.Errorf("setting hkp.uploads: %w", err)
	}
	if err := c.SSHCA.validate(); err != nil {
		return err
	}
	for i, p := range c.Recon.Peers {
		if err := validateListen(p.Address); err != nil {
			return fmt.Errorf("setting recon.peer[%d].address: %w", i, err)
		}
		if p.HTTP != "" {
			u, err := url.Parse(p.HTTP)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("setting recon.peer[%d].http: %q is not an http(s) URL", i, p.HTTP)
			}
		}
	}
	return nil
}

// validateListen checks a host:port address with a numeric port.
func validateListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// validateLoopback checks a host:port address whose host is a loopback IP
// or localhost: what only this machine may reach.
func validateLoopback(addr string) error {
	if err := validateListen(addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: host must be a loopback address such as 127.0.0.1", addr)
	}
	return nil
}

type stringValue string

func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }
func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	*v = intValue(n)
	return nil
}

type boolValue bool

func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*v = boolValue(b)
	return nil
}

type listValue StringList

func (v *listValue) String() string { return strings.Join(*v, ",") }
func (v *listValue) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	*v = out
	return nil
}

type durationValue Duration

func (v *durationValue) String() string { return Duration(*v).String() }
func (v *durationValue) Set(s string) error {
	var d Duration
	if err := d.UnmarshalText([]byte(s)); err != nil {
		return err
	}
	*v = durationValue(d)
	return nil
}

// publicURL is the server's URL as clients see it.
// serverName names this server in the statements people sign.
func (c Config) serverName() string { return "Kith <" + c.publicURL() + ">" }

func (c Config) publicURL() string {
	if c.PublicURL != "" {
		return strings.TrimSuffix(c.PublicURL, "/")
	}
	return "http://" + c.Listen
}

// oidcProviders returns the configured providers with their callback URLs
// filled in from public_url where the file leaves them out.
func (c Config) oidcProviders() []oidc.ProviderConfig {
	out := make([]oidc.ProviderConfig, len(c.OIDC.Providers))
	for i, p := range c.OIDC.Providers {
		if p.RedirectURL == "" {
			p.RedirectURL = c.publicURL() + "/login/" + p.Name + "/callback"
		}
		out[i] = p
	}
	return out
}
