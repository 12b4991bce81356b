-- Kith as a C2SP tlog-witness (identity/tlog/witness): per log origin, the
-- last checkpoint this server cosigned. A new one is cosigned only when it
-- is consistent with this row, and the row is updated in the same
-- transaction that checked it (under its row lock), so that nodes sharing
-- the database never cosign two views of one log.
CREATE TABLE IF NOT EXISTS witness_logs (
    origin      text        PRIMARY KEY,
    size        bigint      NOT NULL CHECK (size >= 0),
    root        bytea       NOT NULL CHECK (length(root) = 32),
    checkpoint  bytea       NOT NULL,
    cosigned_at timestamptz NOT NULL DEFAULT now()
);
