-- +goose NO TRANSACTION
-- +goose Up
-- A queue's records by time. Listing a queue since a time counts its
-- matching records (up to the list's cap of 10,000) besides reading the
-- page; with only (queue, id) and (created_at) the planner intersects both
-- bitmaps and visits a heap page per match, which at millions of records
-- spends the whole counting budget. Built CONCURRENTLY so that upgrading a
-- large table never blocks ingest; IF NOT EXISTS so that a build that was
-- interrupted can be run again (drop an INVALID leftover first: see
-- docs/operations.md).
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_queue_created ON redrive_record (queue, created_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_queue_created;
