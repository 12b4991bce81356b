-- Web login sessions (package web/session). A row is keyed by the SHA-256
-- of the session token; the token lives only in the browser's cookie. A
-- pending session (a first login that has not chosen a handle) has no
-- identity. Rows live in the shared database so that any node can serve a
-- session's next request.
CREATE TABLE sessions (
    token_hash   bytea       PRIMARY KEY CHECK (length(token_hash) = 32),
    identity_id  bigint      REFERENCES identities (id) ON DELETE CASCADE,
    account      text        NOT NULL,
    provider     text        NOT NULL,
    login        bytea       NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_identity ON sessions (identity_id) WHERE identity_id IS NOT NULL;
CREATE INDEX sessions_expires_at ON sessions (expires_at);
