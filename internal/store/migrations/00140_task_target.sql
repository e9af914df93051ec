-- +goose Up
-- A bulk retry may say who its redeliveries are for (docs/redelivery.md,
-- Targeting): 'group' (only the consumer group that failed each record) or
-- 'topic' (every group); NULL keeps each record's policy.
ALTER TABLE redrive_task ADD COLUMN redelivery_target text
    CHECK (redelivery_target IN ('group', 'topic'));

-- +goose Down
ALTER TABLE redrive_task DROP COLUMN redelivery_target;
