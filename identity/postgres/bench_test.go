package postgres_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/identity/postgres/pgtest"
	"github.com/kith-keyserver/kith/pgp"
	"github.com/kith-keyserver/kith/pgp/keygen"
)

// BenchmarkAddKeysBatch stores batches of 1000 new typical keys, as
// `kith load` writes them: the cost of one write transaction, blocklist
// check included.
func BenchmarkAddKeysBatch(b *testing.B) {
	const batch = 1000
	raw, err := keygen.New(77).Range(0, batch*4)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]*pgp.Key, len(raw))
	for i, r := range raw {
		k, err := pgp.ParseKey(r)
		if err != nil {
			b.Fatal(err)
		}
		if keys[i], _, err = pgp.DefaultPolicy().Apply(k); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := pgtest.NewStore(b)
		b.StartTimer()
		for start := 0; start < len(keys); start += batch {
			if _, err := s.AddKeys(ctx, keys[start:start+batch]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(keys)*b.N)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkAppendKeyLink appends a user ID's link record (pgp.uid-selfsig)
// as records were before their personal data became artifacts ("whole":
// the whole key, the user ID and its self-signature in the row) and as
// they are now ("private": the key without user IDs in the row, and the
// address, user ID, self-signature and whole key as four committed
// artifacts beside it), in one run, so that the two costs compare.
func BenchmarkAppendKeyLink(b *testing.B) {
	raw, err := keygen.New(78).Key(1)
	if err != nil {
		b.Fatal(err)
	}
	k, err := pgp.ParseKey(raw)
	if err != nil {
		b.Fatal(err)
	}
	whole := k.Bytes()
	public := k.WithoutUserIDs().Bytes()
	d := k.Describe()
	uid := pgp.NewKey([]pgp.Packet{{Tag: pgp.TagUserID, Body: []byte(d.UserIDs[0].Text)}}).Bytes()
	sig := bytes.Repeat([]byte{0xC2}, 120)
	fp := identity.PGPFactor(k.Fingerprint())
	email := identity.EmailFactor(d.UserIDs[0].Email)
	record := func(private bool) *identity.Evidence {
		e := &identity.Evidence{Method: identity.MethodPGPUIDSelfSig, From: fp, To: email,
			Statement: uid, Signature: sig, SignerKey: whole, Created: time.Now()}
		if !private {
			return e
		}
		for _, a := range []identity.Artifact{
			{Kind: identity.ArtifactEmail, Value: []byte(email.Value)},
			{Kind: identity.ArtifactStatement, Value: uid},
			{Kind: identity.ArtifactSignature, Value: sig},
			{Kind: identity.ArtifactPGPKey, Value: whole},
		} {
			a.Salt = make([]byte, identity.ArtifactSaltSize)
			rand.Read(a.Salt)
			e.Artifacts = append(e.Artifacts, a)
			e.Commitments = append(e.Commitments, a.Commit())
		}
		e.SignerKey = public
		return e
	}
	ctx := context.Background()
	s := pgtest.NewStore(b)
	for _, form := range []string{"whole", "private"} {
		b.Run(form, func(b *testing.B) {
			for b.Loop() {
				e := record(form == "private")
				if err := s.Update(ctx, func(ctx context.Context, tx identity.Tx) error { return tx.Append(ctx, e) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
