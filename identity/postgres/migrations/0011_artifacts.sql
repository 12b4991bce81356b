-- Private artifacts (identity.Artifact): the ID tokens and
-- provider-verified email addresses that records commit to instead of
-- holding them, kept beside the log and erased when their identity is
-- deleted. evidence.commitments holds the record's commitments (see
-- encodeCommitments), which its hash covers; evidence.signature is empty
-- for a record whose ID token is committed to.
ALTER TABLE evidence ADD COLUMN commitments bytea NOT NULL DEFAULT ''::bytea;

CREATE TABLE evidence_artifacts (
    seq   bigint NOT NULL REFERENCES evidence (seq),
    kind  text   NOT NULL CHECK (kind IN ('id_token', 'email')),
    salt  bytea  NOT NULL CHECK (length(salt) = 32),
    value bytea  NOT NULL,
    PRIMARY KEY (seq, kind)
);
