-- The search indexes a bulk load into an empty store dropped, to build
-- them once after its data instead of row by row (deferred.go): each
-- row is written in the transaction that drops its index, from the
-- catalog's own definition, and removed in the one that builds it again,
-- so that a load killed in between leaves the store able to heal itself:
-- opening or migrating the store builds what is recorded here.
CREATE TABLE IF NOT EXISTS deferred_indexes (
    name       text PRIMARY KEY, -- the index, schema-qualified
    table_name text NOT NULL,    -- its table, schema-qualified
    statement  text NOT NULL,    -- the CREATE INDEX pg_get_indexdef gave
    attach     text              -- what makes the index its table's constraint again, if it was one
);
