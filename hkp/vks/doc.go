// Package vks serves the Verifying Keyserver API v1 as keys.openpgp.org
// documents it (what Thunderbird, OpenKeychain and sq speak): lookups by
// fingerprint, key ID and email, upload, and requests to verify an
// address by mail; plus a withdraw request (a Kith extension). The page
// a mailed link opens is package web's; the mails are package
// maillink's.
//
// Keys served here carry only their verified addresses' user IDs, and
// by-email answers only for verified addresses: an address in a user ID
// is a claim anyone can make, a followed mail link is the proof. The
// package owns the HTTP side; the tokens, the rate limit per address and
// the evidence records are identity.Service's, the mail transport
// identity/mail's.
package vks
