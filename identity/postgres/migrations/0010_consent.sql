-- Consent logins (identity.Evidence.Consent): the salt an ID token's
-- nonce commits with, kept in the record that token authorises. Empty in
-- every record made before, and in every record that is not a consent.
ALTER TABLE evidence ADD COLUMN consent bytea NOT NULL DEFAULT ''::bytea;
