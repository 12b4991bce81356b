// picture.go: the profile's picture of an identity, a server-rendered SVG:
// the handle at the centre, its factors around it, each edge labelled with
// how the factor was proven and coloured by its assurance. It draws with
// SVG attributes only (no inline style), so the pages' CSP holds.

package web

import (
	"math"
	"slices"
	"strings"

	"github.com/kith-keyserver/kith/identity"
)

// picture is the laid-out SVG.
type picture struct {
	// MinY, Width and Height are the viewBox: the drawing's extent.
	MinY, Width, Height int
	CX, CY              int
	Handle              string
	Nodes               []pictureNode
	Edges               []pictureEdge
}

// pictureNode is one factor.
type pictureNode struct {
	X, Y          int // centre
	W             int // box width
	Kind          string
	Title, Detail string
	Level         string
	Stroke, Fill  string
}

// pictureEdge joins a factor to the handle (or to the key that carries
// it), labelled with how the link is proven.
type pictureEdge struct {
	X1, Y1, X2, Y2 int
	LX, LY         int
	Label          string
	Level          string
	Stroke         string
	Dash           string
}

// levelColours are the stroke and fill of each assurance.
var levelColours = map[string][2]string{
	"proven":  {"#1a7f37", "#e6f4ea"},
	"claimed": {"#9a6700", "#fff8c5"},
	"expired": {"#6e7781", "#f6f8fa"},
	"revoked": {"#cf222e", "#ffebe9"},
}

func colours(level string) (string, string) {
	if c, ok := levelColours[level]; ok {
		return c[0], c[1]
	}
	return "#6e7781", "#ffffff"
}

// shortValue fits a factor's value in a node.
func shortValue(f factorView) string {
	v := f.Value
	switch identity.FactorKind(f.Kind) {
	case identity.KindPGP:
		if len(v) >= 16 {
			return groupHex(v[len(v)-16:])
		}
	case identity.KindSSH:
		if len(v) > 19 {
			return v[:19] + "…"
		}
	}
	if len(v) > 24 {
		return v[:23] + "…"
	}
	return v
}

// edgeLabel says how a factor's current assurance was established.
func edgeLabel(f factorView) string {
	if f.Level == "revoked" {
		return "revoked"
	}
	var ms []string
	for _, e := range f.Evidence {
		if e.Counts && e.Method != string(identity.MethodRevocation) && !slices.Contains(ms, e.Method) {
			ms = append(ms, e.Method)
		}
	}
	if len(ms) == 0 {
		return f.Level
	}
	if len(ms) > 2 {
		ms = append(ms[:2], "…")
	}
	return strings.Join(ms, ", ")
}

// newPicture lays out the factors on a circle around the handle.
func newPicture(handle string, factors []factorView) picture {
	p := picture{Width: 720, Height: 440, Handle: handle}
	p.CX, p.CY = p.Width/2, p.Height/2
	n := len(factors)
	rx, ry := 250.0, 160.0
	at := map[string]int{} // a factor's value → its node, for parents
	for i, f := range factors {
		a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(max(n, 1))
		stroke, fill := colours(f.Level)
		title := kindTitles[identity.FactorKind(f.Kind)]
		if title == "" {
			title = f.Title
		}
		node := pictureNode{
			X: p.CX + int(math.Round(rx*math.Cos(a))), Y: p.CY + int(math.Round(ry*math.Sin(a))),
			W: 170, Kind: f.Kind, Title: title, Detail: shortValue(f), Level: f.Level, Stroke: stroke, Fill: fill,
		}
		p.Nodes = append(p.Nodes, node)
		at[f.Kind+" "+f.Value] = i
	}
	for i, f := range factors {
		node := p.Nodes[i]
		x1, y1 := p.CX, p.CY
		if f.Parent != "" {
			if j, ok := at[string(identity.KindPGP)+" "+f.Parent]; ok {
				x1, y1 = p.Nodes[j].X, p.Nodes[j].Y
			}
		}
		// The label sits past the middle, clear of the handle's circle.
		e := pictureEdge{X1: x1, Y1: y1, X2: node.X, Y2: node.Y, LX: x1 + (node.X-x1)*3/5, LY: y1 + (node.Y-y1)*3/5 - 4,
			Label: edgeLabel(f), Level: f.Level, Stroke: node.Stroke}
		switch f.Level {
		case "claimed":
			e.Dash = "6 4"
		case "revoked", "expired":
			e.Dash = "2 4"
		}
		p.Edges = append(p.Edges, e)
	}
	// Crop the viewBox to what is drawn, so that no band stays empty.
	top, bottom := p.CY-46, p.CY+46
	for _, n := range p.Nodes {
		top, bottom = min(top, n.Y-24), max(bottom, n.Y+24)
	}
	p.MinY, p.Height = top-16, bottom-top+32
	return p
}
