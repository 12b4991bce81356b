// email.go: email addresses proven by mail. The holder of an uploaded key
// asks for one of its user IDs' addresses to be verified; the Service
// stores a single-use, expiring token (hashed) and hands it to a sender,
// which mails a link to the address; following the link appends an
// email.verified record for the key and the address. A withdrawal works
// the same way and appends an email.verified record with purpose revoke.
//
// The record is the server's attestation that the mailbox answered: no
// one but the server signs it, and what a third party can re-check
// offline is that the key carried a self-signed user ID with the address
// and that the record says what its statement says.

package identity

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// MethodEmailVerified: a mail link sent to the address To, for the
// OpenPGP key From (which carried a self-signed user ID with To), was
// followed. With Purpose PurposeRevoke the address was withdrawn from the
// key the same way. Statement: the email statement (EmailStatementTitle);
// SignerKey: the key as stored when the link was followed; no signature.
const MethodEmailVerified Method = "email.verified"

// EmailAction is what a mailed link does when followed.
type EmailAction string

// The actions of mailed links.
const (
	// EmailVerify proves that the address's mailbox holder agrees to the
	// address being served for the key.
	EmailVerify EmailAction = "verify"
	// EmailWithdraw stops the address being served for the key.
	EmailWithdraw EmailAction = "withdraw"
	// EmailManage opens the key's manage page for the holder of an
	// address the key carries: until it expires, it lists the key's
	// addresses and withdraws any of them (WithdrawWithManageLink).
	EmailManage EmailAction = "manage"
)

// The limits of mailed links.
const (
	// EmailTokenTTL is how long a mailed link works: a day, time enough
	// to read the mail, short enough that an old mailbox's links are dead.
	EmailTokenTTL = 24 * time.Hour
	// EmailWindow is how long after a mail for an address, key and action
	// no other is sent: a flood of requests sends one mail.
	EmailWindow = 15 * time.Minute
	// EmailTokenSize is the number of random bytes in a token (256 bits).
	EmailTokenSize = 32
	// RecipientWindow is the span over which the mails to one address
	// are counted (ServiceOptions.MailsPerAddress).
	RecipientWindow = time.Hour
	// DefaultMailsPerAddress is how many mailed links one address
	// receives in RecipientWindow unless the operator says otherwise:
	// room to ask again for a lost mail and to verify a second key, and
	// no more than a nuisance for a mailbox someone else names in fresh
	// keys.
	DefaultMailsPerAddress = 3
)

// Refusal codes of the mail path.
const (
	CodeUnknownToken     Code = "unknown_token"      // no such link
	CodeTokenUsed        Code = "token_used"         // the link was followed before
	CodeTokenExpired     Code = "token_expired"      // the link expired
	CodeWrongToken       Code = "wrong_token"        // the link is for another key or address
	CodeRateLimited      Code = "rate_limited"       // a mail went out within EmailWindow
	CodeAddressNotInKey  Code = "address_not_in_key" // no valid self-signed user ID has it
	CodeMailUnavailable  Code = "mail_unavailable"   // the mail server refused or is down
	CodeNotVerified      Code = "not_verified"       // nothing to withdraw
	CodeTooManyAddresses Code = "too_many_addresses" // more addresses than a request may name
	CodeRecipientCapped  Code = "recipient_capped"   // the address had the most mails an hour
)

// ErrRateLimited is returned by a store that refuses a token because
// another for the same address, key and action is younger than the
// window.
var ErrRateLimited = errors.New("rate limited")

// ErrRecipientCapped is returned by a store that refuses a token because
// its address has had EmailLimits.PerRecipient mails since
// EmailLimits.RecipientSince.
var ErrRecipientCapped = errors.New("recipient had the most mails")

// EmailToken is an issued mail link as the store keeps it: only the hash
// of the token, never the token.
type EmailToken struct {
	// Hash is the SHA-256 of the token.
	Hash   []byte
	Action EmailAction
	// Key is the OpenPGP key factor; Email the address.
	Key     Factor
	Email   Factor
	Created time.Time
	Expires time.Time
	// Recipient is the address's hash (HashRecipient), under which the
	// store counts the mails the address received.
	Recipient []byte
}

// HashEmailToken returns the hash a token is stored under.
func HashEmailToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// HashRecipient returns the hash the mails to an address are counted
// under: SHA-256 of "kith mail recipient", a NUL and the address as
// EmailFactor normalises it, so that every spelling of one address
// shares one count, and the count keeps no address.
func HashRecipient(email Factor) []byte {
	h := sha256.New()
	h.Write([]byte("kith mail recipient\x00"))
	h.Write([]byte(EmailFactor(email.Value).Value))
	return h.Sum(nil)
}

// EmailLimits are what a store checks when it saves a mailed link, in one
// step with the save, so that nodes sharing the store cannot both pass.
type EmailLimits struct {
	// Since: a link for the same action, key and address issued after
	// it refuses the new one (ErrRateLimited).
	Since time.Time
	// PerRecipient: when the token's Recipient had this many mails after
	// RecipientSince, the link is refused (ErrRecipientCapped); zero or
	// negative means no cap. The store counts every saved link as a
	// mail, forgets it again with its token (DeleteEmailToken), and may
	// forget the mails before RecipientSince.
	PerRecipient   int
	RecipientSince time.Time
}

// EmailSender sends the mail carrying token to the address; the Service
// calls it after storing the token, and forgets the token if it fails.
type EmailSender func(ctx context.Context, token string) error

// EmailStatementTitle starts every email statement.
const EmailStatementTitle = "Kith email verification"

// EmailStatement is the text an email.verified record keeps: which server
// attests what for which key and address, and when.
func EmailStatement(server string, action EmailAction, key, email Factor, requested, recorded time.Time) []byte {
	var b strings.Builder
	b.WriteString(EmailStatementTitle + "\n\n")
	fmt.Fprintf(&b, "server: %s\n", server)
	fmt.Fprintf(&b, "action: %s\n", action)
	fmt.Fprintf(&b, "key: %s\n", key.Value)
	fmt.Fprintf(&b, "email: %s\n", email.Value)
	fmt.Fprintf(&b, "requested: %s\n", requested.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "recorded: %s\n", recorded.UTC().Format(time.RFC3339))
	return []byte(b.String())
}

// ParseEmailStatement reads the "name: value" lines of an email
// statement.
func ParseEmailStatement(b []byte) (map[string]string, error) {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) < 3 || lines[0] != EmailStatementTitle || lines[1] != "" {
		return nil, fmt.Errorf("%w: not an email statement", ErrBadStatement)
	}
	fields := map[string]string{}
	for _, l := range lines[2:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%w: email statement line %q is not \"name: value\"", ErrBadStatement, clip(l))
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("%w: email statement gives %s twice", ErrBadStatement, k)
		}
		fields[k] = v
	}
	return fields, nil
}

// EmailRequest asks for a mailed link.
type EmailRequest struct {
	Action EmailAction
	// Key is the OpenPGP key factor.
	Key Factor
	// Email is the address, which the key must carry in a valid
	// self-signed user ID (to verify or manage) or have verified (to
	// withdraw).
	Email Factor
	// Send mails the link with the token.
	Send EmailSender
}

// RequestEmail issues a mailed link for req and has req.Send mail it. It
// refuses (CodeRateLimited) when a link for the same action, key and
// address went out less than EmailWindow ago, so a flood sends one mail,
// and (CodeRecipientCapped) when the address had the most mails this
// server sends one address in RecipientWindow, whatever the keys,
// actions and clients that asked, so that keys naming someone else's
// address cannot flood their mailbox; when sending fails it forgets the
// token and refuses with CodeMailUnavailable, having recorded nothing.
func (s *Service) RequestEmail(ctx context.Context, req EmailRequest) error {
	if req.Action != EmailVerify && req.Action != EmailWithdraw && req.Action != EmailManage {
		return Refuse(CodeBadRequest, "unknown email action %q", clip(string(req.Action)))
	}
	if req.Key.Kind != KindPGP || req.Key.Validate() != nil {
		return Refuse(CodeBadFactor, "not an OpenPGP key fingerprint: %q", clip(req.Key.Value))
	}
	if req.Email.Kind != KindEmail || req.Email.Validate() != nil {
		return Refuse(CodeBadFactor, "not an email address: %q", clip(req.Email.Value))
	}
	switch req.Action {
	case EmailVerify, EmailManage:
		if err := s.checkKeyCarries(ctx, req.Key, req.Email, s.clock()); err != nil {
			return err
		}
	case EmailWithdraw:
		ok, err := s.emailVerified(ctx, req.Key, req.Email)
		if err != nil {
			return wrapOp("request email", err)
		}
		if !ok {
			return Refuse(CodeNotVerified, "%s is not verified for key %s", req.Email.Value, req.Key.Value)
		}
	}
	raw := make([]byte, EmailTokenSize)
	if _, err := io.ReadFull(s.rand, raw); err != nil {
		return fmt.Errorf("identity: request email: token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	now := TruncateTime(s.now())
	t := &EmailToken{Hash: HashEmailToken(token), Action: req.Action, Key: req.Key, Email: req.Email,
		Created: now, Expires: now.Add(EmailTokenTTL), Recipient: HashRecipient(req.Email)}
	err := s.store.SaveEmailToken(ctx, t, EmailLimits{Since: now.Add(-EmailWindow),
		PerRecipient: s.mailsPerAddress, RecipientSince: now.Add(-RecipientWindow)})
	switch {
	case errors.Is(err, ErrRateLimited):
		return Refuse(CodeRateLimited, "a mail for %s went out less than %s ago: follow its link, or ask again later", req.Email.Value, EmailWindow)
	case errors.Is(err, ErrRecipientCapped):
		// Nothing about who asked, for which keys, or how often.
		return Refuse(CodeRecipientCapped, "this address has had the most mails this server sends an hour: ask again later")
	case err != nil:
		return fmt.Errorf("identity: request email: %w", err)
	}
	if err := req.Send(ctx, token); err != nil {
		if derr := s.store.DeleteEmailToken(context.WithoutCancel(ctx), t.Hash); derr != nil {
			err = errors.Join(err, derr)
		}
		// The address stays out of the message: frontends log it, and
		// name the address to the asker themselves.
		return RefuseErr(CodeMailUnavailable, err, "the mail could not be sent; nothing was recorded: try again later")
	}
	return nil
}

// PendingEmails returns which of the addresses have a verify link out
// for the key (mailed, not yet followed, not expired).
func (s *Service) PendingEmails(ctx context.Context, key Factor, emails []string) ([]string, error) {
	out, err := s.store.PendingEmails(ctx, key, emails, s.now())
	if err != nil {
		return nil, fmt.Errorf("identity: pending emails of %s: %w", key.Value, err)
	}
	return out, nil
}

// checkKeyCarries refuses unless the stored key carries a valid
// self-signed user ID with the address.
func (s *Service) checkKeyCarries(ctx context.Context, key, email Factor, now time.Time) error {
	links, _, err := s.keyLinks(ctx, key, now)
	if err != nil {
		return err
	}
	return carries(links, key, email)
}

// carries refuses unless links hold key's valid self-signed user ID with
// email.
func carries(links []KeyLink, key, email Factor) error {
	for _, l := range links {
		if l.Method == MethodPGPUIDSelfSig && l.To.Same(email) {
			return nil
		}
	}
	return Refuse(CodeAddressNotInKey, "key %s has no valid self-signed user ID with %s", key.Value, email.Value)
}

// emailVerified reports whether the latest email.verified record of key
// for email verifies it (rather than withdraws it).
func (s *Service) emailVerified(ctx context.Context, key, email Factor) (bool, error) {
	recs, err := s.store.KeyRecords(ctx, key)
	if err != nil {
		return false, err
	}
	return EmailVerifiedIn(recs, key, email), nil
}

// EmailVerifiedIn reports whether, in recs, the last email.verified
// record of key for email verifies it rather than withdraws it.
func EmailVerifiedIn(recs []Evidence, key, email Factor) bool {
	verified, last := false, int64(0)
	for _, e := range recs {
		if e.Method == MethodEmailVerified && e.Handle == "" && e.From.Same(key) && e.To.Same(email) && e.Seq > last {
			verified, last = e.Purpose == "", e.Seq
		}
	}
	return verified
}

// EmailConfirmation says what following a link recorded.
type EmailConfirmation struct {
	Action EmailAction
	Key    Factor
	Email  Factor
	// Seq is the record appended.
	Seq int64
}

// EmailLink says what the mailed link with token does, for the page it
// opens, without following it: the refusals are ConfirmEmail's (an
// unknown, used, expired link, or one for another key), and Seq is zero.
func (s *Service) EmailLink(ctx context.Context, key Factor, token string) (EmailConfirmation, error) {
	t, err := s.emailLink(ctx, key, token)
	if err != nil {
		return EmailConfirmation{}, err
	}
	return EmailConfirmation{Action: t.Action, Key: t.Key, Email: t.Email}, nil
}

// emailLink reads the mailed link with token for key without using it
// up, with EmailLink's refusals.
func (s *Service) emailLink(ctx context.Context, key Factor, token string) (*EmailToken, error) {
	if token == "" || len(token) > 100 {
		return nil, Refuse(CodeUnknownToken, "no such link")
	}
	t, err := s.store.EmailToken(ctx, HashEmailToken(token), s.now())
	if err := tokenRefusal(err); err != nil {
		return nil, wrapOp("email link", err)
	}
	if !t.Key.Same(key) {
		return nil, Refuse(CodeWrongToken, "this link is not for key %s", clip(key.Value))
	}
	return t, nil
}

// tokenRefusal turns a store's answer about a token into the refusal
// people read (nil for nil).
func tokenRefusal(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return Refuse(CodeUnknownToken, "no such link: it may be mistyped, or the mail was not from this server")
	case errors.Is(err, ErrNonceUsed):
		return Refuse(CodeTokenUsed, "this link was followed before")
	case errors.Is(err, ErrChallengeExpired):
		return Refuse(CodeTokenExpired, "this link expired: ask for a new mail")
	}
	return err
}

// ConfirmEmail follows a mailed link: the token must be one this server
// issued for key, unused and unexpired. Following a verify link appends
// an email.verified record (if the key still carries the address);
// following a withdraw link appends its withdrawal. A manage link is
// refused (CodeWrongToken): it opens the manage page (ManageLink) and
// works until it expires. The token is used up in the same transaction;
// a refusal uses up nothing.
func (s *Service) ConfirmEmail(ctx context.Context, key Factor, token string) (EmailConfirmation, error) {
	var out EmailConfirmation
	if token == "" || len(token) > 100 {
		return out, Refuse(CodeUnknownToken, "no such link")
	}
	// One reading of the clock, and one of the key: what the record
	// checks the key carries is what it records, at the time it states.
	now := s.clock()
	var linkKey []byte
	var links []KeyLink
	var linksErr error
	if key.Kind == KindPGP && key.Validate() == nil {
		links, linkKey, linksErr = s.keyLinks(ctx, key, now)
		if linksErr != nil && CodeOf(linksErr) == "" {
			return out, wrapOp("confirm email", linksErr)
		}
	}
	err := s.update(ctx, func(ctx context.Context, tx Tx) error {
		t, err := tx.ConsumeEmailToken(ctx, HashEmailToken(token), now)
		if err := tokenRefusal(err); err != nil {
			return err
		}
		if !t.Key.Same(key) {
			return Refuse(CodeWrongToken, "this link is not for key %s", clip(key.Value))
		}
		out = EmailConfirmation{Action: t.Action, Key: t.Key, Email: t.Email}
		recs, err := tx.KeyRecords(ctx, t.Key)
		if err != nil {
			return err
		}
		verified := EmailVerifiedIn(recs, t.Key, t.Email)
		e := &Evidence{Method: MethodEmailVerified, From: t.Key, To: t.Email, SignerKey: linkKey, Created: now,
			Statement: EmailStatement(s.server, t.Action, t.Key, t.Email, t.Created, now)}
		switch t.Action {
		case EmailVerify:
			if linksErr != nil {
				return linksErr
			}
			if err := carries(links, t.Key, t.Email); err != nil {
				return err
			}
			if verified {
				return nil // already verified: nothing new to record
			}
			e.Label = "verified by mail"
		case EmailWithdraw:
			if !verified {
				return nil // withdrawn already
			}
			e.Purpose, e.Label = PurposeRevoke, "withdrawn by mail"
		case EmailManage:
			return Refuse(CodeWrongToken, "this link opens the key's manage page: it confirms nothing")
		default:
			return fmt.Errorf("unknown action %q", t.Action)
		}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
		out.Seq = e.Seq
		return nil
	})
	if err != nil {
		return EmailConfirmation{}, wrapOp("confirm email", err)
	}
	return out, nil
}

// ManageLink checks a manage link (EmailManage) for key without using
// it up, and returns what it is for; a link of another action is
// refused (CodeWrongToken).
func (s *Service) ManageLink(ctx context.Context, key Factor, token string) (EmailConfirmation, error) {
	t, err := s.manageLink(ctx, key, token)
	if err != nil {
		return EmailConfirmation{}, err
	}
	return EmailConfirmation{Action: t.Action, Key: t.Key, Email: t.Email}, nil
}

// manageLink reads the manage link with token for key without using it
// up, with ManageLink's refusals.
func (s *Service) manageLink(ctx context.Context, key Factor, token string) (*EmailToken, error) {
	t, err := s.emailLink(ctx, key, token)
	if err != nil {
		return nil, err
	}
	if t.Action != EmailManage {
		return nil, Refuse(CodeWrongToken, "this link is not a manage link: open it as it was mailed")
	}
	return t, nil
}

// WithdrawWithManageLink withdraws email from key for the holder of a
// manage link of key (ManageLink): the mail went to an address the key
// carried in a valid self-signed user ID, so, as on keys.openpgp.org,
// its holder stands for the key's holder and may withdraw any of the
// key's verified addresses, as often as the link works. It appends an
// email.verified record with purpose revoke (its statement's action is
// withdraw, requested when the manage link was) and returns it; an
// address that is not verified is refused (CodeNotVerified).
func (s *Service) WithdrawWithManageLink(ctx context.Context, key Factor, token string, email Factor) (EmailConfirmation, error) {
	t, err := s.manageLink(ctx, key, token)
	if err != nil {
		return EmailConfirmation{}, err
	}
	if email.Kind != KindEmail || email.Validate() != nil {
		return EmailConfirmation{}, Refuse(CodeBadFactor, "not an email address: %q", clip(email.Value))
	}
	now := s.clock()
	// As ConfirmEmail's withdrawal: the key as stored, if it still is.
	_, linkKey, err := s.keyLinks(ctx, key, now)
	if err != nil && CodeOf(err) == "" {
		return EmailConfirmation{}, wrapOp("withdraw with manage link", err)
	}
	out := EmailConfirmation{Action: EmailWithdraw, Key: t.Key, Email: email}
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		recs, err := tx.KeyRecords(ctx, key)
		if err != nil {
			return err
		}
		if !EmailVerifiedIn(recs, key, email) {
			return Refuse(CodeNotVerified, "%s is not published for key %s", email.Value, key.Value)
		}
		e := &Evidence{Method: MethodEmailVerified, From: key, To: email, SignerKey: linkKey, Created: now,
			Purpose: PurposeRevoke, Label: "withdrawn with a manage link",
			Statement: EmailStatement(s.server, EmailWithdraw, key, email, t.Created, now)}
		if err := tx.Append(ctx, e); err != nil {
			return err
		}
		out.Seq = e.Seq
		return nil
	})
	if err != nil {
		return EmailConfirmation{}, wrapOp("withdraw with manage link", err)
	}
	return out, nil
}

// VerifiedEmailReader answers the email-based lookups from the
// email.verified records: only addresses verified by mail, not withdrawn,
// and still carried by the key count.
type VerifiedEmailReader interface {
	// VerifiedKeys returns the OpenPGP key factors for which email is
	// verified.
	VerifiedKeys(ctx context.Context, email string) ([]Factor, error)
	// VerifiedEmails returns the addresses verified for the key with
	// fingerprint fp (upper-case hex).
	VerifiedEmails(ctx context.Context, fp string) ([]string, error)
}

// EmailVerification returns the email.verified record that stands for
// email and the OpenPGP key (the latest verification, not withdrawn
// since) and the artifact that opens its commitment to the address, so
// that an answer by that address can carry its proof: whoever asks by
// the address knows it, and the answer already says the key is verified
// for it. ErrNotFound when none stands, or its artifacts are erased.
func (s *Service) EmailVerification(ctx context.Context, key Factor, email string) (int64, Artifact, error) {
	email = EmailFactor(email).Value
	recs, err := s.store.KeyRecords(ctx, key)
	if err != nil {
		return 0, Artifact{}, fmt.Errorf("identity: email verification of %s: %w", key, err)
	}
	arts, err := s.store.KeyArtifacts(ctx, key)
	if err != nil {
		return 0, Artifact{}, fmt.Errorf("identity: email verification of %s: %w", key, err)
	}
	addr := map[int64]Artifact{}
	for _, ra := range arts {
		for _, a := range ra.Artifacts {
			if a.Kind == ArtifactEmail {
				addr[ra.Seq] = a
			}
		}
	}
	var seq int64
	for _, e := range recs {
		a, ok := addr[e.Seq]
		if e.Method != MethodEmailVerified || !ok || EmailFactor(string(a.Value)).Value != email {
			continue
		}
		if e.Purpose == PurposeRevoke {
			seq = 0
		} else {
			seq = e.Seq
		}
	}
	if seq == 0 {
		return 0, Artifact{}, fmt.Errorf("identity: no verification of %s for %s: %w", email, key, ErrNotFound)
	}
	return seq, addr[seq], nil
}
