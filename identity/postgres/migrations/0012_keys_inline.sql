-- A typical key (1-6 KiB) stays whole in its table row rather than going
-- out of line to TOAST: PostgreSQL's default moves a row's packets out
-- (and tries to compress them, which signatures and key material defeat)
-- once the row passes about 2 KiB, and then every get reads a second
-- index and table, and every write writes them. Only rows larger than a
-- page still go out of line. Rows written before this keep their form
-- until they are next written.
ALTER TABLE keys SET (toast_tuple_target = 8160);
