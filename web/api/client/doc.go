// Package client is a Go client of Kith's HTTP API (package web/api), as
// Upspin's key/remote is of its key server: typed calls for what the kith
// command's client side does, with the checks it relies on.
//
//   - Identities: Claim, Add, Revoke and Lookup, signing the server's
//     statements with the tools people already have (Tools: ssh-keygen -Y
//     sign with a key file or the agent, gpg --clearsign); it reads a
//     private key only to hand it, with its certificate, to the ssh-agent
//     (AddCertificate, which ssh-add -t does too).
//   - SSH logins: AuthorizedKeys (sshd's AuthorizedKeysCommand), which
//     fails closed and falls back on a private cache only while the server
//     is unavailable, and with a log key prints only keys whose proofs are
//     in the transparency log; KnownHosts (ssh's KnownHostsCommand).
//   - The SSH certificate authority: Certificate, CAKeys and KRL, each
//     checked against the CA expected before anything is written; a
//     certificate goes into the ssh-agent with a lifetime that ends at its
//     expiry (AddCertificate).
//   - The evidence log: Log pages through it, LogMonitor checks signed
//     checkpoints against the last one verified (a state file).
//
// Every request has a timeout, reads a bounded answer and refuses a
// redirect from https to plain http. The package does not re-verify
// evidence records itself (identity/verify does) nor print anything: the
// kith command owns flags, output and exit codes.
package client
