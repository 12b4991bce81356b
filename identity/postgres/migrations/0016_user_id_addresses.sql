-- user_ids.email is the address pgp.UserIDAddress reads from the user ID,
-- '' when it carries none. Before this version an ambiguous user ID
-- ("CEO <ceo@example.org> <mallory@example.org>") kept the address of its
-- last <...>, which gpg does not read. The SQL cannot run that parser:
-- Migrate re-reads every stored address right after this migration, in
-- the same transaction (rereadUserIDAddresses, migrate.go).
COMMENT ON COLUMN user_ids.email IS 'the address pgp.UserIDAddress reads from uid; empty when it carries none';
