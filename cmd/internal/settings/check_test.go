package settings

import (
	"strings"
	"testing"
)

func TestCheckHostPortAndLoopback(t *testing.T) {
	cases := []struct {
		addr        string
		hostPortErr string // "" means accepted
		loopbackErr string
	}{
		{"127.0.0.1:11371", "", ""},
		{"localhost:6060", "", ""},
		{"[::1]:0", "", ""},
		{":6060", "", "loopback"},
		{"192.0.2.1:6060", "", "loopback"},
		{"example.org:80", "", "loopback"},
		{"127.0.0.1", "is not host:port", "is not host:port"},
		{"127.0.0.1:70000", "not a number from 0 to 65535", "not a number from 0 to 65535"},
		{"127.0.0.1:http", "not a number from 0 to 65535", "not a number from 0 to 65535"},
	}
	for _, tc := range cases {
		for _, c := range []struct {
			name  string
			check func(string) error
			want  string
		}{{"CheckHostPort", CheckHostPort, tc.hostPortErr}, {"CheckLoopback", CheckLoopback, tc.loopbackErr}} {
			err := c.check(tc.addr)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s(%q) = %v, want nil", c.name, tc.addr, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s(%q) = %v, want an error containing %q", c.name, tc.addr, err, c.want)
			}
		}
	}
}
