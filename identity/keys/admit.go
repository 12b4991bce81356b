// admit.go: what one HTTP upload request may cost. An upload is the one
// request whose cost the sender chooses (every key's signatures are
// checked), so the Service admits a bounded number at once, each with a
// verification budget its keys share; a frontend asks before it reads
// the body, and answers 503 with Retry-After when no slot is free.

package keys

import (
	"context"
	"runtime"
	"sync"

	"github.com/kith-keyserver/kith/pgp"
)

// DefaultMaxConcurrentUploads is the default cap on upload requests in
// progress at once: two per core. An upload costs at most its budget of
// verification work (pgp.DefaultMaxUploadVerifyWork, some 0.2 s of one
// core) plus reading and storing, so two per core keep every core busy
// with uploads that wait on the database while bounding the CPU that
// senders of bombs can hold: lookups keep the rest.
func DefaultMaxConcurrentUploads() int { return 2 * runtime.GOMAXPROCS(0) }

// UploadRetryAfterSeconds is what a refused upload request is told to
// wait, in seconds (the Retry-After header of its 503): uploads take well
// under a second, so a slot is free again by then unless the server is
// under a flood.
const UploadRetryAfterSeconds = 5

// Admission is one admitted HTTP upload request: a slot of the Service's
// (Options.MaxConcurrentUploads) and the verification budget the keys of
// the request share (pgp.DefaultMaxUploadVerifyWork), given to Upload in
// UploadOptions. Done gives the slot back.
type Admission struct {
	budget  *pgp.VerifyBudget
	release func()
	once    sync.Once
}

// Admit admits one HTTP upload request, before its body is read: it
// returns the request's Admission, which the frontend passes with each
// of the request's keys to Upload and ends with Done; or false when
// Options.MaxConcurrentUploads requests are in progress, and the
// frontend then answers 503 with a Retry-After of UploadRetryAfterSeconds,
// without reading the body.
func (s *Service) Admit() (*Admission, bool) {
	select {
	case s.slots <- struct{}{}:
	default:
		return nil, false
	}
	return &Admission{
		budget:  pgp.NewVerifyBudget(pgp.DefaultMaxUploadVerifyWork),
		release: func() { <-s.slots },
	}, true
}

// UploadsInProgress returns how many upload requests are admitted and
// not done.
func (s *Service) UploadsInProgress() int { return len(s.slots) }

// Done ends the request, giving its slot back. Later calls do nothing.
func (a *Admission) Done() { a.once.Do(a.release) }

// budgetKey is the context key of a request's verification budget.
type budgetKey struct{}

// WithVerifyBudget returns ctx carrying b, the verification budget of the
// request a write belongs to, for the store's merge with the stored key:
// the merge checks signatures again and pays from the same budget as the
// key policy did (Upload puts an Admission's budget there).
func WithVerifyBudget(ctx context.Context, b *pgp.VerifyBudget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// VerifyBudgetOf returns the verification budget ctx carries, nil when
// none (a write that is no request's: recon, the tools).
func VerifyBudgetOf(ctx context.Context) *pgp.VerifyBudget {
	b, _ := ctx.Value(budgetKey{}).(*pgp.VerifyBudget)
	return b
}
