// Package ratelimit is the one per-client request limit of Kith's HTTP
// frontends: identity challenges (web/api), mail requests (hkp/vks),
// uploads and lookups by email (hkp, hkp/vks, hkp/wkd, web) all count
// requests with a Limiter.
//
// One rule: a token bucket per client that holds a minute's worth of
// requests and refills at that rate, so that a client may make its
// minute's requests at once and then one every 60/N seconds. A client is
// its network as far as the server can tell one person's from
// another's: an IPv4 address, or an IPv6 /64 (the smallest network a
// provider hands one subscriber; keyed per address, a /64 would hold
// 2^64 budgets). The address is the request's RemoteAddr, which kith
// serve has already resolved to the client behind a trusted proxy
// (cmd/internal/clientaddr); this package reads no header.
//
// It owns counting and the Retry-After of a refusal. It does not own how
// a frontend words its 429 (JSON for the APIs, text for HKP), which
// requests count, or the settings (cmd/kith).
package ratelimit
