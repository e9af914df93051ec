-- +goose Up
-- The queues a bulk task may touch: the globs of the queues its creator's
-- roles allow the task's action on (docs/security.md). NULL: every queue
-- (an API key, or a role on "*"). Each batch of the task is narrowed by it.
ALTER TABLE redrive_task ADD COLUMN IF NOT EXISTS queue_globs text[];

-- +goose Down
ALTER TABLE redrive_task DROP COLUMN IF EXISTS queue_globs;
