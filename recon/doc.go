// Package recon implements SKS set reconciliation, the gossip protocol
// keyservers use to find which keys each holds that the other lacks
// (Minsky, Trachtenberg and Zippel, "Set Reconciliation with Nearly Optimal
// Communication Complexity"), compatible with SKS 1.1.6 and Hockeypuck.
//
// It owns:
//   - arithmetic over Z(P), polynomials, rational-function interpolation and
//     root finding (field.go, poly.go, interp.go, factor.go; unexported);
//   - the prefix tree of key digests with its per-node samples ([Tree]);
//   - the wire format of recon messages ([Message], [ReadMessage],
//     [WriteMessage]) and the Config handshake ([CheckConfig]);
//   - one recon session in either role ([Drive] for the side that accepted
//     the connection, [Answer] for the side that dialled);
//   - the peer manager: listener, membership, gossip loop, status and
//     metrics ([Manager], [Peer]);
//   - the /pks/hashquery client and both ends of its body encodings
//     ([HashQueryFetcher], [MarshalHashQueryRequest], [ReadHashQueryResponse],
//     and for servers [ParseHashQueryRequest], [HashQueryResponseWriter]).
//
// It does not own: computing a key's digest (package pgp), storing or
// merging fetched keys (the store callback the caller passes to
// [HashQueryFetcher]), serving /pks/hashquery over HTTP (package hkp, with
// this package's encodings), reading
// configuration files, or keeping the tree current with the database (the
// caller builds it with [BuildTreeFrom] and calls [Tree.Insert] and
// [Tree.Remove] as changes are notified).
//
// Elements are 16-byte MD5 digests read as little-endian integers mod P;
// on the wire they are 17 little-endian bytes. Prefix bits are read most
// significant first from the digest bytes. Kith uses SKS's parameters:
// mbar 5, bit quantum 2, leaves split above 50 elements and join below 25.
package recon
