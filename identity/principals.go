// principals.go: the principals file, which gives identities the SSH
// principals (local account names) their certificates carry beyond their
// handle.

package identity

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParsePrincipals reads a principals file: "handle principal..." lines,
// principals separated by spaces, # comments and blank lines ignored. A
// handle on several lines gets the principals of all of them.
func ParsePrincipals(r io.Reader) (map[Handle][]string, error) {
	out := map[Handle][]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		h, err := ParseHandle(f[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("line %d: %s names no principal", n, h)
		}
		for _, p := range f[1:] {
			if strings.Contains(p, ",") {
				return nil, fmt.Errorf("line %d: principal %q: separate principals by spaces", n, p)
			}
		}
		out[h] = append(out[h], f[1:]...)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
