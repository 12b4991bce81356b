-- user_ids and subkeys rows are written and removed only with their key,
-- in the same transaction and under the key's row lock (insertKeys,
-- writeComponents, and the blocklist's removal, which deletes them
-- explicitly). The foreign keys re-checked that for every row with a
-- lookup of keys: about a tenth of a bulk load's time and ~40 us of each
-- upload's database time, for a guarantee the one writer already gives.
ALTER TABLE user_ids DROP CONSTRAINT IF EXISTS user_ids_key_ref_fkey;
ALTER TABLE subkeys DROP CONSTRAINT IF EXISTS subkeys_key_ref_fkey;
