package identity

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePrincipals(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want map[Handle][]string
		err  string
	}{
		{"", map[Handle][]string{}, ""},
		{"# handle principals\n\nalice root deploy\nbob bob\nalice git\n", map[Handle][]string{"alice": {"root", "deploy", "git"}, "bob": {"bob"}}, ""},
		{"alice\n", nil, "line 1: alice names no principal"},
		{"# c\nAlice root\n", nil, "line 2: "},
		{"alice root,deploy\n", nil, "separate principals by spaces"},
	} {
		got, err := ParsePrincipals(strings.NewReader(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want an error with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
