// email.go: mailed-link tokens, as identity/postgres keeps them.

package inprocess

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/kith-keyserver/kith/identity"
)

// emailTokens are the issued mailed links, by token hash. They have a
// lock of their own: tokens are saved outside transactions, and a
// transaction consumes them under the store's lock.
type emailTokens struct {
	mu     sync.Mutex
	tokens map[string]*emailToken
	// sent are the mails counted against their recipients, by token
	// hash: they outlive their tokens (a deleted key's links go, the
	// mails it had sent still count).
	sent map[string]sentMail
}

// sentMail is one mail as the per-recipient cap counts it.
type sentMail struct {
	recipient string // identity.HashRecipient
	at        time.Time
}

type emailToken struct {
	t    identity.EmailToken
	used bool
}

// SaveEmailToken stores an issued link and counts its mail, unless one
// for the same action, key and address was issued after limits.Since or
// its recipient had the most mails (see identity.Store).
func (s *Store) SaveEmailToken(ctx context.Context, t *identity.EmailToken, limits identity.EmailLimits) error {
	s.mail.mu.Lock()
	defer s.mail.mu.Unlock()
	if s.mail.tokens == nil {
		s.mail.tokens, s.mail.sent = map[string]*emailToken{}, map[string]sentMail{}
	}
	for k, old := range s.mail.tokens {
		if old.t.Expires.Before(t.Created.Add(-24 * time.Hour)) {
			delete(s.mail.tokens, k)
			continue
		}
		if old.t.Action == t.Action && old.t.Key.Same(t.Key) && old.t.Email.Same(t.Email) && old.t.Created.After(limits.Since) {
			return identity.ErrRateLimited
		}
	}
	n := 0
	for k, m := range s.mail.sent {
		switch {
		case !m.at.After(limits.RecipientSince):
			delete(s.mail.sent, k) // past the window: it no longer counts
		case m.recipient == string(t.Recipient):
			n++
		}
	}
	if limits.PerRecipient > 0 && n >= limits.PerRecipient {
		return identity.ErrRecipientCapped
	}
	c := *t
	c.Hash, c.Recipient = bytes.Clone(t.Hash), bytes.Clone(t.Recipient)
	c.Created, c.Expires = identity.TruncateTime(t.Created), identity.TruncateTime(t.Expires)
	s.mail.tokens[string(t.Hash)] = &emailToken{t: c}
	s.mail.sent[string(t.Hash)] = sentMail{recipient: string(t.Recipient), at: c.Created}
	return nil
}

// PendingEmails returns which of emails have an unused, unexpired verify
// link for key.
func (s *Store) PendingEmails(ctx context.Context, key identity.Factor, emails []string, now time.Time) ([]string, error) {
	s.mail.mu.Lock()
	defer s.mail.mu.Unlock()
	var out []string
	for _, e := range emails {
		for _, et := range s.mail.tokens {
			if et.t.Action == identity.EmailVerify && !et.used && et.t.Key.Same(key) && et.t.Email.Value == e && !now.After(et.t.Expires) {
				out = append(out, e)
				break
			}
		}
	}
	return out, nil
}

// DeleteEmailToken forgets the link with the token hash and its mail.
func (s *Store) DeleteEmailToken(ctx context.Context, hash []byte) error {
	s.mail.mu.Lock()
	defer s.mail.mu.Unlock()
	delete(s.mail.tokens, string(hash))
	delete(s.mail.sent, string(hash))
	return nil
}

// EmailToken returns a mailed link without using it (see identity.Store).
func (s *Store) EmailToken(ctx context.Context, hash []byte, now time.Time) (*identity.EmailToken, error) {
	s.mail.mu.Lock()
	defer s.mail.mu.Unlock()
	et := s.mail.tokens[string(hash)]
	switch {
	case et == nil:
		return nil, identity.ErrNotFound
	case et.used:
		return nil, identity.ErrNonceUsed
	case now.After(et.t.Expires):
		return nil, identity.ErrChallengeExpired
	}
	out := et.t
	out.Hash = bytes.Clone(et.t.Hash)
	return &out, nil
}

// ConsumeEmailToken marks the link used when the transaction commits (see
// identity.Tx).
func (t *tx) ConsumeEmailToken(ctx context.Context, hash []byte, now time.Time) (*identity.EmailToken, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	t.s.mail.mu.Lock()
	defer t.s.mail.mu.Unlock()
	k := string(hash)
	et := t.s.mail.tokens[k]
	if et == nil {
		return nil, identity.ErrNotFound
	}
	if et.used || t.usedMail[k] {
		return nil, identity.ErrNonceUsed
	}
	if now.After(et.t.Expires) {
		return nil, identity.ErrChallengeExpired
	}
	if t.usedMail == nil {
		t.usedMail = map[string]bool{}
	}
	t.usedMail[k] = true
	out := et.t
	out.Hash = bytes.Clone(et.t.Hash)
	return &out, nil
}

// commitMail marks the links the transaction used.
func (t *tx) commitMail() {
	t.s.mail.mu.Lock()
	defer t.s.mail.mu.Unlock()
	for k := range t.usedMail {
		if et := t.s.mail.tokens[k]; et != nil {
			et.used = true
		}
	}
}

// forget drops the mail links for the key (and, when email is not
// empty, only those for that address).
func (m *emailTokens) forget(key identity.Factor, email string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, tok := range m.tokens {
		if tok.t.Key.Same(key) && (email == "" || tok.t.Email.Value == email) {
			delete(m.tokens, k)
		}
	}
}
