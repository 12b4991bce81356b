package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kith-keyserver/kith/identity/testkit"
)

// readmeBlock returns the one fenced block of README.md in language lang
// that holds every one of marks.
func readmeBlock(t *testing.T, lang string, marks ...string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range regexp.MustCompile("(?ms)^```"+lang+"\n(.*?)^```$").FindAllStringSubmatch(string(readme), -1) {
		all := true
		for _, mark := range marks {
			all = all && strings.Contains(m[1], mark)
		}
		if all {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d ```%s blocks holding %q, want 1", len(found), lang, marks)
	}
	return found[0]
}

// TestREADMESystemdUnit: the README's systemd unit is what systemd
// accepts without a word (systemd-analyze verify; any warning, such as an
// unknown or misspelt setting, fails), runs the binary where the README
// installs it as the user it makes, with the hardening and restart policy
// it describes, and keeps the data directory of the README's settings in
// its state directory, the one place it may write.
func TestREADMESystemdUnit(t *testing.T) {
	analyze := testkit.Tool(t, "systemd-analyze")
	unit := readmeBlock(t, "ini", "[Service]", "ExecStart=/usr/local/bin/kith serve")
	for _, line := range []string{
		"User=kith", "ExecStart=/usr/local/bin/kith serve --config /etc/kith/kith.toml",
		"Restart=on-failure", "StateDirectory=kith",
		"ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes",
	} {
		if !regexp.MustCompile("(?m)^" + regexp.QuoteMeta(line) + "$").MatchString(unit) {
			t.Errorf("the unit lacks %s", line)
		}
	}
	settings := readmeBlock(t, "sh", "cat > /etc/kith/kith.toml")
	if !strings.Contains(settings, `data_dir = "/var/lib/kith/kith-data"`) {
		t.Errorf("the README's settings keep the data outside the unit's StateDirectory (/var/lib/kith):\n%s", settings)
	}

	verify := func(unit string) string {
		t.Helper()
		file := filepath.Join(t.TempDir(), "kith.service")
		// The binary the tests built stands where the README installs it.
		unit = strings.ReplaceAll(unit, "/usr/local/bin/kith", kithBinary(t))
		if err := os.WriteFile(file, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", file).CombinedOutput()
		if err != nil {
			return err.Error() + ": " + string(out)
		}
		return string(out)
	}
	if out := verify(unit); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
	// A misspelt setting is only a warning to systemd: the check must see it.
	if out := verify(strings.Replace(unit, "ProtectSystem=strict", "ProtectSystem=strcit", 1)); !strings.Contains(out, "strcit") {
		t.Errorf("systemd-analyze verify said nothing of a misspelt setting: %q", out)
	}
}

// TestREADMESettingsFileLoads: the kith.toml the README writes holds only
// settings kith knows, each in its section, so the service starts with it
// and the commands run with --config reach its store.
func TestREADMESettingsFileLoads(t *testing.T) {
	block := readmeBlock(t, "sh", "cat > /etc/kith/kith.toml")
	m := regexp.MustCompile(`(?s)cat > /etc/kith/kith.toml <<'EOF'\n(.*?)\nEOF\n`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("no here-document for kith.toml in:\n%s", block)
	}
	file := filepath.Join(t.TempDir(), "kith.toml")
	if err := os.WriteFile(file, []byte(m[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	// The data directory moved to an empty one: the file loads, and the
	// command stops only because there is no store there.
	_, errOut, err := kithCmd("log-key", "--config", file, "--data-dir", filepath.Join(t.TempDir(), "kith-data"))
	if err == nil || !strings.Contains(err.Error(), "no Kith store") {
		t.Fatalf("kith log-key --config with the README's file: %v %s", err, errOut)
	}
	cfg, _, err := loadConfig(newFlagSet(&environment{stdout: os.Stdout, stderr: os.Stderr}, "serve", "serve"), []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsListen == "" || cfg.DataDir != "/var/lib/kith/kith-data" {
		t.Errorf("the README's file gives metrics_listen %q, data_dir %q", cfg.MetricsListen, cfg.DataDir)
	}
}
