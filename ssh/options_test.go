package ssh

import (
	"maps"
	"strings"
	"testing"
)

func TestParseCertificateOptions(t *testing.T) {
	for _, tt := range []struct {
		list     []string
		critical bool
		want     map[string]string
		err      string
	}{
		{nil, true, map[string]string{}, ""},
		{[]string{"permit-pty", "permit-port-forwarding"}, false, map[string]string{"permit-pty": "", "permit-port-forwarding": ""}, ""},
		{[]string{"force-command=/bin/true", "verify-required"}, true, map[string]string{"force-command": "/bin/true", "verify-required": ""}, ""},
		{[]string{"source-address=10.0.0.0/8,192.0.2.1"}, true, map[string]string{"source-address": "10.0.0.0/8,192.0.2.1"}, ""},
		{[]string{"permit-pty"}, true, nil, "not a critical option OpenSSH knows"},
		{[]string{"force-command"}, true, nil, "needs a value"},
		{[]string{"=x"}, false, nil, "not name or name=value"},
		{[]string{"permit pty"}, false, nil, "not name or name=value"},
		{[]string{"permit-pty", "permit-pty"}, false, nil, "given twice"},
	} {
		got, err := ParseCertificateOptions(tt.list, tt.critical)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q (critical %v): %v, want an error with %q", tt.list, tt.critical, err, tt.err)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("%q (critical %v) = %v, %v; want %v", tt.list, tt.critical, got, err, tt.want)
		}
	}
}
