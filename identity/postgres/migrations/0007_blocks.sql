-- Keys, user IDs and certifications that must not be stored or served:
-- blocked by an operator (kith block) or deleted by the key's owner. Every
-- node reads these on every key write, so a block holds for uploads, recon
-- fetches and loads on all of them.
CREATE TABLE blocks (
    id               bigserial   PRIMARY KEY,
    fingerprint      bytea       NOT NULL,   -- the primary key's fingerprint
    -- NULL blocks the whole key; else the SHA-256 of the body of one user
    -- ID, user attribute or signature packet of that key.
    packet_hash      bytea,
    -- A whole-key block that keeps the key as a tombstone (primary key and
    -- its revocations) instead of removing it.
    keep_revocations boolean     NOT NULL DEFAULT false,
    origin           text        NOT NULL CHECK (origin IN ('operator', 'owner')),
    reason           text        NOT NULL,
    actor            text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX blocks_target ON blocks (fingerprint, coalesce(packet_hash, '\x'::bytea));

-- Every change to the blocks, with who made it, when and why; never
-- updated or deleted.
CREATE TABLE operator_actions (
    id          bigserial   PRIMARY KEY,
    action      text        NOT NULL,    -- 'block', 'unblock', 'owner-delete'
    fingerprint bytea       NOT NULL,
    packet_hash bytea,
    keep_revocations boolean NOT NULL DEFAULT false,
    reason      text        NOT NULL,
    actor       text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_actions_fingerprint ON operator_actions (fingerprint);

-- Digests that recon peers hold for keys Kith refused or stored only in
-- part (blocked, tombstoned, reduced by the policy): fetching them again
-- would change nothing, so no node asks for them again.
CREATE TABLE recon_refused (
    digest      bytea       PRIMARY KEY,
    fingerprint bytea,
    reason      text        NOT NULL,
    refused_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX recon_refused_fingerprint ON recon_refused (fingerprint);
