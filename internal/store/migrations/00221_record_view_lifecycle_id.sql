-- +goose Up
-- The lifecycle row's id, beside the wide row's (the view's id): a statement
-- that bounds the id of the records it reads (a bulk task's batch after its
-- cursor) bounds both sides with it. Through id alone the lifecycle side was
-- read from the first row of its primary key every batch, filtering out
-- every record earlier batches had taken: a bulk retry slowed down as it
-- went (about 350 records/s a third of the way through a million).
CREATE OR REPLACE VIEW redrive_record AS
SELECT d.id, d.queue, d.type, l.state, l.exhaustion, l.attempt, d.max_attempts,
    d.source_partition, d.source_offset, d.source_timestamp, d.source_group,
    d.dlq_topic, d.dlq_partition, d.dlq_offset, d.format, d.key, d.value, d.headers, d.payload,
    d.error_type, d.errors, d.retry, d.meta, d.created_at, l.enqueued_at, l.next_retry_at,
    l.discarded_at, l.completed_at, l.updated_at, l.redelivered_at, d.redelivery, l.archived_at,
    l.claim_token, l.redelivery_failure, l.archive_state, l.archive_reason, l.archive_failure,
    l.archive_retry_at, l.archive_token, d.dlq_timestamp, d.fingerprint, d.payload_omitted, d.failed_at,
    l.completed_by, l.ack_due_at, l.unacknowledged_at, d.value_schema, d.key_schema, d.key_payload,
    d.decode_error, d.decode_pending, l.fetch_at, l.lease_until, l.worker_id, l.result,
    l.queue AS lifecycle_queue, l.id AS lifecycle_id
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id;

-- +goose Down
DROP VIEW redrive_record;
CREATE VIEW redrive_record AS
SELECT d.id, d.queue, d.type, l.state, l.exhaustion, l.attempt, d.max_attempts,
    d.source_partition, d.source_offset, d.source_timestamp, d.source_group,
    d.dlq_topic, d.dlq_partition, d.dlq_offset, d.format, d.key, d.value, d.headers, d.payload,
    d.error_type, d.errors, d.retry, d.meta, d.created_at, l.enqueued_at, l.next_retry_at,
    l.discarded_at, l.completed_at, l.updated_at, l.redelivered_at, d.redelivery, l.archived_at,
    l.claim_token, l.redelivery_failure, l.archive_state, l.archive_reason, l.archive_failure,
    l.archive_retry_at, l.archive_token, d.dlq_timestamp, d.fingerprint, d.payload_omitted, d.failed_at,
    l.completed_by, l.ack_due_at, l.unacknowledged_at, d.value_schema, d.key_schema, d.key_payload,
    d.decode_error, d.decode_pending, l.fetch_at, l.lease_until, l.worker_id, l.result,
    l.queue AS lifecycle_queue
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id;
