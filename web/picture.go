// picture.go: the profile's picture of an identity, a server-rendered SVG:
// the handle at the centre, its factors around it, each edge labelled with
// how the factor was proven and coloured by its assurance. It draws with
// SVG attributes only (no inline style), so the pages' CSP holds.

package web

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kith-keyserver/kith/identity"
	"github.com/kith-keyserver/kith/pgp"
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
	// How says how the factor was proven, in the tall picture, whose
	// edges carry no labels.
	How          string
	Level        string
	Stroke, Fill string
}

// pictureEdge joins a factor to the handle (or to the key that carries
// it), labelled with how the link is proven.
type pictureEdge struct {
	X1, Y1, X2, Y2 int
	LX, LY         int
	Label          string
	// Lines are Label split after its commas, one method a line, so
	// that a label fits beside a short edge.
	Lines  []string
	Level  string
	Stroke string
	Dash   string
	// Path is the tall picture's curve (an SVG path); the wide picture
	// draws a straight line.
	Path string
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
			return pgp.GroupFingerprint(v[len(v)-16:])
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
		label := edgeLabel(f)
		lines := strings.SplitAfter(label, ", ")
		lx, ly := labelAt(x1, y1, node.X, node.Y, f.Parent != "", len(lines))
		e := pictureEdge{X1: x1, Y1: y1, X2: node.X, Y2: node.Y, LX: lx, LY: ly,
			Label: label, Lines: lines, Level: f.Level, Stroke: node.Stroke}
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

// labelAt places an edge's label in the middle of the part of the edge
// that shows: between the handle's circle (or, fromNode, the carrying
// key's box) and the factor's box. On an edge that runs more across than
// down it sits just above the line, so that the line does not cross it.
// It returns the first of the label's lines' baseline.
func labelAt(x1, y1, x2, y2 int, fromNode bool, lines int) (int, int) {
	dx, dy := float64(x2-x1), float64(y2-y1)
	length := math.Hypot(dx, dy)
	if length == 0 {
		return x1, y1
	}
	// How far along the edge each end's shape reaches.
	box := func() float64 {
		t := math.Inf(1)
		if dx != 0 {
			t = min(t, 85/math.Abs(dx))
		}
		if dy != 0 {
			t = min(t, 24/math.Abs(dy))
		}
		return t * length
	}
	start := 46.0
	if fromNode {
		start = box()
	}
	end := length - box()
	mid := (start + end) / 2
	x, y := float64(x1)+dx*mid/length, float64(y1)+dy*mid/length
	if math.Abs(dx) > math.Abs(dy) {
		y -= 7 + float64(13*(lines-1))
	} else {
		y += 4 - float64(13*(lines-1))/2
	}
	return int(math.Round(x)), int(math.Round(y))
}

// Tall picture sizes: a phone's width, one row per factor.
const (
	tallWidth = 360
	tallRow   = 84
	tallNodeW = 250
	tallNodeH = 64
)

// newTallPicture lays out the factors for a narrow screen: the handle on
// top, the factors in a column below it, each edge a curve from the
// handle (or the carrying key) along the left, and how each factor was
// proven written in its box.
func newTallPicture(handle string, factors []factorView) picture {
	p := picture{Width: tallWidth, Handle: handle, CX: tallWidth / 2, CY: 56}
	x := tallWidth - 8 - tallNodeW/2
	at := map[string]int{}
	for i, f := range factors {
		stroke, fill := colours(f.Level)
		title := kindTitles[identity.FactorKind(f.Kind)]
		if title == "" {
			title = f.Title
		}
		p.Nodes = append(p.Nodes, pictureNode{X: x, Y: 56 + 46 + 24 + tallRow*i + tallNodeH/2, W: tallNodeW,
			Kind: f.Kind, Title: title, Detail: shortValue(f), How: edgeLabel(f), Level: f.Level, Stroke: stroke, Fill: fill})
		at[f.Kind+" "+f.Value] = i
	}
	left := x - tallNodeW/2
	for i, f := range factors {
		n := p.Nodes[i]
		// From the left of the handle's circle, or the carrying key's
		// left side, round to this box's left side.
		x1, y1, bend := p.CX-46, p.CY, 24
		if f.Parent != "" {
			if j, ok := at[string(identity.KindPGP)+" "+f.Parent]; ok {
				x1, y1, bend = left, p.Nodes[j].Y, 12
			}
		}
		e := pictureEdge{X1: x1, Y1: y1, X2: left, Y2: n.Y, Label: n.How, Level: f.Level, Stroke: n.Stroke,
			Path: fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d", x1, y1, min(x1, left)-bend, y1, min(x1, left)-bend, n.Y, left, n.Y)}
		switch f.Level {
		case "claimed":
			e.Dash = "6 4"
		case "revoked", "expired":
			e.Dash = "2 4"
		}
		p.Edges = append(p.Edges, e)
	}
	p.MinY, p.Height = 0, 56+46+24+tallRow*len(factors)+8
	return p
}
