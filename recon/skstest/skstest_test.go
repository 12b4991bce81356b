package skstest

import (
	"strings"
	"testing"
)

func TestStartServesStats(t *testing.T) {
	s := Start(t, Options{})
	code, body, err := s.Get("/pks/lookup?op=stats")
	if err != nil || code != 200 || !strings.Contains(string(body), "Total number of keys") {
		t.Fatalf("stats: %d %v\n%s", code, err, body)
	}
}
