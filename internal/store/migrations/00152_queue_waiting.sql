-- +goose NO TRANSACTION
-- +goose Up
-- overflow_policy drop_oldest discards a topic's oldest retryable records:
-- this index finds them without walking the topic's finished records.
-- Built CONCURRENTLY so that upgrading a large table never blocks ingest.
CREATE INDEX CONCURRENTLY IF NOT EXISTS redrive_record_waiting ON redrive_record (queue, id) WHERE state = 'retryable';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS redrive_record_waiting;
