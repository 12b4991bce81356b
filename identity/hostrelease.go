// hostrelease.go: the operator frees a host name. A name in the host
// policy is held by whoever first claims it with a host key; when that
// was a squatter, or the host's keys are lost (a reinstalled machine has
// no old key to co-sign its new one), only the operator can free it.
// ReleaseHost ends every link of the host identity with a host.release
// record, the operator's word published in the log, and the name may then
// be claimed again, by a new key's own signature as any claim.

package identity

import (
	"context"
	"fmt"
	"time"
)

// MethodHostRelease: the operator released the host name Handle: the
// link of From, one of the host's SSH keys, ends as a revocation would
// end it. Once every key of the host is released, the name may be
// claimed again. Statement: what was released, where and when
// (HostReleaseStatement); no signature: the operator's word, published
// so that everyone sees it, and certificates issued for the keys are
// revoked with the links.
const MethodHostRelease Method = "host.release"

// HostReleaseStatementTitle starts the statement of every host.release
// record.
const HostReleaseStatementTitle = "Kith host name release"

// HostReleaseStatement is the statement of the host.release record that
// releases key (an SSH factor) from host handle h on server.
func HostReleaseStatement(server string, h Handle, key Factor, at time.Time) []byte {
	return fmt.Appendf(nil, "%s\n\nserver: %s\nhost: %s\nkey: %s\nreleased: %s\n", HostReleaseStatementTitle,
		server, h, key.Value, at.UTC().Format(time.RFC3339))
}

// ReleaseHost releases the host name: every key of the host identity
// whose link has not ended is released (a host.release record each, in
// one transaction), and the name may be claimed again. It returns the
// keys released: none, and nothing written, when all were released
// already.
func (s *Service) ReleaseHost(ctx context.Context, name string) ([]Factor, error) {
	name = FoldHostName(name)
	if _, err := ParseHostName(name); err != nil {
		return nil, RefuseErr(CodeBadHandle, err, "%q is not a host name", clip(name))
	}
	h := HostHandle(name)
	var released []Factor
	err := s.update(ctx, func(ctx context.Context, tx Tx) error {
		released = nil
		_, recs, err := tx.IdentityRecords(ctx, h)
		if err != nil {
			return asUnknown(err, h)
		}
		now := s.clock()
		for _, st := range Assess(h, recs, now).Factors {
			if st.Factor.Kind != KindSSH || releasedFactor(h, recs, st.Factor) {
				continue
			}
			e := &Evidence{Method: MethodHostRelease, Handle: h, From: st.Factor, Label: "released by the operator of " + s.server,
				Statement: HostReleaseStatement(s.server, h, st.Factor, now), Created: now}
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
			released = append(released, st.Factor)
		}
		return nil
	})
	if err != nil {
		return nil, wrapOp("release host", err)
	}
	return released, nil
}

// releasedFactor reports whether the last record of h about f is a
// host.release: the key was released and not linked again since.
func releasedFactor(h Handle, recs []Evidence, f Factor) bool {
	var last *Evidence
	for i := range recs {
		e := &recs[i]
		if e.Handle == h && (e.From.Same(f) || e.To.Same(f)) && (last == nil || e.Seq > last.Seq) {
			last = e
		}
	}
	return last != nil && last.Method == MethodHostRelease
}

// hostReleased reports whether the host identity h with records recs is
// free to claim again: the operator released it (ReleaseHost) and no key
// has been linked to it since, that is, the last record about each of
// its keys is a host.release. A key claimed after the release and then
// revoked by its holder keeps the name held, as for a host never
// released: only the operator frees a name.
func hostReleased(h Handle, recs []Evidence, now time.Time) bool {
	if _, ok := h.Host(); !ok {
		return false
	}
	factors := Assess(h, recs, now).Factors
	if len(factors) == 0 {
		return false
	}
	for _, st := range factors {
		if !releasedFactor(h, recs, st.Factor) {
			return false
		}
	}
	return true
}
