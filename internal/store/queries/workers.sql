-- Workers over HTTP (workers.go): jobs published over HTTP and records of
-- pull-mode queues, fetched with a lease, then acked or nacked.

-- FetchJobs claims up to sqlc.arg(max) due records of the queues, oldest due first:
-- records of the pull-mode queues among them by next_retry_at (which the
-- scheduler leaves alone for those queues), and jobs published over HTTP by
-- fetch_at. Each becomes available, attempt + 1, leased to the worker until
-- sqlc.arg(now) + sqlc.arg(lease_ms). Rows other fetches hold are skipped; the due condition is
-- checked again on the locked row.
-- name: FetchJobs :many
WITH cand AS (
    (SELECT c.id, c.next_retry_at AS due FROM redrive_lifecycle c
     WHERE c.queue = ANY(sqlc.arg(pull_queues)::text[]) AND c.next_retry_at <= sqlc.arg(now)::timestamptz
     ORDER BY c.next_retry_at LIMIT sqlc.arg(max))
    UNION ALL
    (SELECT c.id, c.fetch_at AS due FROM redrive_lifecycle c
     WHERE c.queue = ANY(sqlc.arg(queues)::text[]) AND c.fetch_at <= sqlc.arg(now)::timestamptz
     ORDER BY c.fetch_at LIMIT sqlc.arg(max))),
due AS (
    SELECT d.id, cand.due FROM redrive_lifecycle d JOIN cand ON cand.id = d.id
    WHERE (d.queue = ANY(sqlc.arg(pull_queues)::text[]) AND d.next_retry_at <= sqlc.arg(now)::timestamptz OR d.fetch_at <= sqlc.arg(now)::timestamptz)
    ORDER BY cand.due, d.id LIMIT sqlc.arg(max) FOR UPDATE OF d SKIP LOCKED)
UPDATE redrive_lifecycle r
SET state = 'available', attempt = r.attempt + 1, next_retry_at = NULL, fetch_at = NULL,
    lease_until = sqlc.arg(now)::timestamptz + interval '1 millisecond' * sqlc.arg(lease_ms)::bigint,
    worker_id = nullif(sqlc.arg(worker_id)::text, ''), redelivered_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now)::timestamptz,
    exhaustion = NULL, discarded_at = NULL, redelivery_failure = NULL,
    completed_at = NULL, completed_by = NULL, ack_due_at = NULL, unacknowledged_at = NULL
FROM due WHERE r.id = due.id
RETURNING r.id, due.due::timestamptz AS due_at;

-- AckJob completes a record with the worker's result if its lease still
-- holds at sqlc.arg(now) (the caller's clock, not Postgres's): a lease that
-- passed before it is expired (ExpiredLeases), whether or not the sweep has
-- failed its attempt yet. A sqlc.arg(worker_id) other than '' must be the lease
-- holder's, when the fetch named one (OJS worker protocol §5.6).
-- name: AckJob :one
UPDATE redrive_lifecycle
SET state = 'completed', completed_at = sqlc.arg(now)::timestamptz, completed_by = 'ack', lease_until = NULL, worker_id = NULL,
    result = sqlc.narg(result)::jsonb, updated_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND lease_until >= sqlc.arg(now)::timestamptz
    AND (sqlc.arg(worker_id)::text = '' OR worker_id IS NULL OR worker_id = sqlc.arg(worker_id)::text)
RETURNING id;

-- JobLease is what a job's view adds to its record: its lease, when it is
-- due for a fetch, the result it was acked with, and the attributes of its
-- envelope Redrive keeps without acting on them.
-- name: JobLease :one
SELECT l.lease_until, l.worker_id, l.fetch_at, l.result, d.attributes
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id WHERE l.id = sqlc.arg(id);

-- SetJobAttributes stores the attributes a job published over HTTP keeps
-- (JobLease), in the transaction that inserts it.
-- name: SetJobAttributes :exec
UPDATE redrive_record_data SET attributes = sqlc.narg(attributes)::jsonb WHERE id = sqlc.arg(id);

-- ExpiredLeases lists records whose lease passed before sqlc.arg(now), oldest first.
-- name: ExpiredLeases :many
SELECT id FROM redrive_lifecycle WHERE lease_until < sqlc.arg(now)::timestamptz ORDER BY lease_until LIMIT sqlc.arg(max);

-- NextJobSeq numbers a job published over HTTP (its dlq_offset).
-- name: NextJobSeq :one
SELECT nextval('redrive_ojs_job_seq')::bigint;
