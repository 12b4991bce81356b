// Package v2 serves HKP v2, the versioned routes of the OpenPGP HTTP
// Keyserver Protocol (draft-ietf-openpgp-hkp, successor of
// draft-gallagher-openpgp-hkp), under /pks/v2/:
//
//   - GET certs/by-vfingerprint/{version}/{fingerprint}: the certificate
//     (key) with that versioned fingerprint (also the one-segment form
//     {version}{fingerprint} of the earlier drafts);
//   - GET certs/by-keyid/{keyid}: the v4 certificates with that 64-bit
//     key ID;
//   - GET certs/by-identity/{identity}: the certificates with a user ID
//     whose address, or whole text, is the identity;
//   - GET index/{identity}: the same, as the JSON index, each user ID
//     with its confidence;
//   - GET canonical/{identity}: the authoritative answer: only keys whose
//     address is verified by a followed mail link, as VKS by-email;
//   - GET prefixlog/{date}: the fingerprint prefix log, which prefixes
//     of primary fingerprints changed on a day (prefixlog.go's PrefixLog,
//     set as Options.PrefixLog);
//   - POST certs: submission, through the one upload path;
//   - POST sendtoken and PUT canonical/{identity} (token.go, with
//     Options.Emails and Options.Mailer): sendtoken mails the verify
//     link of one address of a stored key, the mail VKS and the pages
//     send; its token, presented with PUT canonical as a bearer token
//     beside the key, is following that link, and makes the key
//     authoritative for the address;
//   - OPTIONS on every route and category (feature detection and CORS
//     preflights); 403 for a category without an identifier; 501 for the
//     categories and operations Kith does not serve (sendtoken and PUT
//     canonical without Options.Emails, prefixlog unless
//     Options.PrefixLog is set).
//
// The legacy /pks/lookup and /pks/add, which gpg speaks, are package
// hkp's and unchanged.
//
// Confidence (confidence.go) is where Kith knows more than a keyserver
// that only stores keys: a user ID's confidence comes from the evidence.
//
// It owns the v2 routes' paths, status codes, content types and JSON, and
// their CORS: every v2 answer may be read from a page of any origin, never
// with credentials (cors.go's Handle, which any route added to this
// package uses too).
//
// It does not own: which mailed links may go out and what following one
// records (identity.Service's RequestEmail and ConfirmEmail, reached as
// Emails), the mails' text and links (identity/maillink); the upload
// path, its admission, limits and budgets (identity/keys.Service, reached
// as a keys.Uploader); which addresses
// are verified by mail (identity's email.verified records, reached as an
// identity.VerifiedEmailReader) or corroborated by a provider
// (identity.CorroboratedEmails, reached as Corroborations); the
// per-client limiters (identity/ratelimit, shared by the wiring with the
// other protocols); OpenPGP parsing and user-ID addresses (pgp); when
// each key changed and how long a prefix is (identity/keys.ChangeLog and
// PrefixDigits); the refresh client (hkp/refresh).
package v2
