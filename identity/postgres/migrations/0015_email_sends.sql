-- The mails each address received, for the per-recipient cap
-- (identity.ServiceOptions.MailsPerAddress), shared by every node: one
-- row per mailed link, under the SHA-256 of the address
-- (identity.HashRecipient), never the address. A row outlives its link
-- (a deleted key's mails still count) and goes when it is past the cap's
-- window, or with its link when the mail could not be sent (token_hash).
-- Server-private state: nothing here enters the log.
CREATE TABLE email_sends (
    token_hash bytea       PRIMARY KEY,
    recipient  bytea       NOT NULL CHECK (length(recipient) = 32),
    sent_at    timestamptz NOT NULL
);
-- How many mails did this address receive since the window began?
CREATE INDEX email_sends_recipient ON email_sends (recipient, sent_at);
-- Rows past the window go.
CREATE INDEX email_sends_sent_at ON email_sends (sent_at);
