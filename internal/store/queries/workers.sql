-- Workers over HTTP (workers.go): jobs published over HTTP and records of
-- pull-mode queues, fetched with a lease, then acked or nacked.

-- FetchJobs claims up to sqlc.arg(max) due records of the queues, in the
-- order the fetch names the queues (OJS worker protocol §6.3: the first has
-- the highest priority), then highest job priority first, then oldest due:
-- jobs published over HTTP by fetch_at, and the records of the pull-mode
-- queues among them by next_retry_at (which the scheduler leaves alone for
-- those queues). Each becomes available, attempt + 1, leased to the worker
-- for the fetch's lease (sqlc.narg(lease_ms)), else the job's own visibility
-- timeout, else sqlc.arg(default_lease_ms); a job with an execution timeout
-- gets its deadline, which the lease never passes. Rows other fetches hold
-- are skipped; the due condition is checked again on the locked row.
-- name: FetchJobs :many
WITH q AS (
    SELECT name, ord FROM unnest(sqlc.arg(queues)::text[]) WITH ORDINALITY AS q(name, ord)),
cand AS (
    SELECT c.id, c.due, c.priority, q.ord FROM q CROSS JOIN LATERAL (
        (SELECT l.id, l.fetch_at AS due, l.priority FROM redrive_lifecycle l
         WHERE l.queue = q.name AND l.fetch_at <= sqlc.arg(now)::timestamptz
         ORDER BY l.priority DESC, l.fetch_at LIMIT sqlc.arg(max))
        UNION ALL
        (SELECT l.id, l.next_retry_at AS due, l.priority FROM redrive_lifecycle l
         WHERE q.name = ANY(sqlc.arg(pull_queues)::text[]) AND l.queue = q.name AND l.next_retry_at <= sqlc.arg(now)::timestamptz
         ORDER BY l.next_retry_at LIMIT sqlc.arg(max))) c),
due AS (
    SELECT d.id, cand.due, cand.ord FROM redrive_lifecycle d JOIN cand ON cand.id = d.id
    WHERE (d.queue = ANY(sqlc.arg(pull_queues)::text[]) AND d.next_retry_at <= sqlc.arg(now)::timestamptz OR d.fetch_at <= sqlc.arg(now)::timestamptz)
    ORDER BY cand.ord, cand.priority DESC, cand.due, d.id LIMIT sqlc.arg(max) FOR UPDATE OF d SKIP LOCKED)
UPDATE redrive_lifecycle r
SET state = 'available', attempt = r.attempt + 1, next_retry_at = NULL, fetch_at = NULL,
    lease_ms = coalesce(sqlc.narg(lease_ms)::bigint, r.visibility_ms, sqlc.arg(default_lease_ms)::bigint),
    deadline_at = sqlc.arg(now)::timestamptz + interval '1 millisecond' * r.timeout_ms,
    lease_until = least(sqlc.arg(now)::timestamptz + interval '1 millisecond' * coalesce(sqlc.narg(lease_ms)::bigint, r.visibility_ms, sqlc.arg(default_lease_ms)::bigint),
        sqlc.arg(now)::timestamptz + interval '1 millisecond' * r.timeout_ms),
    worker_id = nullif(sqlc.arg(worker_id)::text, ''), redelivered_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now)::timestamptz,
    exhaustion = NULL, discarded_at = NULL, redelivery_failure = NULL,
    completed_at = NULL, completed_by = NULL, ack_due_at = NULL, unacknowledged_at = NULL
FROM due WHERE r.id = due.id
RETURNING r.id, due.due::timestamptz AS due_at, due.ord::bigint AS queue_rank, r.priority;

-- AckJob completes a record with the worker's result if its lease still
-- holds at sqlc.arg(now) (the caller's clock, not Postgres's): a lease that
-- passed before it is expired (ExpiredLeases), whether or not the sweep has
-- failed its attempt yet. A sqlc.arg(worker_id) other than '' must be the lease
-- holder's, when the fetch named one (OJS worker protocol §5.6).
-- name: AckJob :one
UPDATE redrive_lifecycle
SET state = 'completed', completed_at = sqlc.arg(now)::timestamptz, completed_by = 'ack', lease_until = NULL, worker_id = NULL,
    result = sqlc.narg(result)::jsonb, updated_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id)
    -- Not an index condition: the row is found by its id, never by a scan of
    -- every lease (the bench saw a plan read the lease index to filter id).
    AND lease_until + interval '0 seconds' >= sqlc.arg(now)::timestamptz
    AND (sqlc.arg(worker_id)::text = '' OR worker_id IS NULL OR worker_id = sqlc.arg(worker_id)::text)
RETURNING id;

-- JobLease is what a job's view adds to its record: its lease, when it is
-- due for a fetch, the result it was acked with, and the attributes of its
-- envelope Redrive keeps without acting on them.
-- name: JobLease :one
SELECT l.lease_until, l.worker_id, l.fetch_at, l.result, d.attributes, l.priority, l.visibility_ms, l.timeout_ms,
    l.lease_ms, l.deadline_at
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id WHERE l.id = sqlc.arg(id);

-- JobLeases is JobLease of many ids at once.
-- name: JobLeases :many
SELECT l.id, l.lease_until, l.worker_id, l.fetch_at, l.result, d.attributes, l.priority, l.visibility_ms, l.timeout_ms,
    l.lease_ms, l.deadline_at
FROM redrive_lifecycle l JOIN redrive_record_data d ON d.id = l.id WHERE l.id = ANY(sqlc.arg(ids)::uuid[]);

-- SetJobOptions stores the enqueue options a job published over HTTP acts on
-- (JobLease), in the transaction that inserts it.
-- name: SetJobOptions :exec
UPDATE redrive_lifecycle SET fetch_at = sqlc.arg(fetch_at)::timestamptz, priority = sqlc.arg(priority)::smallint,
    visibility_ms = sqlc.narg(visibility_ms)::bigint, timeout_ms = sqlc.narg(timeout_ms)::bigint
WHERE id = sqlc.arg(id);

-- JobExists says whether a record has id (a client-chosen job id taken).
-- name: JobExists :one
SELECT EXISTS (SELECT 1 FROM redrive_lifecycle WHERE id = sqlc.arg(id));

-- CancelJob cancels a job published over HTTP that is not in a terminal
-- state (OJS HTTP binding §9.4): discarded, exhaustion cancelled, its lease
-- (if a worker held it) and its fetch gone. It returns the job's state
-- before, as the OJS view names it (active when a worker held it).
-- name: CancelJob :one
WITH old AS (
    SELECT o.id, CASE WHEN o.lease_until IS NOT NULL THEN 'active'
        WHEN o.state = 'available' AND o.fetch_at > sqlc.arg(now)::timestamptz THEN 'scheduled' ELSE o.state END AS previous
    FROM redrive_lifecycle o WHERE o.id = sqlc.arg(id) AND o.format = 'ojs' AND o.state IN ('available', 'retryable')
    FOR UPDATE)
UPDATE redrive_lifecycle l SET state = 'discarded', exhaustion = 'cancelled', discarded_at = sqlc.arg(now)::timestamptz,
    updated_at = sqlc.arg(now)::timestamptz, fetch_at = NULL, next_retry_at = NULL, lease_until = NULL, worker_id = NULL,
    lease_ms = NULL, deadline_at = NULL
FROM old WHERE l.id = old.id
RETURNING old.previous::text AS previous;

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

-- UniqueClaim reads the claim on a uniqueness key, locked, with the OJS
-- state of the job holding it (empty when that job is gone).
-- name: UniqueClaim :one
SELECT u.job_id::text AS job_id, u.created_at,
    coalesce((SELECT CASE WHEN l.lease_until IS NOT NULL THEN 'active'
        WHEN l.state = 'available' AND l.fetch_at > sqlc.arg(now)::timestamptz THEN 'scheduled'
        WHEN l.state = 'discarded' AND l.exhaustion = 'cancelled' THEN 'cancelled'
        ELSE l.state END FROM redrive_lifecycle l WHERE l.id = u.job_id), '')::text AS holder_state
FROM redrive_job_unique u WHERE u.unique_key = sqlc.arg(unique_key) FOR UPDATE OF u;

-- ClaimNewUnique makes job_id the holder of a uniqueness key no job holds,
-- and says whether it did.
-- name: ClaimNewUnique :one
WITH c AS (INSERT INTO redrive_job_unique (unique_key, job_id, created_at)
    VALUES (sqlc.arg(unique_key), sqlc.arg(job_id)::uuid, sqlc.arg(created_at)::timestamptz)
    ON CONFLICT (unique_key) DO NOTHING RETURNING 1)
SELECT EXISTS (SELECT 1 FROM c);

-- ClaimUnique makes job_id the holder of a uniqueness key.
-- name: ClaimUnique :exec
UPDATE redrive_job_unique SET job_id = sqlc.arg(job_id)::uuid, created_at = sqlc.arg(created_at)::timestamptz
WHERE unique_key = sqlc.arg(unique_key);
