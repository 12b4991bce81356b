-- Kith's first schema: OpenPGP keys, their user IDs and subkeys, and the
-- identity model (identities, factors, evidence). Nothing here depends on a
-- single Kith node: every node shares these tables, and change
-- notifications go through NOTIFY, not through node-local state.

-- A transferable public key as Kith serves it: the packets that passed the
-- policy, in canonical order, plus the description lookups need.
CREATE TABLE keys (
    id          bigserial PRIMARY KEY,
    fingerprint bytea       NOT NULL UNIQUE,  -- 20 bytes (v4) or 32 bytes (v6)
    version     smallint    NOT NULL,
    long_id     bigint      NOT NULL,         -- 64-bit key ID, as a signed bit pattern
    short_id    integer     NOT NULL,         -- 32-bit key ID, as a signed bit pattern
    digest      bytea       NOT NULL UNIQUE,  -- SKS MD5 digest of packets, the recon element
    algorithm   smallint    NOT NULL,
    bits        integer     NOT NULL DEFAULT 0,
    curve       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    revoked     boolean     NOT NULL DEFAULT false,
    packets     bytea       NOT NULL,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    modified_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX keys_long_id ON keys (long_id);
CREATE INDEX keys_short_id ON keys (short_id);
CREATE INDEX keys_modified_at ON keys (modified_at);
CREATE INDEX keys_first_seen ON keys (first_seen);

-- Subkeys resolve to their primary key in lookups by key ID and fingerprint.
CREATE TABLE subkeys (
    key_ref     bigint      NOT NULL REFERENCES keys (id) ON DELETE CASCADE,
    fingerprint bytea       NOT NULL,
    long_id     bigint      NOT NULL,
    short_id    integer     NOT NULL,
    algorithm   smallint    NOT NULL,
    bits        integer     NOT NULL DEFAULT 0,
    curve       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    revoked     boolean     NOT NULL DEFAULT false,
    can_sign         boolean NOT NULL DEFAULT false,
    can_encrypt      boolean NOT NULL DEFAULT false,
    can_authenticate boolean NOT NULL DEFAULT false,
    PRIMARY KEY (key_ref, fingerprint)
);
CREATE INDEX subkeys_fingerprint ON subkeys (fingerprint);
CREATE INDEX subkeys_long_id ON subkeys (long_id);
CREATE INDEX subkeys_short_id ON subkeys (short_id);

-- User IDs with their parsed, lower-cased email and a word index. uid is the
-- user ID as valid UTF-8 (the packet bytes themselves stay in keys.packets).
CREATE TABLE user_ids (
    key_ref    bigint      NOT NULL REFERENCES keys (id) ON DELETE CASCADE,
    position   integer     NOT NULL,
    uid        text        NOT NULL,
    email      text        NOT NULL DEFAULT '',
    created_at timestamptz,
    expires_at timestamptz,
    revoked    boolean     NOT NULL DEFAULT false,
    is_primary boolean     NOT NULL DEFAULT false,
    -- Words as SKS splits them: runs of letters and digits, so that
    -- "example" finds alice@example.org.
    words      tsvector    GENERATED ALWAYS AS
        (to_tsvector('simple', regexp_replace(lower(uid), '[^[:alnum:]]+', ' ', 'g'))) STORED,
    PRIMARY KEY (key_ref, position)
);
CREATE INDEX user_ids_email ON user_ids (email) WHERE email <> '';
CREATE INDEX user_ids_words ON user_ids USING gin (words);

-- An identity: a claimable handle and the factors linked to it.
CREATE TABLE identities (
    id         bigserial   PRIMARY KEY,
    handle     text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz
);

-- A factor is something that can be proven: a PGP primary key (hex
-- fingerprint), an SSH key (SHA256 fingerprint), an OIDC account
-- (issuer + subject), an email address.
CREATE TABLE factors (
    id         bigserial   PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('pgp', 'ssh', 'oidc', 'email')),
    value      text        NOT NULL,
    data       bytea,                -- e.g. the SSH public key blob
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, value)
);

-- The evidence log: append-only and hash-chained. Each record links two
-- factors, or a factor to an identity, says how (method) and keeps the exact
-- signed statement and signature (or ID token) so a third party can
-- re-verify it. Revocation is a new record naming the one it revokes.
CREATE TABLE evidence (
    seq          bigint      PRIMARY KEY,
    method       text        NOT NULL,
    identity_id  bigint      REFERENCES identities (id),
    from_factor  bigint      REFERENCES factors (id),
    to_factor    bigint      REFERENCES factors (id),
    statement    bytea       NOT NULL DEFAULT '',
    signature    bytea       NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    revokes      bigint      REFERENCES evidence (seq),
    prev_hash    bytea       NOT NULL,
    hash         bytea       NOT NULL UNIQUE
);
CREATE INDEX evidence_identity ON evidence (identity_id);
CREATE INDEX evidence_from ON evidence (from_factor);
CREATE INDEX evidence_to ON evidence (to_factor);
CREATE INDEX evidence_revokes ON evidence (revokes) WHERE revokes IS NOT NULL;
