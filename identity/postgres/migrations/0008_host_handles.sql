-- Host identities (issue 15): a host's SSH host keys are published under
-- the handle "host:NAME", NAME a DNS name (identity.ParseIdentityHandle
-- has the exact rules; this check is the store's backstop).

ALTER TABLE identities DROP CONSTRAINT identities_handle_check;
ALTER TABLE identities ADD CONSTRAINT identities_handle_check CHECK (
    (handle ~ '^[a-z0-9]([a-z0-9-]{0,37}[a-z0-9])?$' AND length(handle) >= 2)
    OR (handle ~ '^host:[a-z0-9]([a-z0-9.-]*[a-z0-9])?$' AND length(handle) <= 258)
);
