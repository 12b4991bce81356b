// The reconciliation parameters Kith shares with SKS and Hockeypuck. Peers
// compare bitquantum and mbar in the Config handshake, so these are fixed.

package recon

const (
	// Version is the SKS protocol version Kith announces in Config.
	Version = "1.1.6"
	// MBar is the number of differences one node's samples can resolve.
	MBar = mbar
	// BitQuantum is the number of prefix bits each tree level consumes.
	BitQuantum = bitQuantum
	// DefaultFilters is the filter list SKS announces once its database is
	// cleaned (merged and deduplicated).
	DefaultFilters = "yminsky.dedup,yminsky.merge"

	mbar        = 5
	numSamples  = mbar + 1 // the last sample point checks the interpolation
	bitQuantum  = 2
	numChildren = 1 << bitQuantum
	splitAbove  = 10 * mbar // a leaf with more elements splits
	joinBelow   = 5 * mbar  // an interior node with fewer elements joins
	// fullBelow: the driver sends a node's elements outright (ReconRqstFull)
	// when it is a leaf or holds fewer elements than this.
	fullBelow = 10 * mbar

	digestBits      = 128
	elementWireSize = 17 // an element on the wire: little-endian, mod P
)
