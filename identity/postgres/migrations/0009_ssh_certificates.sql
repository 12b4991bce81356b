-- SSH certificates (identity/certificate.go): the revocation list reads the
-- ssh.certificate records still within their validity, and issuance looks
-- up the ssh.ca-key record of the CA's key; both by method.
CREATE INDEX evidence_method_expires ON evidence (method, expires_at);
