-- Bulk tasks (task.go). Each statement returns the whole task row.

-- name: TaskCreate :one
INSERT INTO redrive_task (id, kind, state, filter, rate_limit, batch_size, total, created_by,
    max_id, created_at, updated_at, patch, canary, canary_phase, redelivery_target, target_queue, queue_globs)
VALUES (@id, @kind, 'pending', @filter, @rate_limit, @batch_size, @total, @created_by,
    (SELECT r.id FROM redrive_record_data r ORDER BY r.id DESC LIMIT 1), now(), now(), sqlc.narg(patch)::jsonb,
    sqlc.narg(canary)::jsonb, CASE WHEN sqlc.narg(canary)::jsonb IS NULL THEN NULL ELSE 'sample' END,
    sqlc.narg(redelivery_target)::text, sqlc.narg(target_queue)::text, sqlc.narg(queue_globs)::text[])
RETURNING *;

-- name: TaskGet :one
SELECT * FROM redrive_task WHERE id = @id;

-- name: TaskList :many
SELECT * FROM redrive_task ORDER BY id DESC LIMIT @max;

-- name: TaskListBefore :many
SELECT * FROM redrive_task WHERE id < @before_id ORDER BY id DESC LIMIT @max;

-- name: TaskListState :many
SELECT * FROM redrive_task WHERE state = @state ORDER BY id DESC LIMIT @max;

-- name: TaskListStateBefore :many
SELECT * FROM redrive_task WHERE state = @state AND id < @before_id ORDER BY id DESC LIMIT @max;

-- name: TaskCancel :one
UPDATE redrive_task SET cancel_requested = true, updated_at = now(),
    state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END,
    finished_at = CASE WHEN state = 'pending' THEN now() ELSE finished_at END
WHERE id = @id AND state IN ('pending', 'running')
RETURNING *;

-- name: TaskClaim :one
UPDATE redrive_task SET state = 'running', lease_owner = @owner, lease_token = @token,
    lease_until = now() + interval '1 millisecond' * sqlc.arg(lease_ms)::bigint, started_at = coalesce(started_at, now()), updated_at = now()
WHERE id = (SELECT id FROM redrive_task WHERE state IN ('pending', 'running')
    AND (lease_until IS NULL OR lease_until < now()) ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING *;

-- name: TaskAdvance :one
-- The progress of a batch. The total is raised to what the task dealt with when
-- more records came to match its filter than were counted at its creation.
UPDATE redrive_task SET processed = processed + @processed::bigint, cursor_id = coalesce(sqlc.narg(cursor_id)::uuid, cursor_id),
    skipped = skipped + @skipped::bigint, skipped_records = coalesce(sqlc.narg(skipped_records)::jsonb, skipped_records),
    skipped_reasons = coalesce(sqlc.narg(skipped_reasons)::jsonb, skipped_reasons),
    total = greatest(total, processed + skipped + @dealt::bigint),
    lease_until = now() + interval '1 millisecond' * sqlc.arg(lease_ms)::bigint, updated_at = now()
WHERE id = @id AND lease_token = @lease_token
RETURNING *;

-- name: TaskFinish :one
-- Ends a task. A completed one accounts for its whole total: the skipped
-- count and reasons it ends with are given (task.go, accountFor).
UPDATE redrive_task SET state = @state, finished_at = now(), updated_at = now(),
    lease_until = NULL, lease_owner = NULL, lease_token = NULL,
    skipped = coalesce(sqlc.narg(skipped)::bigint, skipped),
    skipped_reasons = coalesce(sqlc.narg(skipped_reasons)::jsonb, skipped_reasons),
    total = greatest(total, processed + coalesce(sqlc.narg(skipped)::bigint, skipped))
WHERE id = @id AND lease_token = @lease_token
RETURNING *;

-- name: TaskRelease :exec
UPDATE redrive_task SET lease_until = NULL, lease_owner = NULL, lease_token = NULL, updated_at = now()
WHERE id = @id AND lease_token = @lease_token;

-- name: TaskAddError :exec
UPDATE redrive_task SET errors = (
        SELECT coalesce(jsonb_agg(e ORDER BY i), '[]') FROM (
            SELECT x.e, x.i FROM jsonb_array_elements(errors || @error::jsonb) WITH ORDINALITY AS x(e, i)
            ORDER BY x.i DESC LIMIT @keep::int) y),
    updated_at = now()
WHERE id = @id AND lease_token = @lease_token;

-- name: TaskCancelRequested :one
SELECT cancel_requested FROM redrive_task WHERE id = @id;

-- Canaries (canary.go).

-- name: TaskSampleAdd :exec
-- The records a canary's sample batch just retried, as they were before it
-- (a retry keeps a record's errors and fingerprint), counted on the task.
WITH added AS (
    INSERT INTO redrive_task_sample (task_id, record_id, fingerprint, errors_len, last_error)
    SELECT @task_id::uuid, r.id, r.fingerprint, jsonb_array_length(r.errors), r.errors->-1
    FROM redrive_record_data r WHERE r.id = ANY(@ids::uuid[])
    ON CONFLICT DO NOTHING
    RETURNING 1)
UPDATE redrive_task SET canary_sampled = canary_sampled + (SELECT count(*) FROM added)
WHERE id = @task_id::uuid;

-- name: TaskCanaryUpdate :one
UPDATE redrive_task SET canary_phase = coalesce(sqlc.narg(phase)::text, canary_phase),
    canary_sampled_at = coalesce(sqlc.narg(sampled_at)::timestamptz, canary_sampled_at),
    canary_watch_until = coalesce(sqlc.narg(watch_until)::timestamptz, canary_watch_until),
    canary_report = coalesce(sqlc.narg(report)::jsonb, canary_report),
    lease_until = now() + interval '1 millisecond' * sqlc.arg(lease_ms)::bigint, updated_at = now()
WHERE id = @id AND lease_token = @lease_token
RETURNING *;

-- name: TaskSampleStates :many
-- Each record of a canary's sample as it is now: whether it waits for its
-- redelivery still (queued, or being produced), and, unless it was already
-- seen failing again, the first error it got since its retry (NULL: none).
SELECT s.record_id::text AS record_id, s.fingerprint, coalesce(s.outcome, '')::text AS outcome,
    (r.id IS NOT NULL)::bool AS present, coalesce(r.state, '')::text AS state,
    coalesce(r.completed_by, '')::text AS completed_by,
    coalesce(r.state = 'available' AND r.next_retry_at IS NOT NULL AND r.attempt = 0
        OR EXISTS (SELECT 1 FROM redrive_claim c WHERE c.token = r.claim_token), false)::bool AS queued,
    (CASE WHEN s.outcome IS NOT NULL OR r.id IS NULL THEN NULL
          WHEN r.errors->-1 IS DISTINCT FROM s.last_error THEN r.errors->(coalesce((
              SELECT max(x.i) FROM jsonb_array_elements(r.errors) WITH ORDINALITY AS x(e, i) WHERE x.e = s.last_error), 0))::int
          WHEN jsonb_array_length(r.errors) > s.errors_len THEN r.errors->s.errors_len
     END)::jsonb AS first_new,
    s.last_error
FROM redrive_task_sample s LEFT JOIN redrive_record r ON r.id = s.record_id
WHERE s.task_id = @task_id::uuid;
