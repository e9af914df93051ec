-- +goose Up
-- A bulk retry may carry an RFC 6902 JSON Patch applied to each record's
-- payload (records/patch.go); the records it fails on are skipped (the
-- existing skipped counter) and the first ones listed here.
ALTER TABLE redrive_task
    ADD COLUMN patch jsonb,
    ADD COLUMN skipped_records jsonb NOT NULL DEFAULT '[]'; -- [{"id","message"}], the first 100

-- +goose Down
ALTER TABLE redrive_task DROP COLUMN skipped_records, DROP COLUMN patch;
