-- +goose Up
-- What a configuration change changed: the audit log keeps the thing
-- before and after the call (a topic's API config, a replay rule) for the
-- calls that change one; NULL where there was none, and for other calls.
ALTER TABLE redrive_audit ADD COLUMN IF NOT EXISTS before jsonb, ADD COLUMN IF NOT EXISTS after jsonb;

-- +goose Down
ALTER TABLE redrive_audit DROP COLUMN IF EXISTS before, DROP COLUMN IF EXISTS after;
