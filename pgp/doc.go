// Package pgp is Kith's OpenPGP core: every key that enters Kith (HKP
// upload, bulk load, recon fetch) passes through it, and what it keeps is
// what clients receive.
//
// It owns:
//   - reading transferable public keys (v3, v4, v6, with RFC 9980's
//     post-quantum algorithms; binary or armored, one or many, streaming
//     with resynchronisation after damage): Reader, ParseKey;
//   - the key policy: verifying every self-signature over the original bytes,
//     dropping what is not validly self-signed, capping certification floods
//     and sizes, bounding the verification work a key or a request may cost
//     (VerifyBudget), counting every drop by reason: Policy, Report,
//     DropReason;
//   - merging an upload into a stored key: Policy.Merge;
//   - the canonical form (original packet bodies, new-format headers,
//     canonical order) and armor: Key.Bytes, WriteArmored;
//   - the SKS digest that reconciliation compares: Key.Digest, ParseDigest;
//   - which keys of an answer clients of the legacy protocols, gpg above
//     all, are sent, since gpg refuses a whole answer at one v6 packet:
//     ForLegacyClients;
//   - the facts indexes are built from: Key.Describe;
//   - verification of signatures a key made over data: VerifyDetached,
//     VerifyCleartext;
//   - a parallel bulk pipeline: Policy.ProcessParallel;
//   - how keys are shown to people, the same in every frontend:
//     GroupFingerprint, AlgorithmName, GPGAlgorithmName, and what a
//     signature packet says of itself: ReadSignature.
//
// It does not own: storage (identity/postgres), HKP index formatting and
// escaping (hkp), SSH key conversion (ssh, from Subkey.PublicKey), the recon
// prefix tree (recon), or trust: third-party certifications are kept (capped)
// but never verified, since their issuers' keys are not at hand.
//
// Packet framing is Kith's own (old and new header formats, partial lengths
// rejected); go-crypto (github.com/ProtonMail/go-crypto) parses single packet
// bodies and checks signature values. Version 3 keys and signatures, which
// go-crypto no longer parses, are handled here.
package pgp
