-- Bulk tasks (task.go). Each statement returns the whole task row.

-- name: TaskCreate :one
INSERT INTO redrive_task (id, kind, state, filter, rate_limit, batch_size, total, created_by,
    max_id, created_at, updated_at, patch, redelivery_target)
VALUES (@id, @kind, 'pending', @filter, @rate_limit, @batch_size, @total, @created_by,
    (SELECT r.id FROM redrive_record r ORDER BY r.id DESC LIMIT 1), now(), now(), sqlc.narg(patch)::jsonb,
    sqlc.narg(redelivery_target)::text)
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
UPDATE redrive_task SET processed = processed + @processed::bigint, cursor_id = coalesce(sqlc.narg(cursor_id)::uuid, cursor_id),
    skipped = skipped + @skipped::bigint, skipped_records = coalesce(sqlc.narg(skipped_records)::jsonb, skipped_records),
    lease_until = now() + interval '1 millisecond' * sqlc.arg(lease_ms)::bigint, updated_at = now()
WHERE id = @id AND lease_token = @lease_token
RETURNING *;

-- name: TaskFinish :one
UPDATE redrive_task SET state = @state, finished_at = now(), updated_at = now(),
    lease_until = NULL, lease_owner = NULL, lease_token = NULL
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
