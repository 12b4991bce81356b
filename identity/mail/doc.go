// Package mail sends the few mails Kith writes (the links that verify or
// withdraw an email address): over SMTP with net/smtp, or, with no mail
// server configured, into an outbox directory as .eml files that a
// newcomer can open. It owns composing a plain-text message safely (no
// header injection) and nothing about what the mails say.
package mail
