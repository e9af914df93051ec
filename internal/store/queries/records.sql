-- Single records (retry.go, preview.go, sort.go).

-- name: RecordDelete :one
-- A record is deleted whole: its lifecycle (which the statistics count), its
-- DLQ coordinates and its wide row, in one statement.
WITH l AS (DELETE FROM redrive_lifecycle x WHERE x.id = @id RETURNING x.id),
c AS (DELETE FROM redrive_record_coord c USING l WHERE c.id = l.id)
DELETE FROM redrive_record_data d USING l WHERE d.id = l.id
RETURNING d.id, d.queue, d.type, substring(d.key from 1 for 128)::bytea AS key_prefix, coalesce(octet_length(d.key), -1)::int AS key_size;

-- name: RecordInFlight :one
SELECT EXISTS (SELECT 1 FROM redrive_claim c WHERE c.token = r.claim_token) AS in_flight
FROM redrive_lifecycle r WHERE r.id = @id;

-- name: RecordsRedelivered :one
SELECT count(*) FROM redrive_lifecycle
WHERE id = ANY(@ids::uuid[]) AND next_retry_at IS NULL AND redelivered_at IS NOT NULL;

-- name: RecordKey :one
-- A record's key (RecordValue: its value) with its queue, which says what
-- the caller may see of it: GET /dead-letter/{id}/raw reads nothing else.
SELECT queue, key, (key IS NULL)::bool AS null FROM redrive_record_data WHERE id = @id;

-- name: RecordValue :one
SELECT queue, value, (value IS NULL)::bool AS null FROM redrive_record_data WHERE id = @id;

-- name: FillFailedAt :one
WITH batch AS (
    SELECT b.id, b.failed_at IS NULL AS missing FROM redrive_record_data b
    WHERE b.id > @after_id::uuid ORDER BY b.id LIMIT @max),
filled AS (
    UPDATE redrive_record_data r
    SET failed_at = coalesce(nullif(r.errors->-1->>'occurred_at', '0001-01-01T00:00:00Z')::timestamptz, r.created_at)
    FROM batch WHERE r.id = batch.id AND batch.missing AND r.failed_at IS NULL
    RETURNING 1)
SELECT coalesce((SELECT max(batch.id::text) FROM batch), '')::text AS last_id, (SELECT count(*) FROM filled)::int AS filled;


-- name: RecordGet :one
-- The columns are readColumns' (columns.go), in order (next_retry_at
-- includes a job's fetch_at, as readSelect reads it): scanRecord reads every
-- listing into this query's row (TestReadColumnsAreTheRecordRow).
SELECT id, queue, type, state, exhaustion, attempt, max_attempts, source_partition, source_offset, source_timestamp, source_group, dlq_topic, dlq_partition, dlq_offset, dlq_timestamp, format, key, value, headers, errors, retry, meta, created_at, enqueued_at, coalesce(next_retry_at, fetch_at) AS next_retry_at, discarded_at, completed_at, updated_at, archive_state, fingerprint, payload_omitted, value_schema, key_schema, key_payload, decode_error, decode_pending, redelivered_at, redelivery, archived_at, redelivery_failure, archive_reason, archive_failure, completed_by, ack_due_at, unacknowledged_at,
    (CASE WHEN value_schema IS NOT NULL THEN payload END)::jsonb AS payload,
    -- claimPriorExpr("r") (inflight.go), which sqlc cannot call.
    (SELECT jsonb_build_object('state', c.prior_states[p.i], 'redelivered_at', c.prior_redelivered_at[p.i])
        FROM redrive_claim c CROSS JOIN LATERAL array_position(c.ids, r.id) AS p(i)
        WHERE c.token = r.claim_token)::jsonb AS claim_prior
FROM redrive_record r WHERE r.id = @id;

-- RecordGetMany is RecordGet of many ids at once (a fetch reads its jobs
-- in one statement).
-- name: RecordGetMany :many
-- The columns are readColumns' (columns.go), in order (next_retry_at
-- includes a job's fetch_at, as readSelect reads it): scanRecord reads every
-- listing into this query's row (TestReadColumnsAreTheRecordRow).
SELECT id, queue, type, state, exhaustion, attempt, max_attempts, source_partition, source_offset, source_timestamp, source_group, dlq_topic, dlq_partition, dlq_offset, dlq_timestamp, format, key, value, headers, errors, retry, meta, created_at, enqueued_at, coalesce(next_retry_at, fetch_at) AS next_retry_at, discarded_at, completed_at, updated_at, archive_state, fingerprint, payload_omitted, value_schema, key_schema, key_payload, decode_error, decode_pending, redelivered_at, redelivery, archived_at, redelivery_failure, archive_reason, archive_failure, completed_by, ack_due_at, unacknowledged_at,
    (CASE WHEN value_schema IS NOT NULL THEN payload END)::jsonb AS payload,
    -- claimPriorExpr("r") (inflight.go), which sqlc cannot call.
    (SELECT jsonb_build_object('state', c.prior_states[p.i], 'redelivered_at', c.prior_redelivered_at[p.i])
        FROM redrive_claim c CROSS JOIN LATERAL array_position(c.ids, r.id) AS p(i)
        WHERE c.token = r.claim_token)::jsonb AS claim_prior
FROM redrive_record r WHERE r.id = ANY(@ids::uuid[]);
