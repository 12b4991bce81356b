-- Mailed links for email verification and withdrawal (identity/email.go):
-- only the SHA-256 of each token is kept, so a copy of the database
-- follows no link. A link is used at most once (used_at), in the
-- transaction that appends its email.verified record.
CREATE TABLE email_tokens (
    token_hash  bytea       PRIMARY KEY,
    action      text        NOT NULL CHECK (action IN ('verify', 'withdraw')),
    fingerprint text        NOT NULL,
    email       text        NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
-- The per-address window: is there a link for this address, key and
-- action younger than the window?
CREATE INDEX email_tokens_email ON email_tokens (email, fingerprint, action, created_at);
CREATE INDEX email_tokens_expires_at ON email_tokens (expires_at);
