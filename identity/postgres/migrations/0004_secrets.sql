-- Server secrets every node must share, such as the key that seals login
-- cookies: kept in the database so that a request may reach any node.
CREATE TABLE secrets (
    name       text        PRIMARY KEY,
    value      bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
