// strip.go: a key cut down to some of its user IDs, as key discovery
// serves it (VKS serves only verified addresses, WKD only the one asked
// for).

package pgp

// WithUserIDs returns k with only the user IDs whose address keep accepts
// (UserIDAddress of the user ID, "" when it carries none), each
// with its signatures. The primary key, its direct signatures and every
// subkey with its signatures stay; user attributes (photos) go. The
// result is not canonical (Canonical reports false); serve its Bytes. A
// key whose packets do not start with a primary key is returned as is.
func (k *Key) WithUserIDs(keep func(email string) bool) *Key {
	st, err := structure(k.packets)
	if err != nil {
		return k
	}
	out := append([]Packet{st.primary}, st.direct...)
	for _, c := range st.comps {
		switch c.kind {
		case kindUserID:
			if !keep(UserIDAddress(string(c.pkt.Body))) {
				continue
			}
		case kindUserAttribute:
			continue
		}
		out = append(out, c.pkt)
		out = append(out, c.sigs...)
	}
	return &Key{packets: out}
}

// WithoutUserIDs returns k with no user ID and no user attribute: the
// primary key, its direct signatures and every subkey with its
// signatures. It is the part of a key the public evidence log shows,
// which names no person (a key's user IDs stay erasable artifacts beside
// it); Policy.AllowNoSelfSignature reads it.
func (k *Key) WithoutUserIDs() *Key {
	return k.WithUserIDs(func(string) bool { return false })
}
