// The driving role of a recon session: the side that accepted the
// connection walks its tree and asks.

package recon

import (
	"fmt"
	"math"
)

// request is one outstanding driver request.
type request struct {
	view nodeView
	full bool // sent as ReconRqstFull
}

func (s *session) drive() error {
	queue := []Prefix{{}}
	var pending []request
	for len(queue) > 0 {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		pending = pending[:0]
		for len(queue) > 0 && len(pending) < s.cfg.MaxOutstanding {
			p := queue[0]
			queue = queue[1:]
			v := s.tree.view(p, fullBelow)
			req := request{view: v, full: v.leaf || v.size < fullBelow}
			var m Message
			if req.full {
				m = &ReconRqstFull{Prefix: p, Elements: v.elems}
			} else {
				m = &ReconRqstPoly{Prefix: p, Size: v.size, Samples: samplesBig(&v)}
			}
			if err := s.send(m); err != nil {
				return err
			}
			pending = append(pending, req)
			s.requests++
		}
		s.send(&Flush{})
		if err := s.flush(); err != nil {
			return err
		}
		for _, req := range pending {
			m, err := s.recv()
			if err != nil {
				return err
			}
			children, err := s.handleReply(req, m)
			if err != nil {
				return err
			}
			queue = append(queue, children...)
		}
	}
	s.send(&Done{})
	return s.flush()
}

// handleReply processes the answer to one request and returns the child
// prefixes to ask about next.
func (s *session) handleReply(req request, m Message) ([]Prefix, error) {
	p := req.view.prefix
	switch m := m.(type) {
	case *SyncFail:
		if req.full || req.view.leaf {
			return nil, protoErr("SyncFail for a full request at %q", p)
		}
		return req.view.children, nil
	case *Elements:
		if err := checkUnder(p, m.Elements, "Elements"); err != nil {
			return nil, err
		}
		return nil, s.addMissing(s.missing, s.notHeld(m.Elements))
	case *FullElements:
		if req.full {
			return nil, protoErr("FullElements answering a ReconRqstFull at %q", p)
		}
		if err := checkUnder(p, m.Elements, "FullElements"); err != nil {
			return nil, err
		}
		local := s.tree.view(p, math.MaxInt).elems
		if theirs := diff(local, m.Elements); len(theirs) > 0 {
			if err := s.send(&Elements{Elements: theirs}); err != nil {
				return nil, err
			}
			if err := s.addMissing(s.peerMissing, theirs); err != nil {
				return nil, err
			}
		}
		return nil, s.addMissing(s.missing, diff(m.Elements, local))
	case *ErrorMessage:
		return nil, fmt.Errorf("peer sent error: %q", m.Text)
	}
	return nil, protoErr("unexpected %v answering a request at %q", m.Type(), p)
}

// notHeld filters out the elements the tree already holds (it may have
// learned them since the peer looked).
func (s *session) notHeld(ds [][16]byte) [][16]byte {
	out := ds[:0:0]
	for _, d := range ds {
		if !s.tree.Has(d) {
			out = append(out, d)
		}
	}
	return out
}
