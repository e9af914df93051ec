-- The worker registry (worker_registry.go): workers' heartbeats, what an
-- operator tells them, and the leases they hold.

-- WorkerHeartbeat records a heartbeat of worker sqlc.arg(id) at sqlc.arg(now) and extends the
-- leases it still holds among sqlc.arg(extend), in one statement:
-- - forgotten: up to 100 workers not seen since sqlc.arg(forget_before) are
--   forgotten (rows another heartbeat is forgetting are skipped);
-- - w: the worker is added, or updated with what this heartbeat reports (a
--   field it leaves out keeps its value; queues and labels too);
-- - ext: each listed job leased to this worker (or to an anonymous fetch)
--   whose lease still holds at sqlc.arg(now) is held until now +
--   sqlc.narg(extend_ms) (when the heartbeat names a visibility timeout)
--   or + the length of its lease (lease_ms; visibility_ms, then the fetch's
--   default of 30 s, until the fetch sets it), never past its execution
--   deadline (deadline_at) and never shortened. A lease already there
--   counts as extended (reset), unless its deadline holds it there. The
--   rows are locked in id
--   order, so that two statements locking several never deadlock on them.
-- It returns the worker's directive and reported state, and the jobs
-- extended (in id order: their queues, types, attempts and new lease ends
-- in the same order).
-- name: WorkerHeartbeat :one
WITH forgotten AS (
    DELETE FROM redrive_worker WHERE id IN (
        SELECT f.id FROM redrive_worker f
        WHERE f.last_seen_at < sqlc.arg(forget_before)::timestamptz AND f.id <> sqlc.arg(id)::text
        ORDER BY f.last_seen_at LIMIT 100 FOR UPDATE SKIP LOCKED)),
w AS (
    INSERT INTO redrive_worker AS r (id, hostname, pid, queues, queues_reported, concurrency, labels, reported_state,
        started_at, first_seen_at, last_seen_at, last_heartbeat_at, heartbeats, active_jobs, active_job_ids)
    VALUES (sqlc.arg(id)::text, sqlc.narg(hostname)::text, sqlc.narg(pid)::bigint,
        coalesce(sqlc.narg(queues)::text[], '{}'), sqlc.narg(queues)::text[] IS NOT NULL,
        sqlc.narg(concurrency)::integer, coalesce(sqlc.narg(labels)::text[], '{}'), sqlc.narg(reported_state)::text,
        sqlc.narg(started_at)::timestamptz, sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz, 1,
        sqlc.arg(active_jobs)::integer, sqlc.arg(active_job_ids)::text[])
    ON CONFLICT (id) DO UPDATE SET
        hostname = coalesce(EXCLUDED.hostname, r.hostname),
        pid = coalesce(EXCLUDED.pid, r.pid),
        queues = CASE WHEN EXCLUDED.queues_reported THEN EXCLUDED.queues ELSE r.queues END,
        queues_reported = r.queues_reported OR EXCLUDED.queues_reported,
        concurrency = coalesce(EXCLUDED.concurrency, r.concurrency),
        labels = CASE WHEN sqlc.narg(labels)::text[] IS NOT NULL THEN EXCLUDED.labels ELSE r.labels END,
        reported_state = coalesce(EXCLUDED.reported_state, r.reported_state),
        started_at = coalesce(EXCLUDED.started_at, r.started_at),
        last_seen_at = greatest(r.last_seen_at, EXCLUDED.last_seen_at),
        last_heartbeat_at = greatest(r.last_heartbeat_at, EXCLUDED.last_heartbeat_at),
        heartbeats = r.heartbeats + 1,
        active_jobs = EXCLUDED.active_jobs,
        active_job_ids = EXCLUDED.active_job_ids
    RETURNING r.directive, r.reported_state),
held AS (
    SELECT c.id, least(sqlc.arg(now)::timestamptz
            + interval '1 millisecond' * coalesce(sqlc.narg(extend_ms)::bigint, c.lease_ms, c.visibility_ms, 30000),
        coalesce(c.deadline_at, 'infinity'::timestamptz)) AS until
    FROM redrive_lifecycle c
    WHERE c.id = ANY(sqlc.arg(extend)::uuid[]) AND c.lease_until >= sqlc.arg(now)::timestamptz
        AND (c.worker_id = sqlc.arg(id)::text OR c.worker_id IS NULL)
    ORDER BY c.id FOR UPDATE),
ext AS (
    UPDATE redrive_lifecycle l SET lease_until = held.until
    FROM held
    WHERE l.id = held.id AND l.lease_until >= sqlc.arg(now)::timestamptz
        AND (l.worker_id = sqlc.arg(id)::text OR l.worker_id IS NULL)
        AND (held.until > l.lease_until OR held.until = l.lease_until AND held.until < coalesce(l.deadline_at, 'infinity'::timestamptz))
    RETURNING l.id, l.queue, l.type, l.attempt, l.lease_until)
SELECT w.directive, w.reported_state, ARRAY(SELECT ext.id::text FROM ext ORDER BY 1)::text[] AS extended,
    ARRAY(SELECT ext.queue FROM ext ORDER BY ext.id)::text[] AS extended_queues,
    ARRAY(SELECT ext.type FROM ext ORDER BY ext.id)::text[] AS extended_types,
    ARRAY(SELECT ext.attempt FROM ext ORDER BY ext.id)::integer[] AS extended_attempts,
    ARRAY(SELECT ext.lease_until FROM ext ORDER BY ext.id)::timestamptz[] AS extended_until
FROM w;

-- TouchWorker notes that worker sqlc.arg(id) fetched from sqlc.arg(queues) at sqlc.arg(now): it
-- is added to the registry if new; its queues become these unless its
-- heartbeats report its queues. It returns the worker's directive and
-- reported state.
-- name: TouchWorker :one
INSERT INTO redrive_worker AS r (id, queues, first_seen_at, last_seen_at)
VALUES (sqlc.arg(id)::text, sqlc.arg(queues)::text[], sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz)
ON CONFLICT (id) DO UPDATE SET
    last_seen_at = greatest(r.last_seen_at, EXCLUDED.last_seen_at),
    queues = CASE WHEN r.queues_reported THEN r.queues ELSE EXCLUDED.queues END
RETURNING r.directive, r.reported_state;

-- WorkerDirective reads what an operator told worker sqlc.arg(id), and the state it last
-- reported.
-- name: WorkerDirective :one
SELECT directive, reported_state FROM redrive_worker WHERE id = sqlc.arg(id);

-- GetWorker reads one worker.
-- name: GetWorker :one
SELECT * FROM redrive_worker WHERE id = sqlc.arg(id);

-- ListWorkers lists a page of the workers, by id, with how they stand at
-- sqlc.arg(stale_before) (last seen before it: stale). A caller that may
-- not read every queue (not sqlc.arg(all_queues)) sees the workers whose
-- queues are all among sqlc.arg(queue_likes) (LIKE patterns), and no worker
-- that names none. sqlc.arg(queue) ('' : any) keeps the workers that name
-- it, sqlc.arg(state) ('' : any) those in that state.
-- name: ListWorkers :many
SELECT w.*, (CASE WHEN w.last_seen_at < sqlc.arg(stale_before)::timestamptz THEN 'stale'
        WHEN 'terminate' IN (w.directive, w.reported_state) THEN 'terminate'
        WHEN 'quiet' IN (w.directive, w.reported_state) THEN 'quiet'
        ELSE 'running' END)::text AS state
FROM redrive_worker w
WHERE (sqlc.arg(all_queues)::boolean OR cardinality(w.queues) > 0 AND NOT EXISTS (
        SELECT 1 FROM unnest(w.queues) AS q(name) WHERE NOT q.name LIKE ANY(sqlc.arg(queue_likes)::text[])))
    AND (sqlc.arg(queue)::text = '' OR sqlc.arg(queue)::text = ANY(w.queues))
    AND (sqlc.arg(state)::text = '' OR sqlc.arg(state)::text = CASE WHEN w.last_seen_at < sqlc.arg(stale_before)::timestamptz THEN 'stale'
        WHEN 'terminate' IN (w.directive, w.reported_state) THEN 'terminate'
        WHEN 'quiet' IN (w.directive, w.reported_state) THEN 'quiet'
        ELSE 'running' END)
ORDER BY w.id
LIMIT sqlc.arg(max) OFFSET sqlc.arg(skip);

-- WorkerSummary counts the workers ListWorkers would list, whatever their
-- state, by state.
-- name: WorkerSummary :one
WITH v AS (
    SELECT CASE WHEN w.last_seen_at < sqlc.arg(stale_before)::timestamptz THEN 'stale'
        WHEN 'terminate' IN (w.directive, w.reported_state) THEN 'terminate'
        WHEN 'quiet' IN (w.directive, w.reported_state) THEN 'quiet'
        ELSE 'running' END AS state
    FROM redrive_worker w
    WHERE (sqlc.arg(all_queues)::boolean OR cardinality(w.queues) > 0 AND NOT EXISTS (
            SELECT 1 FROM unnest(w.queues) AS q(name) WHERE NOT q.name LIKE ANY(sqlc.arg(queue_likes)::text[])))
        AND (sqlc.arg(queue)::text = '' OR sqlc.arg(queue)::text = ANY(w.queues)))
SELECT count(*) AS total,
    count(*) FILTER (WHERE state = 'running') AS running,
    count(*) FILTER (WHERE state = 'quiet') AS quiet,
    count(*) FILTER (WHERE state = 'terminate') AS terminate,
    count(*) FILTER (WHERE state = 'stale') AS stale
FROM v;

-- CountWorkers counts the workers in the registry, stale ones included.
-- name: CountWorkers :one
SELECT count(*) FROM redrive_worker;

-- SetWorkerDirective tells worker sqlc.arg(id) sqlc.arg(directive) if its directive is one
-- of sqlc.arg(from_directives) (a directive only moves forward), noting who and when
-- unless it already said that.
-- name: SetWorkerDirective :one
UPDATE redrive_worker
SET directive = sqlc.arg(directive)::text,
    directive_at = CASE WHEN directive = sqlc.arg(directive)::text THEN directive_at ELSE sqlc.arg(now)::timestamptz END,
    directive_by = CASE WHEN directive = sqlc.arg(directive)::text THEN directive_by ELSE sqlc.arg(by)::text END
WHERE id = sqlc.arg(id) AND directive = ANY(sqlc.arg(from_directives)::text[])
RETURNING id;

-- WorkerLeases lists the jobs worker sqlc.arg(id) holds a lease on at sqlc.arg(now), soonest
-- expiry first, at most sqlc.arg(max).
-- name: WorkerLeases :many
SELECT id::text AS id, queue, lease_until::timestamptz AS lease_until FROM redrive_lifecycle
WHERE worker_id = sqlc.arg(id)::text AND lease_until >= sqlc.arg(now)::timestamptz
ORDER BY lease_until, id LIMIT sqlc.arg(max);

-- WorkerLeaseCounts counts the leases each of sqlc.arg(ids) holds at sqlc.arg(now), on the
-- queues matching sqlc.arg(queue_likes) unless sqlc.arg(all_queues).
-- name: WorkerLeaseCounts :many
SELECT worker_id::text AS worker_id, count(*) AS leases FROM redrive_lifecycle
WHERE worker_id = ANY(sqlc.arg(ids)::text[]) AND lease_until >= sqlc.arg(now)::timestamptz
    AND (sqlc.arg(all_queues)::boolean OR queue LIKE ANY(sqlc.arg(queue_likes)::text[]))
GROUP BY worker_id;

-- LockWorker locks worker sqlc.arg(id)'s row and reads when it was last seen.
-- name: LockWorker :one
SELECT last_seen_at FROM redrive_worker WHERE id = sqlc.arg(id) FOR UPDATE;

-- LockWorkerLeases locks the leases worker sqlc.arg(id) holds at sqlc.arg(now) and reads
-- their queues.
-- name: LockWorkerLeases :many
SELECT id::text AS id, queue FROM redrive_lifecycle
WHERE worker_id = sqlc.arg(id)::text AND lease_until >= sqlc.arg(now)::timestamptz
ORDER BY id FOR UPDATE;

-- ReleaseWorkerLeases ends the leases worker sqlc.arg(id) holds at sqlc.arg(now): each is
-- made to have expired a millisecond before now, so that the lease sweep
-- fails its attempt as it fails any expired lease.
-- name: ReleaseWorkerLeases :many
UPDATE redrive_lifecycle SET lease_until = sqlc.arg(now)::timestamptz - interval '1 millisecond'
WHERE worker_id = sqlc.arg(id)::text AND lease_until >= sqlc.arg(now)::timestamptz
RETURNING id::text AS id;

-- DeleteWorker forgets worker sqlc.arg(id).
-- name: DeleteWorker :exec
DELETE FROM redrive_worker WHERE id = sqlc.arg(id);

-- JobQueues reads the queue of each of sqlc.arg(ids) that is a record.
-- name: JobQueues :many
SELECT id::text AS id, queue FROM redrive_lifecycle WHERE id = ANY(sqlc.arg(ids)::uuid[]);
