// Package ssh is Kith's layer over SSH public keys, built on golang.org/x/crypto/ssh.
//
// It owns:
//
//   - parsing authorized_keys lines (with options and comments) and public key files
//     (id_*.pub) of every OpenSSH key type, certificates included ([ParseAuthorizedKey],
//     [ParseAuthorizedKeys], [ParsePublicKeyFile], [Key]);
//   - fingerprints exactly as OpenSSH prints them, and parsing them back for lookups
//     ([Fingerprint], [FingerprintOf], [ParseFingerprint], [FingerprintLine]);
//   - rendering authorized_keys lines and whole documents for serving
//     ([MarshalAuthorizedKey], [MarshalAuthorizedKeys], [SanitizeComment]);
//   - verifying SSHSIG signatures, the format `ssh-keygen -Y sign` writes, which is how a
//     person proves possession of an SSH key ([VerifySignature], [VerifySignatureBy],
//     [ParseSignature]);
//   - turning an OpenPGP authentication (sub)key into the SSH key gpg derives from it
//     ([FromOpenPGP], [OpenPGPComment]);
//   - the certificate authority's primitives: an Ed25519 CA key from a seed, signing
//     OpenSSH user certificates and checking them ([CA], [ParseUserCertificate]), and
//     OpenSSH key revocation lists, written and read ([KRL], [ParseKRL]).
//
// It does not own: which keys belong to whom, what counts as proven, or the challenge
// text (package identity); reading OpenPGP keys or checking that a subkey is a validly
// bound authentication subkey (package pgp, which hands over a verified
// packet.PublicKey); serving HTTP or running as sshd's AuthorizedKeysCommand (web and
// cmd/kith). It never talks to an SSH server or agent; the only private key it holds is a CA's,
// handed to it as a seed.
//
// Key types. Every type OpenSSH 9 reads is recognised: ssh-rsa, ssh-dss,
// ecdsa-sha2-nistp256/384/521, ssh-ed25519, sk-ecdsa-sha2-nistp256@openssh.com,
// sk-ssh-ed25519@openssh.com, and their -cert-v01@openssh.com certificates. DSA keys
// parse, fingerprint and render (golang.org/x/crypto/ssh no longer parses them, so this
// package carries a minimal DSA public key of its own), but an SSHSIG made with a DSA key
// is refused with [ErrUnsupportedKeyType]: OpenSSH has disabled DSA by default since 7.0
// and removed it in 10.0, so possession of one proves nothing sshd would accept. DSA
// certificates are refused outright. Types outside OpenSSH (x/crypto's ML-DSA drafts,
// OpenSSH's compiled-out XMSS) are refused with [ErrUnknownKeyType].
//
// Limits. An authorized_keys line is at most [MaxLineSize] bytes and an armored SSHSIG at
// most [MaxSignatureSize] bytes; both are far above anything OpenSSH writes (a 16384-bit RSA
// key, OpenSSH's maximum, is under 3 KiB in base64) and bound the work a hostile upload
// can cause.
//
// Errors are wrapped with context and carry sentinel errors (ErrXxx) for errors.Is, so a
// caller can tell a user why their key or signature was refused.
package ssh
