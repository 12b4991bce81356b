// json.go: the JSON forms of log records and factors, shared by the server
// and `kith verify-log`; they live in identity/logjson, where the other
// frontends that serve records (proof bundles) find them too.

package api

import (
	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/logjson"
)

// LogPage is the answer of GET /api/v1/log.
type LogPage = logjson.LogPage

// LogRecord is one evidence record with every byte needed to re-verify it.
type LogRecord = logjson.LogRecord

// JSONCommitment is a commitment to a private artifact; Hash is hex.
type JSONCommitment = logjson.JSONCommitment

// JSONFactor is a factor in JSON.
type JSONFactor = logjson.JSONFactor

// NewLogRecord returns the JSON form of e.
func NewLogRecord(e *identity.Evidence) (LogRecord, error) { return logjson.NewLogRecord(e) }
