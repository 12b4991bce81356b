// legacy.go: what clients of the legacy key-discovery protocols (HKP's
// /pks/lookup, WKD) are sent of keys they may not read. One rule, here,
// for every frontend that answers such clients.

package pgp

// A client of the legacy protocols cannot be told apart from one that
// reads version 6 keys: gpg 2.2's dirmngr sends no User-Agent on
// /pks/lookup (only Host, Pragma and Cache-Control: no-cache), and neither
// does sq 0.27; no GnuPG release reads v6 packets at all (GnuPG implements
// LibrePGP's v5, not RFC 9580's v6), and gpg 2.2.40 refuses its whole
// input, the v4 keys in it too, at the first v6 key or signature packet
// ("packet(6) with unknown version 6 ... Invalid keyring"). The rule is
// therefore one of the answer, not of the client, so that an answer is
// the same for everyone and can be cached:
//
//   - an answer that holds a key gpg reads (v3 or v4) leaves out the v6
//     keys, so that gpg imports the keys it can;
//   - an answer made only of v6 keys is sent whole: a client that reads no
//     v6 key imports nothing either way, and one that does (Sequoia 2,
//     OpenPGP.js 6, go-crypto) gets the keys it asked for.
//
// Within a kept v4 key nothing needs taking out: the Policy keeps no v6
// signature or subkey on a v3 or v4 key (checkVersionFits), and the one
// post-quantum algorithm a v4 key may hold, an ML-KEM-768+X25519
// encryption subkey, gpg 2.2 imports and lists as "unknown_35" without
// ever encrypting to it. The v2 HKP routes and VKS, whose clients read v6
// keys, answer one key at a time and send it whole.

// LegacyReadable reports whether clients that read no version 6 packet
// (every GnuPG release) read a key whose primary key is of version v.
func LegacyReadable(version int) bool { return version <= 4 }

// ForLegacyClients reports which keys of an answer, given by their primary
// keys' versions in answer order, clients of the legacy protocols are
// sent: the ones LegacyReadable accepts when there is any, otherwise all.
func ForLegacyClients(versions []int) (send []bool) {
	send = make([]bool, len(versions))
	readable := false
	for i, v := range versions {
		send[i] = LegacyReadable(v)
		readable = readable || send[i]
	}
	if !readable {
		for i := range send {
			send[i] = true
		}
	}
	return send
}

// KeepForLegacyClients returns the items of an answer that
// ForLegacyClients sends, in order, version(i) giving the version of
// items[i]'s primary key; and the same entries of along (what each item
// is served for, say), which may be nil.
func KeepForLegacyClients[T, U any](items []T, along []U, version func(i int) int) ([]T, []U) {
	versions := make([]int, len(items))
	for i := range items {
		versions[i] = version(i)
	}
	var keptItems []T
	var keptAlong []U
	for i, send := range ForLegacyClients(versions) {
		if send {
			keptItems = append(keptItems, items[i])
			if along != nil {
				keptAlong = append(keptAlong, along[i])
			}
		}
	}
	return keptItems, keptAlong
}
