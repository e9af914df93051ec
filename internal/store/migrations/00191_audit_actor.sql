-- +goose Up
-- Who made each audited call: the kind of caller (key, oidc, anonymous)
-- and, for a person signed in through the identity provider, the token's
-- subject and email. key_name keeps the one name shown (a key's name, a
-- person's email or subject). Entries written before are kind ''.
ALTER TABLE redrive_audit ADD COLUMN IF NOT EXISTS actor_kind text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS actor_subject text, ADD COLUMN IF NOT EXISTS actor_email text;

-- +goose Down
ALTER TABLE redrive_audit DROP COLUMN IF EXISTS actor_kind, DROP COLUMN IF EXISTS actor_subject,
    DROP COLUMN IF EXISTS actor_email;
