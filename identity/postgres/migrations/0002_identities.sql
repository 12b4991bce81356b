-- The identity model as issue 6 settles it: identities, factors, the
-- hash-chained evidence log with its head row, and challenges. The first
-- draft of these tables in 0001 held no data anywhere; they are replaced.

DROP TABLE evidence;
DROP TABLE factors;
DROP TABLE identities;

-- An identity: a claimable handle. Its factors follow from the evidence.
CREATE TABLE identities (
    id         bigserial   PRIMARY KEY,
    handle     text        NOT NULL UNIQUE
        CHECK (handle ~ '^[a-z0-9]([a-z0-9-]{0,37}[a-z0-9])?$' AND length(handle) >= 2),
    created_at timestamptz NOT NULL
);

-- A factor: a PGP primary key (upper-case hex fingerprint), an SSH key
-- (SHA256 fingerprint; data is the key blob), an OIDC account ("issuer
-- subject"), an email address. Rows are never changed once written.
CREATE TABLE factors (
    id    bigserial PRIMARY KEY,
    kind  text      NOT NULL CHECK (kind IN ('pgp', 'ssh', 'oidc', 'email')),
    value text      NOT NULL,
    data  bytea     NOT NULL DEFAULT '',
    UNIQUE (kind, value)
);

-- The evidence log: append-only and hash-chained (see identity.Evidence
-- for the canonical encoding that hash covers). seq has no gaps: appends
-- take it from evidence_head under that row's lock.
CREATE TABLE evidence (
    seq         bigint      PRIMARY KEY CHECK (seq > 0),
    method      text        NOT NULL,
    purpose     text        NOT NULL DEFAULT '',
    identity_id bigint      REFERENCES identities (id),
    handle      text        NOT NULL DEFAULT '',
    from_factor bigint      NOT NULL REFERENCES factors (id),
    to_factor   bigint      REFERENCES factors (id),
    label       text        NOT NULL DEFAULT '',
    statement   bytea       NOT NULL DEFAULT '',
    signature   bytea       NOT NULL DEFAULT '',
    signer_key  bytea       NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    revokes     bigint      REFERENCES evidence (seq),
    prev_hash   bytea       NOT NULL,
    hash        bytea       NOT NULL UNIQUE
);
CREATE INDEX evidence_identity ON evidence (identity_id, seq) WHERE identity_id IS NOT NULL;
CREATE INDEX evidence_from ON evidence (from_factor, seq);
CREATE INDEX evidence_to ON evidence (to_factor, seq) WHERE to_factor IS NOT NULL;
CREATE INDEX evidence_key_links ON evidence (from_factor, seq) WHERE identity_id IS NULL;

-- The log's head: its one row is locked by every append, so that appends
-- from all nodes are serialised and the chain never forks.
CREATE TABLE evidence_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq       bigint  NOT NULL,
    hash      bytea   NOT NULL
);
INSERT INTO evidence_head (seq, hash) VALUES (0, '\x0000000000000000000000000000000000000000000000000000000000000000');

-- Issued challenges; a nonce is answered at most once (used_at), in the
-- transaction that appends its evidence.
CREATE TABLE challenges (
    nonce      bytea       PRIMARY KEY,
    purpose    text        NOT NULL,
    handle     text        NOT NULL,
    statement  bytea       NOT NULL,
    issued_at  timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX challenges_expires_at ON challenges (expires_at);
