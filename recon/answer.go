// The answering role of a recon session: the side that initiated the
// connection answers the driver's requests from its own tree.

package recon

import (
	"fmt"
	"math"
)

func (s *session) answer() error {
	points := s.tree.points[:]
	for {
		m, err := s.recv()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *ReconRqstPoly:
			s.requests++
			if err := s.answerPoly(m, points); err != nil {
				return err
			}
		case *ReconRqstFull:
			s.requests++
			if err := checkUnder(m.Prefix, m.Elements, "ReconRqstFull"); err != nil {
				return err
			}
			local := s.tree.view(m.Prefix, math.MaxInt).elems
			theirs := diff(local, m.Elements)
			if err := s.send(&Elements{Elements: theirs}); err != nil {
				return err
			}
			if err := s.addMissing(s.peerMissing, theirs); err != nil {
				return err
			}
			if err := s.addMissing(s.missing, diff(m.Elements, local)); err != nil {
				return err
			}
		case *Elements:
			if err := s.addMissing(s.missing, s.notHeld(m.Elements)); err != nil {
				return err
			}
		case *Flush:
			if err := s.flush(); err != nil {
				return err
			}
		case *Done:
			return s.flush()
		case *ErrorMessage:
			return fmt.Errorf("peer sent error: %q", m.Text)
		default:
			return protoErr("unexpected %v from the driver", m.Type())
		}
		if len(s.out) > maxPendingOutput {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
}

// answerPoly reconciles the driver's node against the local one.
func (s *session) answerPoly(m *ReconRqstPoly, points []fe) error {
	if len(m.Samples) != numSamples {
		return protoErr("ReconRqstPoly at %q with %d samples, want %d", m.Prefix, len(m.Samples), numSamples)
	}
	remote := make([]fe, numSamples)
	for i, x := range m.Samples {
		var ok bool
		if remote[i], ok = feFromBig(x); !ok {
			return protoErr("ReconRqstPoly sample %v not below P", x)
		}
	}
	v := s.tree.view(m.Prefix, fullBelow)
	onlyRemote, onlyLocal, err := reconcile(remote, v.samples[:], m.Size, v.size, points)
	if err != nil {
		if v.leaf || v.size < fullBelow {
			return s.send(&FullElements{Elements: v.elems})
		}
		return s.send(&SyncFail{})
	}
	// The check point passed, so an honest peer's answer is right (but for
	// a chance of about 1/P); a root that contradicts the local tree means
	// the samples were made up.
	lacked, err := s.checkRoots(m.Prefix, onlyRemote, false)
	if err != nil {
		return err
	}
	theirs, err := s.checkRoots(m.Prefix, onlyLocal, true)
	if err != nil {
		return err
	}
	if err := s.send(&Elements{Elements: theirs}); err != nil {
		return err
	}
	if err := s.addMissing(s.peerMissing, theirs); err != nil {
		return err
	}
	return s.addMissing(s.missing, lacked)
}

// checkRoots turns roots into digests and checks each lies under p and is
// (held) or is not (!held) in the local tree.
func (s *session) checkRoots(p Prefix, rs []fe, held bool) ([][16]byte, error) {
	out := make([][16]byte, 0, len(rs))
	for _, r := range rs {
		d, ok := r.digest()
		if !ok || !p.Contains(d) {
			return nil, protoErr("ReconRqstPoly at %q: samples imply element %v outside the prefix", p, r.big())
		}
		if s.tree.Has(d) != held {
			if held {
				return nil, protoErr("ReconRqstPoly at %q: samples imply the peer lacks %x, which is not held here", p, d)
			}
			// Learned since the view was taken: nothing to fetch.
			continue
		}
		out = append(out, d)
	}
	return out, nil
}
