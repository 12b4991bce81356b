// admit.go: what one HTTP upload request may cost. An upload is the one
// request whose cost the sender chooses (every key's signatures are
// checked), so the Service admits a bounded number at once, each with a
// verification budget its keys share; a frontend asks once it has read
// the request's size-capped body (a client sending its body slowly holds
// no slot), a request finding every slot taken waits a moment in a short
// line, and past that the frontend answers 503 with Retry-After.

package keys

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/pgp"
)

// DefaultMaxConcurrentUploads is the default cap on upload requests in
// progress at once: four per core. An upload costs at most its budget of
// verification work (pgp.DefaultMaxUploadVerifyWork, some 0.2 s of one
// core) plus storing, and a genuine one spends most of its time waiting
// for the commit of the group transaction that stores it (holding no
// CPU): four per core let eight uploaders on two cores each have one in
// flight, which two per core did not (half of them were refused), while
// still bounding the CPU that senders of bombs can hold.
func DefaultMaxConcurrentUploads() int { return 4 * runtime.GOMAXPROCS(0) }

// UploadAdmitWait is the longest a request waits for an upload slot when
// every slot is taken (and at most as many requests as there are slots
// wait): a burst of uploads is served in turn rather than refused, and a
// flood is refused at once.
const UploadAdmitWait = time.Second

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

// Admit admits one HTTP upload request, once the frontend has read its
// size-capped body: it returns the request's Admission, which the
// frontend passes with each of the request's keys to Upload and ends with
// Done. When Options.MaxConcurrentUploads requests are in progress it
// waits for one to be done, for at most UploadAdmitWait and while ctx
// lasts, unless as many requests wait already; it returns false when no
// slot came, and the frontend then answers 503 with a Retry-After of
// UploadRetryAfterSeconds.
func (s *Service) Admit(ctx context.Context) (*Admission, bool) {
	select {
	case s.slots <- struct{}{}:
		return s.admission(), true
	default:
	}
	if int(s.waiting.Add(1)) > cap(s.slots) {
		s.waiting.Add(-1)
		return nil, false
	}
	defer s.waiting.Add(-1)
	t := time.NewTimer(UploadAdmitWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return s.admission(), true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// admission is the Admission of a request that has taken a slot.
func (s *Service) admission() *Admission {
	return &Admission{
		budget:  pgp.NewVerifyBudget(pgp.DefaultMaxUploadVerifyWork),
		release: func() { <-s.slots },
	}
}

// UploadsInProgress returns how many upload requests are admitted and
// not done.
func (s *Service) UploadsInProgress() int { return len(s.slots) }

// UploadsWaiting returns how many upload requests wait for a slot
// (Admit).
func (s *Service) UploadsWaiting() int { return int(s.waiting.Load()) }

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
