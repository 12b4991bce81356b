-- The transparency log (identity/tlog): the stored hashes of the Merkle
-- tree over the evidence records (indexed as x/mod's tlog numbers them),
-- and the latest signed checkpoint, whose row is the tree's lock. The tree
-- is filled from the evidence log after commits, so existing records are
-- integrated, in order, by the first integration after this migration.
CREATE TABLE tlog_hashes (
    idx  bigint PRIMARY KEY CHECK (idx >= 0),
    hash bytea  NOT NULL CHECK (length(hash) = 32)
);

CREATE TABLE tlog_head (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    size       bigint      NOT NULL CHECK (size >= 0),
    checkpoint bytea,
    signed_at  timestamptz
);
INSERT INTO tlog_head (size) VALUES (0);

-- oidc.jwks records come from the provider whose key they publish.
ALTER TABLE factors DROP CONSTRAINT factors_kind_check;
ALTER TABLE factors ADD CONSTRAINT factors_kind_check CHECK (kind IN ('pgp', 'ssh', 'oidc', 'email', 'oidc-provider'));
