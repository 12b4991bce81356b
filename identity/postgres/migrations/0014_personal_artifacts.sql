-- What a record holds of a person is a private artifact (identity/
-- artifact.go): besides ID tokens and addresses, a statement that names a
-- person (a user ID packet, an email statement), a user ID's
-- self-signature, and the whole OpenPGP key a record carries (the row's
-- signer_key keeps the key without its user IDs). They are erased with
-- their identity, their key, or an operator's block.
ALTER TABLE evidence_artifacts DROP CONSTRAINT IF EXISTS evidence_artifacts_kind_check;
ALTER TABLE evidence_artifacts ADD CONSTRAINT evidence_artifacts_kind_check
    CHECK (kind IN ('id_token', 'email', 'statement', 'signature', 'pgp_key', 'oidc_subject'));

-- OpenID Connect accounts are recorded under a pseudonym (identity.
-- PseudonymousOIDCFactor): the commitment to their subject with one salt
-- per account, kept here until the identity naming the account is
-- deleted. account is the pseudonymous factor's value.
CREATE TABLE oidc_subjects (
    issuer  text  NOT NULL,
    subject text  NOT NULL,
    salt    bytea NOT NULL CHECK (length(salt) = 32),
    account text  NOT NULL UNIQUE,
    PRIMARY KEY (issuer, subject)
);
