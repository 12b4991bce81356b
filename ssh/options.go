// options.go: the certificate options a CA may put in the certificates
// it signs, as an operator lists them.

package ssh

import (
	"fmt"
	"strings"
)

// criticalOptions are the critical options OpenSSH knows; sshd refuses a
// certificate with any other.
var criticalOptions = map[string]bool{"force-command": true, "source-address": true, "verify-required": true}

// ParseCertificateOptions reads a list of "name" and "name=value"
// entries as certificate options: critical options when critical (only
// those OpenSSH knows, each but verify-required with a value), else
// extensions. A name may appear once.
func ParseCertificateOptions(list []string, critical bool) (map[string]string, error) {
	out := map[string]string{}
	for _, o := range list {
		name, value, _ := strings.Cut(o, "=")
		switch {
		case name == "" || strings.ContainsAny(name, " \t\r\n"):
			return nil, fmt.Errorf("%q is not name or name=value", o)
		case critical && !criticalOptions[name]:
			return nil, fmt.Errorf("%q is not a critical option OpenSSH knows (force-command, source-address, verify-required)", name)
		case critical && name != "verify-required" && value == "":
			return nil, fmt.Errorf("%s needs a value (%s=...)", name, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s given twice", name)
		}
		out[name] = value
	}
	return out, nil
}
