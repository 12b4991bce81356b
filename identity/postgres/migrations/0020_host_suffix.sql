-- Host names below a domain (identity.Store.HostsUnder, for
-- /.well-known/ssh-known-hosts): "ends with .DOMAIN" is a prefix of the
-- reversed handle, so a btree over it in byte order answers with a range.

CREATE INDEX IF NOT EXISTS identities_host_suffix ON identities ((reverse(handle) COLLATE "C")) WHERE handle LIKE 'host:%';
