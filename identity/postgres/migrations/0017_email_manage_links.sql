-- Mailed links may also open a key's manage page (identity.EmailManage):
-- such a link records nothing when followed, and is used up like the
-- others.
ALTER TABLE email_tokens DROP CONSTRAINT email_tokens_action_check;
ALTER TABLE email_tokens ADD CONSTRAINT email_tokens_action_check CHECK (action IN ('verify', 'withdraw', 'manage'));
