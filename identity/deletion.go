// deletion.go: a key's holder deletes the key. The holder signs a
// statement with the key's primary key, through the same challenges as
// identity links, and the key is replaced by its tombstone for good.

package identity

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// IssueKeyDeletion issues a statement that the holder of the OpenPGP key
// f signs, with its primary key, to delete the key (DeleteKey). It names
// no handle: a key needs no identity to be deleted.
func (s *Service) IssueKeyDeletion(ctx context.Context, f Factor) (*Challenge, error) {
	if s.blocks == nil {
		return nil, Refuse(CodeUnsupported, "this server does not delete keys")
	}
	if err := f.Validate(); err != nil {
		return nil, RefuseErr(CodeBadFactor, err, "bad factor")
	}
	if f.Kind != KindPGP {
		return nil, Refuse(CodeUnsupported, "only an OpenPGP key can be deleted, not a %s factor", f.Kind)
	}
	c, err := s.newChallenge(PurposeDeleteKey, "", f, s.now())
	if err != nil {
		return nil, fmt.Errorf("identity: issue key deletion: %w", err)
	}
	if err := s.store.SaveChallenge(ctx, c); err != nil {
		return nil, fmt.Errorf("identity: issue key deletion: %w", err)
	}
	return c, nil
}

// DeleteKey checks a key deletion statement (IssueKeyDeletion) and its
// signature by the primary key it names, answers its challenge once, and
// has the store replace the key by its tombstone: the primary key and its
// revocations, which keep merging while nothing else of the key is ever
// stored again, from uploads or recon. The links the key carried end with
// it, through the store's key-change hook. It returns the key's factor.
func (s *Service) DeleteKey(ctx context.Context, statement, signature []byte) (Factor, BlockOutcome, error) {
	if s.blocks == nil {
		return Factor{}, "", Refuse(CodeUnsupported, "this server does not delete keys")
	}
	c, err := ParseStatement(statement)
	if err != nil {
		return Factor{}, "", RefuseErr(CodeBadStatement, err, "not a statement this server issued")
	}
	if c.Server != s.server {
		return Factor{}, "", Refuse(CodeWrongServer, "the statement was issued by %q, this is %q", clip(c.Server), s.server)
	}
	if c.Purpose != PurposeDeleteKey {
		return Factor{}, "", Refuse(CodeWrongPurpose, "the statement is for %q, not %q", clip(string(c.Purpose)), PurposeDeleteKey)
	}
	if c.Factor.Kind != KindPGP || c.Factor.Validate() != nil {
		return Factor{}, "", Refuse(CodeBadFactor, "a key deletion names an OpenPGP fingerprint")
	}
	if len(signature) == 0 {
		return Factor{}, "", Refuse(CodeBadSignature, "no signature by %s", c.Factor)
	}
	// The nonce is spent only with a good signature (a refusal rolls the
	// transaction back, so a wrong signature can be retried), and a
	// replay is refused as such.
	err = s.update(ctx, func(ctx context.Context, tx Tx) error {
		if err := s.consume(ctx, tx, c, statement, s.now()); err != nil {
			return err
		}
		if _, err := s.verifier.VerifyPGPPrimary(ctx, c.Factor.Value, statement, signature); err != nil {
			return asRefusal(err, CodeBadSignature, "signature by "+c.Factor.String())
		}
		return nil
	})
	if err != nil {
		return Factor{}, "", err
	}
	fp, err := hex.DecodeString(c.Factor.Value)
	if err != nil {
		return Factor{}, "", RefuseErr(CodeBadFactor, err, "bad fingerprint")
	}
	out, err := s.blocks.AddBlock(ctx, Block{
		Fingerprint: fp, KeepRevocations: true, Origin: BlockByOwner,
		Reason: "deleted by its holder, who signed the deletion statement with nonce " +
			base64.RawURLEncoding.EncodeToString(c.Nonce),
		Actor: "the holder of key " + c.Factor.Value,
	})
	if errors.Is(err, ErrAlreadyBlocked) {
		return c.Factor, BlockKeyAlreadyGone, nil
	}
	if err != nil {
		return Factor{}, "", fmt.Errorf("identity: delete key %s: %w", c.Factor.Value, err)
	}
	return c.Factor, out, nil
}
