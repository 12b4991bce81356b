package identity

import (
	"errors"
	"strings"
	"testing"
)

func TestParseHandleAcceptsOnlyHandleSyntax(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"alice", nil},
		{"a1", nil},
		{"bob-smith", nil},
		{"x-" + strings.Repeat("y", 36), nil},
		{strings.Repeat("z", 40), ErrBadHandle},
		{"a", ErrBadHandle},
		{"", ErrBadHandle},
		{"-alice", ErrBadHandle},
		{"alice-", ErrBadHandle},
		{"Alice", ErrBadHandle},
		{"al_ice", ErrBadHandle},
		{"al.ice", ErrBadHandle},
		{"élise", ErrBadHandle},
		{"admin", ErrReservedHandle},
		{"api", ErrReservedHandle},
		{"root", ErrReservedHandle},
		{"www", ErrReservedHandle},
		{"users", ErrReservedHandle},
		{"pks", ErrReservedHandle},
		{"kith", ErrReservedHandle},
	}
	for _, tt := range tests {
		_, err := ParseHandle(tt.in)
		if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
			t.Errorf("ParseHandle(%q) = %v, want %v", tt.in, err, tt.want)
		}
	}
}
