// Package hkp is Kith's HTTP Keyserver Protocol frontend
// (draft-shaw-openpgp-hkp, draft-gallagher-openpgp-hkp): what gpg's
// --send-keys, --recv-keys, --search-keys and --refresh-keys speak, and what
// SKS and Hockeypuck peers use to fetch keys after reconciliation.
//
// It owns:
//   - GET /pks/lookup: op=get, index, vindex, hget and stats, with
//     options=mr, exact=on and fingerprint=on; parsing and normalising the
//     search (key IDs, fingerprints, emails, words); the machine-readable
//     index format and its percent-escaping; the HTML answers for people,
//     in the site's frame (html.go's siteFrame: the pages' stylesheet and
//     header, without importing web);
//   - op=stats: its JSON in Hockeypuck's field names (which the pool's
//     status tools read) beside Kith's, and its page; what it shows of the
//     recon peers comes from the wiring (Options.Peers), never a raw error;
//   - POST /pks/add: reading one or many keys (form field keytext or a raw
//     application/pgp-keys body), running each through the key policy and
//     the store, and saying per key what happened;
//   - POST /pks/hashquery: the SKS binary request and response format, with
//     caps on both;
//   - an in-process cache of rendered answers, kept coherent across nodes
//     by the store's key-change notifications (see cache.go for the rule);
//   - its Prometheus collectors, registered on a Registerer the caller gives.
//
// It does not own: OpenPGP parsing, the policy, merging or digests (pgp);
// the upload path (identity/keys.Service, reached as a keys.Uploader);
// storage, merging in a transaction and NOTIFY (identity/postgres, reached
// only through the Store interface declared here, made of identity/keys'
// interfaces); recon's client side of
// hashquery (recon); the HTTP server, its listener and timeouts, and the
// request metrics per route (cmd/kith); pages beyond the plain HTML answers
// HKP needs (web).
package hkp
