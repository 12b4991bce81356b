package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/acme/autocert"

	"github.com/kith-keyserver/kith/cmd/internal/clientaddr"
	"github.com/kith-keyserver/kith/cmd/internal/settings"
	"github.com/kith-keyserver/kith/hkp"
	"github.com/kith-keyserver/kith/hkp/vks"
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/keys"
	"github.com/kith-keyserver/kith/identity/ratelimit"
	"github.com/kith-keyserver/kith/oidc"
)

// Config is every setting of the kith binary. Scalar settings come, in
// rising precedence, from the defaults, the TOML file (--config), KITH_*
// environment variables and flags; tables such as [[recon.peer]] come from
// the file only.
type Config struct {
	Listen string `toml:"listen"`
	// PublicURL is how clients reach this server; it names the server in
	// the statements people sign to prove their keys, and its host is the
	// host name op=stats shows.
	PublicURL string `toml:"public_url"`
	// Contact is how to reach the operator, shown by op=stats: an OpenPGP
	// key's fingerprint or ID (as SKS's server_contact), or an address.
	Contact string `toml:"contact"`
	// Nodename names this node in op=stats (several nodes may serve one
	// host name); empty means the machine's host name.
	Nodename    string `toml:"nodename"`
	DataDir     string `toml:"data_dir"`
	DatabaseURL string `toml:"database_url"`
	// DebugListen is a loopback address serving Go's profiler
	// (/debug/pprof/); empty means none.
	DebugListen string `toml:"debug_listen"`
	// MetricsListen is an address serving /metrics alone; empty means
	// /metrics on the public listener.
	MetricsListen string `toml:"metrics_listen"`
	// DatabaseMaxConns caps each process's pool of database connections.
	DatabaseMaxConns int    `toml:"database_max_conns"`
	LogFormat        string `toml:"log_format"`
	LogLevel         string `toml:"log_level"`
	// ShutdownTimeout bounds how long in-flight requests may take to
	// finish after SIGINT or SIGTERM.
	ShutdownTimeout settings.Duration `toml:"shutdown_timeout"`
	// PostgresUser runs the embedded cluster when Kith runs as root.
	PostgresUser string `toml:"postgres_user"`
	// ChallengesPerMinute caps how many identity challenges one client
	// (identity/ratelimit's) may ask for a minute; negative means no cap.
	ChallengesPerMinute int `toml:"challenges_per_minute"`
	// MailRequestsPerMinute caps how many VKS requests for verification
	// (or withdrawal) mails one client may make a minute (and, counted
	// apart, the pages' mail buttons and HKP v2 sendtoken); negative means
	// no cap.
	MailRequestsPerMinute int `toml:"mail_requests_per_minute"`
	// UploadsPerMinute caps how many key uploads (POST /pks/add, VKS
	// uploads and the upload page together) one client may make a
	// minute; negative means no cap.
	UploadsPerMinute int `toml:"uploads_per_minute"`
	// EmailLookupsPerMinute caps how many lookups by email (HKP searches
	// for an address, VKS by-email, WKD, the pages' searches for an
	// address, together) one client may make a minute; negative means no
	// cap.
	EmailLookupsPerMinute int `toml:"email_lookups_per_minute"`
	// TrustedProxies are the networks (CIDRs, or single addresses) of the
	// proxies in front of Kith: from a peer inside one, the client is the
	// right-most address of X-Forwarded-For (or Forwarded) that is not
	// itself trusted. Empty: the headers are ignored, the peer is the
	// client.
	TrustedProxies settings.StringList `toml:"trusted_proxies"`
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
	// Log is the [log] section: the transparency log's signing key and
	// the witnesses it asks to cosign.
	Log TransparencyLogConfig `toml:"log"`
	// Witness is the [witness] section: this server as a witness of
	// other logs.
	Witness WitnessConfig `toml:"witness"`
	// Hosts is the [hosts] section: the host names whose SSH host keys
	// may be published (host:NAME identities).
	Hosts HostsConfig `toml:"hosts"`
	// SSHCA is the [ssh_ca] section: the SSH user certificate authority.
	SSHCA SSHCAConfig `toml:"ssh_ca"`
	// TLS is the [tls] section: HTTPS served by Kith itself.
	TLS TLSConfig `toml:"tls"`
}

// TLSConfig is the [tls] section. With Listen set, Kith serves everything
// over HTTPS there too, and its plain listeners send browsers to https
// while HKP keeps answering over plain HTTP.
type TLSConfig struct {
	// Listen is the HTTPS address; empty means no TLS of Kith's own.
	Listen string `toml:"listen"`
	// CertFile and KeyFile hold the PEM certificate chain and its key,
	// read again when they change.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// ACMENames are the host names to get certificates for from the ACME
	// CA at ACMEDirectory, instead of the files: the server's name and the
	// WKD host names (openpgpkey.DOMAIN, DOMAIN).
	ACMENames     settings.StringList `toml:"acme_names"`
	ACMEDirectory string              `toml:"acme_directory"`
	// HTTPListen is a plain HTTP address beside Listen (port 80, where an
	// ACME CA asks http-01 challenges and browsers arrive); empty: none.
	HTTPListen string `toml:"http_listen"`
}

// enabled reports whether Kith serves HTTPS itself.
func (t TLSConfig) enabled() bool { return t.Listen != "" }

// HostsConfig is the [hosts] section.
type HostsConfig struct {
	// Names are the host names that may be claimed as host identities:
	// exact names ("git.example.org") and "*.DOMAIN" for every name
	// below DOMAIN. Empty: none (no host keys are published).
	Names settings.StringList `toml:"names"`
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
	Validity    settings.Duration `toml:"validity"`
	MaxValidity settings.Duration `toml:"max_validity"`
	// CertificatesPerHour caps how many certificates one identity gets
	// in an hour; negative means no cap.
	CertificatesPerHour int `toml:"certificates_per_hour"`
	// PrincipalsFile lists extra principals per identity: lines of
	// "handle principal...", # comments.
	PrincipalsFile string `toml:"principals_file"`
	// ClaimPrincipals grant principals from the claims of the device
	// login approving a certificate: entries "principal=claim:value"
	// (e.g. "ops=groups:admins").
	ClaimPrincipals []string `toml:"claim_principals"`
	// CriticalOptions ("force-command=CMD", "source-address=CIDR,...",
	// "verify-required") and Extensions ("permit-pty", ...) go into every
	// certificate.
	CriticalOptions settings.StringList `toml:"critical_options"`
	Extensions      settings.StringList `toml:"extensions"`
}

// TransparencyLogConfig is the [log] section.
type TransparencyLogConfig struct {
	// KeyFile holds the 32-byte seed of the Ed25519 key that signs the
	// log's checkpoints. Empty means a key kept in the database, created
	// on first start and shared by every node.
	KeyFile string `toml:"key_file"`
	// WitnessPolicy names a C2SP tlog-policy file whose witness lines
	// carry URLs (their submission prefix): each new checkpoint is
	// submitted to them and published with the cosignatures that arrive
	// within a bound. Empty means no witnesses.
	WitnessPolicy string `toml:"witness_policy"`
}

// WitnessConfig is the [witness] section: this server as a C2SP
// tlog-witness at PUBLIC_URL/witness.
type WitnessConfig struct {
	// Enabled serves the witness API.
	Enabled bool `toml:"enabled"`
	// Policy names a C2SP tlog-policy file whose log lines are the logs
	// this server cosigns.
	Policy string `toml:"policy"`
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
	// MailsPerAddressPerHour caps the verification mails one address
	// receives in an hour, across keys, clients and every node sharing
	// the database (identity.ServiceOptions.MailsPerAddress); negative
	// means no cap.
	MailsPerAddressPerHour int `toml:"mails_per_address_per_hour"`
}

// WKDConfig is the [wkd] section.
type WKDConfig struct {
	// Domains are the mail domains whose Web Key Directory Kith serves.
	Domains settings.StringList `toml:"domains"`
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
	// MaxAnswerBytes caps the keys' bytes one op=get or /pks/hashquery
	// answer may carry: a broader get is refused with 400 before any key
	// is read; a hashquery answers the keys that fit.
	MaxAnswerBytes int `toml:"max_answer_bytes"`
	// MaxConcurrentUploads caps the upload requests (POST /pks/add, VKS
	// and web uploads) in progress at once, admitted once their body is
	// read; beyond it they wait up to keys.UploadAdmitWait for a slot,
	// then are answered 503 with Retry-After.
	MaxConcurrentUploads int `toml:"max_concurrent_uploads"`
	// PrefixLogMinKeys is the fewest stored keys each prefix of the
	// prefix log (/pks/v2/prefixlog/DATE) names on average; it sets the
	// prefix length from the store's size (keys.PrefixDigits).
	PrefixLogMinKeys int `toml:"prefixlog_min_keys"`
}

// WebConfig is the [web] section.
type WebConfig struct {
	// SessionLifetime is how long a login lasts.
	SessionLifetime settings.Duration `toml:"session_lifetime"`
	// SessionIdle ends a session unused this long; zero never does.
	SessionIdle settings.Duration `toml:"session_idle"`
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
	Interval settings.Duration `toml:"interval"`
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

// The default per-client limits (identity/ratelimit: a minute's requests
// at once, then one every 60/N seconds), the README's configuration table
// says why.
const (
	// defaultUploadsPerMinute: a person uploads a handful of keys; an
	// office behind one address, or a script sending a team's keys, stays
	// well under it; one address can no longer keep the policy checks
	// busy with thousands of keys a minute.
	defaultUploadsPerMinute = 60
	// defaultEmailLookupsPerMinute: a mail client looks up each
	// recipient once (WKD, then HKP); an office behind one address stays
	// under it, while harvesting which addresses have keys goes at one a
	// second per address.
	defaultEmailLookupsPerMinute = 60
)

// defaultMaxConns is the default database pool: four connections per
// core. On 2 cores, 8 served as many cold lookups as 16 with a lower
// tail (p99 9.0 ms against 11.6 ms at 32 clients) and more uploads
// beside them: more backends than that only take turns on the cores.
func defaultMaxConns() int { return 4 * runtime.NumCPU() }

// defaultConfig returns the settings that apply when nothing says otherwise.
func defaultConfig() Config {
	return Config{
		Listen:                "127.0.0.1:11371",
		DataDir:               "./kith-data",
		LogFormat:             "text",
		LogLevel:              "info",
		ShutdownTimeout:       settings.Duration(30 * time.Second),
		PostgresUser:          "postgres",
		DatabaseMaxConns:      defaultMaxConns(),
		ChallengesPerMinute:   30,
		MailRequestsPerMinute: vks.DefaultRequestsPerMinute,
		UploadsPerMinute:      defaultUploadsPerMinute,
		EmailLookupsPerMinute: defaultEmailLookupsPerMinute,
		Recon: ReconConfig{
			Listen:   "127.0.0.1:11370",
			Interval: settings.Duration(60 * time.Second),
		},
		Web:  WebConfig{SessionLifetime: settings.Duration(30 * 24 * time.Hour)},
		SMTP: SMTPConfig{StartTLS: true, MailsPerAddressPerHour: identity.DefaultMailsPerAddress},
		TLS:  TLSConfig{ACMEDirectory: autocert.DefaultACMEDirectory},
		HKP: HKPConfig{EmailLookup: "all", Uploads: string(keys.UploadsOpen), MaxAnswerBytes: hkp.DefaultMaxAnswerSize,
			MaxConcurrentUploads: keys.DefaultMaxConcurrentUploads(), PrefixLogMinKeys: keys.DefaultPrefixKeys},
		SSHCA: SSHCAConfig{
			Validity:            settings.Duration(identity.DefaultCertificateValidity),
			MaxValidity:         settings.Duration(identity.DefaultMaxCertificateValidity),
			CertificatesPerHour: identity.DefaultCertificatesPerHour,
			// What ssh-keygen -s grants unless told otherwise.
			Extensions: settings.StringList{"permit-X11-forwarding", "permit-agent-forwarding", "permit-port-forwarding", "permit-pty", "permit-user-rc"},
		},
	}
}

// setting is one row of the table: TOML key, flag usage, and the field
// it sets. It is settings.Setting, named here so that the table's rows
// stay one line each.
type setting settings.Setting[Config]

// kithSettings lists the scalar settings of the server and the tools that
// share its store.
func kithSettings() []settings.Setting[Config] {
	rows := []setting{
		{"listen", "HTTP `address` for HKP, the web pages and the API", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Listen) }},
		{"public_url", "`URL` clients reach this server at, named in the statements people sign; empty means http://LISTEN", func(c *Config) flag.Value { return (*settings.StringValue)(&c.PublicURL) }},
		{"contact", "how to reach the operator, shown by op=stats: an OpenPGP key's `fingerprint` or ID, or an address", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Contact) }},
		{"nodename", "this node's `name` in op=stats; empty means the machine's host name", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Nodename) }},
		{"data_dir", "`directory` for Kith's state, including the embedded PostgreSQL cluster", func(c *Config) flag.Value { return (*settings.StringValue)(&c.DataDir) }},
		{"database_url", "PostgreSQL connection `string`; empty runs the embedded cluster in the data directory", func(c *Config) flag.Value { return (*settings.StringValue)(&c.DatabaseURL) }},
		{"database_max_conns", "the most database connections this process opens (a `number`)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.DatabaseMaxConns) }},
		{"debug_listen", "loopback `address` serving Go's profiler at /debug/pprof/; empty means off", func(c *Config) flag.Value { return (*settings.StringValue)(&c.DebugListen) }},
		{"metrics_listen", "`address` serving /metrics alone (then the public listener answers it 404); empty means /metrics on listen", func(c *Config) flag.Value { return (*settings.StringValue)(&c.MetricsListen) }},
		{"log_format", "log `format`: text or json", func(c *Config) flag.Value { return (*settings.StringValue)(&c.LogFormat) }},
		{"log_level", "log `level`: debug, info, warn or error", func(c *Config) flag.Value { return (*settings.StringValue)(&c.LogLevel) }},
		{"shutdown_timeout", "how long (a `duration`) in-flight requests may run after SIGINT/SIGTERM", func(c *Config) flag.Value { return (*settings.DurationValue)(&c.ShutdownTimeout) }},
		{"postgres_user", "system `user` that runs the embedded cluster when Kith runs as root", func(c *Config) flag.Value { return (*settings.StringValue)(&c.PostgresUser) }},
		{"trusted_proxies", "`networks` (CIDRs, comma-separated) of the proxies whose X-Forwarded-For or Forwarded names the client; empty: those headers are ignored", func(c *Config) flag.Value { return (*settings.ListValue)(&c.TrustedProxies) }},
		{"challenges_per_minute", "identity challenges one client (IPv4 address, IPv6 /64) may ask for a minute (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.ChallengesPerMinute) }},
		{"mail_requests_per_minute", "VKS requests for verification or withdrawal mails one client may make a minute, and apart the pages' and HKP v2 sendtoken's (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.MailRequestsPerMinute) }},
		{"uploads_per_minute", "key uploads (POST /pks/add, VKS, the upload page) one client may make a minute (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.UploadsPerMinute) }},
		{"email_lookups_per_minute", "lookups by email (HKP, VKS, WKD, the pages' search) one client may make a minute (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.EmailLookupsPerMinute) }},
		{"recon.listen", "SKS recon `address`, or off", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Recon.Listen) }},
		{"recon.interval", "mean time between recon gossip rounds (a `duration`)", func(c *Config) flag.Value { return (*settings.DurationValue)(&c.Recon.Interval) }},
		{"web.session_lifetime", "how long a login lasts (a `duration`)", func(c *Config) flag.Value { return (*settings.DurationValue)(&c.Web.SessionLifetime) }},
		{"web.session_idle", "end sessions unused this long (a `duration`; 0 never)", func(c *Config) flag.Value { return (*settings.DurationValue)(&c.Web.SessionIdle) }},
		{"web.secure_cookies", "mark cookies Secure (behind a TLS-terminating proxy; always so when public_url is https)", func(c *Config) flag.Value { return (*settings.BoolValue)(&c.Web.SecureCookies) }},
		{"web.cookie_key_file", "`file` with the 32-byte key sealing cookies; empty means one kept in the database for every node", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Web.CookieKeyFile) }},
		{"smtp.address", "mail server `host:port` for verification mails; empty writes them to DATA_DIR/outbox", func(c *Config) flag.Value { return (*settings.StringValue)(&c.SMTP.Address) }},
		{"smtp.from", "sender `address` of verification mails; empty means kith@ the public URL's host", func(c *Config) flag.Value { return (*settings.StringValue)(&c.SMTP.From) }},
		{"smtp.username", "SMTP `user` (PLAIN over TLS); empty sends without authenticating", func(c *Config) flag.Value { return (*settings.StringValue)(&c.SMTP.Username) }},
		{"smtp.password_file", "`file` holding the SMTP password", func(c *Config) flag.Value { return (*settings.StringValue)(&c.SMTP.PasswordFile) }},
		{"smtp.starttls", "require STARTTLS before sending (false only for a server on a trusted path)", func(c *Config) flag.Value { return (*settings.BoolValue)(&c.SMTP.StartTLS) }},
		{"smtp.mails_per_address_per_hour", "verification mails one address may receive an hour, whatever the keys and clients asking, shared by every node (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.SMTP.MailsPerAddressPerHour) }},
		{"wkd.domains", "mail `domains` (comma-separated) whose Web Key Directory Kith serves", func(c *Config) flag.Value { return (*settings.ListValue)(&c.WKD.Domains) }},
		{"hosts.names", "host `names` (comma-separated; *.DOMAIN for every name below DOMAIN) whose SSH host keys may be published as host:NAME, signed by the host key", func(c *Config) flag.Value { return (*settings.ListValue)(&c.Hosts.Names) }},
		{"hkp.max_answer_bytes", "the most key `bytes` one op=get or /pks/hashquery answers; a broader get is refused with 400, a hashquery answers the keys that fit", func(c *Config) flag.Value { return (*settings.IntValue)(&c.HKP.MaxAnswerBytes) }},
		{"hkp.prefixlog_min_keys", "the fewest stored keys each prefix of the prefix log (/pks/v2/prefixlog/DATE) names on average (a `number`): prefixes lengthen as the store grows", func(c *Config) flag.Value { return (*settings.IntValue)(&c.HKP.PrefixLogMinKeys) }},
		{"hkp.email_lookup", "HKP email searches answer `all` keys naming the address (as SKS) or only those it is verified for (verified)", func(c *Config) flag.Value { return (*settings.StringValue)(&c.HKP.EmailLookup) }},
		{"log.key_file", "`file` with the 32-byte seed of the Ed25519 key signing log checkpoints; empty means one kept in the database for every node", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Log.KeyFile) }},
		{"log.witness_policy", "C2SP tlog-policy `file` whose witness lines (with their URLs) are asked to cosign each checkpoint; empty means none", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Log.WitnessPolicy) }},
		{"witness.enabled", "act as a C2SP tlog-witness at PUBLIC_URL/witness for the logs of witness.policy", func(c *Config) flag.Value { return (*settings.BoolValue)(&c.Witness.Enabled) }},
		{"witness.policy", "C2SP tlog-policy `file` whose log lines are the logs this server cosigns as a witness", func(c *Config) flag.Value { return (*settings.StringValue)(&c.Witness.Policy) }},
		{"ssh_ca.enabled", "issue SSH user certificates for proven SSH keys (POST /api/v1/ssh/certificates, GET /ssh/krl)", func(c *Config) flag.Value { return (*settings.BoolValue)(&c.SSHCA.Enabled) }},
		{"ssh_ca.key_file", "`file` with the SSH CA's Ed25519 key (32-byte seed or unencrypted OpenSSH private key); empty means one kept in the database for every node", func(c *Config) flag.Value { return (*settings.StringValue)(&c.SSHCA.KeyFile) }},
		{"ssh_ca.validity", "how long (a `duration`) a certificate is valid unless the request asks for less", func(c *Config) flag.Value { return (*settings.DurationValue)(&c.SSHCA.Validity) }},
		{"ssh_ca.max_validity", "the longest validity (a `duration`, at most 168h) a request may ask for", func(c *Config) flag.Value { return (*settings.DurationValue)(&c.SSHCA.MaxValidity) }},
		{"ssh_ca.certificates_per_hour", "certificates one identity may get an hour (a `number`; negative: no cap)", func(c *Config) flag.Value { return (*settings.IntValue)(&c.SSHCA.CertificatesPerHour) }},
		{"ssh_ca.principals_file", "`file` of extra principals per identity: lines of \"handle principal...\"", func(c *Config) flag.Value { return (*settings.StringValue)(&c.SSHCA.PrincipalsFile) }},
		{"ssh_ca.claim_principals", "principals granted by a claim of the device login approving a certificate (comma-separated `principal=claim:value`, e.g. ops=groups:admins)", func(c *Config) flag.Value { return (*settings.ListValue)(&c.SSHCA.ClaimPrincipals) }},
		{"ssh_ca.critical_options", "critical `options` of every certificate (comma-separated: force-command=CMD, source-address=CIDR, verify-required)", func(c *Config) flag.Value { return (*settings.ListValue)(&c.SSHCA.CriticalOptions) }},
		{"ssh_ca.extensions", "`extensions` of every certificate (comma-separated; default those ssh-keygen grants)", func(c *Config) flag.Value { return (*settings.ListValue)(&c.SSHCA.Extensions) }},
		{"tls.listen", "HTTPS `address` (e.g. :443) serving all that listen serves; plain listeners then send browsers to https, HKP stays plain; empty means none", func(c *Config) flag.Value { return (*settings.StringValue)(&c.TLS.Listen) }},
		{"tls.cert_file", "`file` with the PEM certificate chain for tls.listen, read again when it changes", func(c *Config) flag.Value { return (*settings.StringValue)(&c.TLS.CertFile) }},
		{"tls.key_file", "`file` with the PEM private key of tls.cert_file", func(c *Config) flag.Value { return (*settings.StringValue)(&c.TLS.KeyFile) }},
		{"tls.acme_names", "host `names` (comma-separated, e.g. keys.example.org,openpgpkey.example.org) to get certificates for by ACME instead of files; kept in the database for every node", func(c *Config) flag.Value { return (*settings.ListValue)(&c.TLS.ACMENames) }},
		{"tls.acme_directory", "ACME directory `URL` of the CA for tls.acme_names (default Let's Encrypt's)", func(c *Config) flag.Value { return (*settings.StringValue)(&c.TLS.ACMEDirectory) }},
		{"tls.http_listen", "plain HTTP `address` beside listen (e.g. :80) for ACME http-01 challenges and browsers; empty means none", func(c *Config) flag.Value { return (*settings.StringValue)(&c.TLS.HTTPListen) }},
		{"hkp.uploads", "upload `policy`: open, identities (only keys proven for an identity, or a logged-in session's) or off; recon fetches follow it", func(c *Config) flag.Value { return (*settings.StringValue)(&c.HKP.Uploads) }},
		{"hkp.max_concurrent_uploads", "upload requests (POST /pks/add, VKS, web) in progress at once (a `number`); beyond it 503 with Retry-After", func(c *Config) flag.Value { return (*settings.IntValue)(&c.HKP.MaxConcurrentUploads) }},
	}
	out := make([]settings.Setting[Config], len(rows))
	for i, r := range rows {
		out[i] = settings.Setting[Config](r)
	}
	return out
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
	return settingTable().Load(fs, args, environ, flagged)
}

// settingTable is how the kith binary loads its settings.
func settingTable() settings.Table[Config] {
	return settings.Table[Config]{
		EnvPrefix: "KITH_",
		FileEnv:   "KITH_CONFIG",
		Settings:  kithSettings(),
		Defaults:  defaultConfig,
		Expected: func(cfg *Config, name string) bool {
			// Variables the file names as holding a provider's client
			// secret.
			for _, p := range cfg.OIDC.Providers {
				if p.ClientSecretEnv == name {
					return true
				}
			}
			return auxiliaryEnv(name)
		},
		Validate: Config.validate,
	}
}

// validate checks every setting and names the one that is wrong.
func (c Config) validate() error {
	if err := settings.CheckHostPort(c.Listen); err != nil {
		return fmt.Errorf("setting listen: %w", err)
	}
	if c.DebugListen != "" {
		if err := settings.CheckLoopback(c.DebugListen); err != nil {
			return fmt.Errorf("setting debug_listen: %w", err)
		}
	}
	if c.MetricsListen != "" {
		if err := settings.CheckHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("setting metrics_listen: %w", err)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("setting public_url: %q is not an http(s) URL", c.PublicURL)
		}
	}
	for _, v := range []struct{ name, value string }{{"contact", c.Contact}, {"nodename", c.Nodename}} {
		if strings.IndexFunc(v.value, unicode.IsControl) >= 0 || len(v.value) > 256 {
			return fmt.Errorf("setting %s: must be one line of at most 256 bytes", v.name)
		}
	}
	if c.DataDir == "" {
		return errors.New("setting data_dir: must not be empty")
	}
	if c.Witness.Enabled && c.Witness.Policy == "" {
		return errors.New("setting witness.policy: witness.enabled needs a policy naming the logs to cosign")
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
		if err := settings.CheckHostPort(c.Recon.Listen); err != nil {
			return fmt.Errorf("setting recon.listen: %w", err)
		}
	}
	if c.Recon.Interval <= 0 {
		return errors.New("setting recon.interval: must be positive")
	}
	if c.DatabaseMaxConns < 1 || c.DatabaseMaxConns > 1000 {
		return errors.New("setting database_max_conns: must be 1 to 1000")
	}
	for _, l := range []struct {
		key string
		v   int
	}{{"challenges_per_minute", c.ChallengesPerMinute}, {"mail_requests_per_minute", c.MailRequestsPerMinute},
		{"uploads_per_minute", c.UploadsPerMinute}, {"email_lookups_per_minute", c.EmailLookupsPerMinute}} {
		if l.v == 0 {
			return fmt.Errorf("setting %s: must not be 0 (negative means no cap)", l.key)
		}
	}
	if _, err := clientaddr.ParsePrefixes(c.TrustedProxies); err != nil {
		return fmt.Errorf("setting trusted_proxies: %w", err)
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
	if c.HKP.PrefixLogMinKeys < 1 {
		return errors.New("setting hkp.prefixlog_min_keys: must be at least 1")
	}
	if _, err := identity.ParseHostPolicy(c.Hosts.Names); err != nil {
		return fmt.Errorf("setting hosts.names: %w", err)
	}
	if _, err := keys.ParseUploadPolicy(c.HKP.Uploads); err != nil {
		return fmt.Errorf("setting hkp.uploads: %w", err)
	}
	if c.HKP.MaxConcurrentUploads < 1 {
		return errors.New("setting hkp.max_concurrent_uploads: must be at least 1")
	}
	if err := c.SSHCA.validate(); err != nil {
		return err
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	if c.TLS.enabled() && c.PublicURL == "" && len(c.TLS.ACMENames) == 0 {
		// publicURL would be tls.listen's address, which names no
		// host a client can reach when it is a wildcard.
		if host, _, _ := net.SplitHostPort(c.TLS.Listen); host == "" || net.ParseIP(host).IsUnspecified() {
			return fmt.Errorf("setting public_url: needed when tls.listen (%q) names no host and tls.acme_names is empty: it is the https URL that statements people sign and login callbacks name", c.TLS.Listen)
		}
	}
	for i, p := range c.Recon.Peers {
		if err := settings.CheckHostPort(p.Address); err != nil {
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

// clientLimits are the per-client budgets that several routes share: a
// client's uploads count alike through HKP, VKS and the pages, its
// lookups by email through HKP, VKS, WKD and the pages.
type clientLimits struct {
	uploads, emailLookups *ratelimit.Limiter
}

// newClientLimits makes the shared budgets of uploads_per_minute and
// email_lookups_per_minute (validate has checked them).
func (c Config) newClientLimits() clientLimits {
	return clientLimits{uploads: ratelimit.New(c.UploadsPerMinute, nil), emailLookups: ratelimit.New(c.EmailLookupsPerMinute, nil)}
}

// proxies is the resolver of clients behind trusted_proxies (validate
// has checked it).
func (c Config) proxies() clientaddr.Resolver {
	p, _ := clientaddr.ParsePrefixes(c.TrustedProxies)
	return clientaddr.Resolver{Trusted: p}
}

// publicURL is the server's URL as clients see it.
// serverName names this server in the statements people sign.
func (c Config) serverName() string { return "Kith <" + c.publicURL() + ">" }

func (c Config) publicURL() string {
	if c.PublicURL != "" {
		return strings.TrimSuffix(c.PublicURL, "/")
	}
	if c.TLS.enabled() {
		host, port, _ := net.SplitHostPort(c.TLS.Listen)
		if len(c.TLS.ACMENames) > 0 {
			host = c.TLS.ACMENames[0]
		}
		if port == "443" {
			return "https://" + host
		}
		return "https://" + net.JoinHostPort(host, port)
	}
	return "http://" + c.Listen
}

// statsHostname is the host name op=stats shows: public_url's host, or
// the node's name when that has none.
func (c Config) statsHostname() string {
	if u, err := url.Parse(c.publicURL()); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return c.nodename()
}

// nodename is this node's name in op=stats: the nodename setting, or the
// machine's host name.
func (c Config) nodename() string {
	if c.Nodename != "" {
		return c.Nodename
	}
	name, _ := os.Hostname()
	return name
}

// httpsPort is the port the plain listeners send browsers to: public_url's
// when it is https (a proxy or NAT may map it), else tls.listen's.
func (c Config) httpsPort() string {
	if u, err := url.Parse(c.PublicURL); err == nil && u.Scheme == "https" {
		if p := u.Port(); p != "" {
			return p
		}
		return "443"
	}
	_, port, _ := net.SplitHostPort(c.TLS.Listen)
	return port
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
