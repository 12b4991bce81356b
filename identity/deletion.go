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
// it, and what the log's records about it held of a person is erased
// (EraseKey). It returns the key's factor.
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
		out = BlockKeyAlreadyGone
	} else if err != nil {
		return Factor{}, "", fmt.Errorf("identity: delete key %s: %w", c.Factor.Value, err)
	}
	if _, err := s.EraseKey(ctx, fp); err != nil {
		return Factor{}, "", fmt.Errorf("identity: delete key %s: %w", c.Factor.Value, err)
	}
	return c.Factor, out, nil
}

// EraseKey erases everything the log's records about the OpenPGP key
// with fingerprint fp hold of a person (Tx.EraseKeyArtifacts): what
// follows the key's deletion or an operator's block of the whole key. It
// first ends the links the key no longer carries (SyncKey), so that their
// revocations' artifacts go too. The records and their commitments stay
// and their public packets still verify; `kith verify-log` reports them
// as "artifact erased". It returns how many records lost artifacts.
func (s *Service) EraseKey(ctx context.Context, fp []byte) (int, error) {
	return s.eraseKey(ctx, fp, false, "")
}

// EraseUserID is EraseKey after an operator blocked one user ID of the
// key, whose address is email ("" when it has none): it erases the whole
// key the records commit to (which holds the user ID) and everything
// about that address, and leaves the key's other addresses as they are.
func (s *Service) EraseUserID(ctx context.Context, fp []byte, email string) (int, error) {
	return s.eraseKey(ctx, fp, true, email)
}

func (s *Service) eraseKey(ctx context.Context, fp []byte, userID bool, email string) (int, error) {
	if err := s.SyncKey(ctx, fp); err != nil {
		return 0, err
	}
	var n int
	err := s.update(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		n, err = tx.EraseKeyArtifacts(ctx, PGPFactor(fp), userID, email)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("identity: erase key %X: %w", fp, err)
	}
	return n, nil
}
