package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity/keys"
)

func TestConfigPrecedenceFlagEnvFileDefault(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kith.toml")
	os.WriteFile(file, []byte("listen = \"127.0.0.1:1001\"\ndata_dir = \"/from/file\"\nlog_format = \"json\"\n"), 0o600)
	env := []string{"KITH_LISTEN=127.0.0.1:1002", "KITH_DATA_DIR=/from/env", "PATH=/bin"}
	args := []string{"--config", file, "--listen", "127.0.0.1:1003"}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, rest, err := loadConfig(fs, args, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 0 {
		t.Errorf("rest = %q", rest)
	}
	want := map[string][2]string{
		"listen (flag beats env)":         {cfg.Listen, "127.0.0.1:1003"},
		"data_dir (env beats file)":       {cfg.DataDir, "/from/env"},
		"log_format (file beats default)": {cfg.LogFormat, "json"},
		"log_level (default)":             {cfg.LogLevel, "info"},
	}
	for name, got := range want {
		if got[0] != got[1] {
			t.Errorf("%s: got %q, want %q", name, got[0], got[1])
		}
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kith.toml")
	os.WriteFile(file, []byte("shutdown_timeout = \"5s\"\n"), 0o600)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, _, err := loadConfig(fs, nil, []string{"KITH_CONFIG=" + file})
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.ShutdownTimeout) != 5*time.Second {
		t.Errorf("shutdown_timeout = %v, want 5s", cfg.ShutdownTimeout)
	}
}

func TestConfigRefusesBadValues(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     []string
		file    string
		wantErr string
	}{
		{"unknown file key", nil, nil, "colour = 1\n", "unknown setting colour"},
		{"unknown nested key", nil, nil, "[sky]\ncolour = 1\n", "unknown setting sky"},
		{"bad duration in file", nil, nil, "shutdown_timeout = \"soon\"\n", "shutdown_timeout"},
		{"negative duration", []string{"--shutdown-timeout", "-1s"}, nil, "", "negative"},
		{"port out of range", []string{"--listen", ":70000"}, nil, "", "setting listen"},
		{"bad env value", nil, []string{"KITH_LOG_LEVEL=chatty"}, "", "setting log_level"},
		{"unknown env", nil, []string{"KITH_NOPE=1"}, "", "KITH_NOPE"},
		{"wrong type in file", nil, nil, "listen = 5\n", "kith.toml"},
		{"bad host name", []string{"--hosts-names", "git.example.org,*.Example.org"}, nil, "", "setting hosts.names"},
		{"host address", nil, []string{"KITH_HOSTS_NAMES=10.0.0.1"}, "", "setting hosts.names"},
		{"bare wildcard host", nil, nil, "[hosts]\nnames = [\"*\"]\n", "setting hosts.names"},
		{"profiler on every interface", []string{"--debug-listen", ":6060"}, nil, "", "setting debug_listen"},
		{"profiler on a public address", nil, []string{"KITH_DEBUG_LISTEN=192.0.2.1:6060"}, "", "setting debug_listen"},
		{"contact of two lines", nil, []string{"KITH_CONTACT=ops@example.org\nX-Header: 1"}, "", "setting contact"},
		{"overlong node name", []string{"--nodename", strings.Repeat("n", 300)}, nil, "", "setting nodename"},
		{"no uploads at once", []string{"--hkp-max-concurrent-uploads", "0"}, nil, "", "setting hkp.max_concurrent_uploads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				file := filepath.Join(t.TempDir(), "kith.toml")
				os.WriteFile(file, []byte(c.file), 0o600)
				args = append([]string{"--config", file}, args...)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, _, err := loadConfig(fs, args, c.env)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
}

func TestConfigBoolSettingFromFlagEnvAndFile(t *testing.T) {
	for _, c := range []struct {
		args, env []string
		want      bool
	}{
		{nil, nil, false},
		{[]string{"--web-secure-cookies"}, nil, true},
		{[]string{"--web-secure-cookies=false"}, []string{"KITH_WEB_SECURE_COOKIES=true"}, false},
		{nil, []string{"KITH_WEB_SECURE_COOKIES=true"}, true},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cfg, _, err := loadConfig(fs, c.args, c.env)
		if err != nil || cfg.Web.SecureCookies != c.want {
			t.Errorf("args %q env %q: secure_cookies = %v, %v; want %v", c.args, c.env, cfg.Web.SecureCookies, err, c.want)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	if _, _, err := loadConfig(fs, nil, []string{"KITH_WEB_SECURE_COOKIES=maybe"}); err == nil {
		t.Error("KITH_WEB_SECURE_COOKIES=maybe was accepted")
	}
}

// TestHostsNamesSetting: hosts.names from the file, the environment and a
// flag decides which host names may be published.
func TestHostsNamesSetting(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kith.toml")
	os.WriteFile(file, []byte("[hosts]\nnames = [\"git.example.org\", \"*.lab.example.org\"]\n"), 0o600)
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want map[string]bool
	}{
		{"default", nil, nil, map[string]bool{"git.example.org": false}},
		{"file", []string{"--config", file}, nil, map[string]bool{"git.example.org": true, "a.lab.example.org": true, "lab.example.org": false, "github.com": false}},
		{"env", nil, []string{"KITH_HOSTS_NAMES=github.com"}, map[string]bool{"github.com": true, "git.example.org": false}},
		{"flag over env", []string{"--hosts-names", "*.example.org"}, []string{"KITH_HOSTS_NAMES=github.com"}, map[string]bool{"github.com": false, "git.example.org": true}},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, _, err := loadConfig(fs, c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for name, want := range c.want {
			if got := cfg.hostPolicy().Allows(name); got != want {
				t.Errorf("%s: %s allowed = %v, want %v", c.name, name, got, want)
			}
		}
	}
}

// TestConfigStatsNames: contact and nodename come from the environment
// or flags; op=stats' host name is public_url's host, or the node name
// when public_url has none.
func TestConfigStatsNames(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, _, err := loadConfig(fs, []string{"--nodename", "node-b", "--public-url", "https://keys.example.org:8443/"},
		[]string{"KITH_CONTACT=0x0123456789ABCDEF", "KITH_NODENAME=node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Contact != "0x0123456789ABCDEF" || cfg.nodename() != "node-b" || cfg.statsHostname() != "keys.example.org" {
		t.Errorf("contact %q, nodename %q, hostname %q", cfg.Contact, cfg.nodename(), cfg.statsHostname())
	}
	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	cfg, _, err = loadConfig(fs, []string{"--listen", ":11371"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if cfg.nodename() != host || cfg.statsHostname() != host {
		t.Errorf("defaults: nodename %q, hostname %q, want the machine's %q", cfg.nodename(), cfg.statsHostname(), host)
	}
}

func TestMaxConcurrentUploadsSetting(t *testing.T) {
	for _, c := range []struct {
		args, env []string
		file      string
		want      int
	}{
		{nil, nil, "", keys.DefaultMaxConcurrentUploads()},
		{[]string{"--hkp-max-concurrent-uploads", "7"}, nil, "", 7},
		{nil, []string{"KITH_HKP_MAX_CONCURRENT_UPLOADS=3"}, "", 3},
		{nil, nil, "[hkp]\nmax_concurrent_uploads = 9\n", 9},
	} {
		args := c.args
		if c.file != "" {
			file := filepath.Join(t.TempDir(), "kith.toml")
			os.WriteFile(file, []byte(c.file), 0o600)
			args = append([]string{"--config", file}, args...)
		}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, _, err := loadConfig(fs, args, c.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HKP.MaxConcurrentUploads != c.want {
			t.Errorf("%v %v %q: %d, want %d", c.args, c.env, c.file, cfg.HKP.MaxConcurrentUploads, c.want)
		}
	}
}
