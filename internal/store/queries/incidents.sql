-- Incidents and fingerprints (incidents.go).

-- name: IncidentsMarkRefingerprinted :exec
UPDATE redrive_incident SET refingerprinted_at = greatest(now(), last_seen)
WHERE fingerprint = ANY(@fingerprints::text[]);

-- name: IncidentsPerQueue :many
SELECT c.queue, count(*) AS n FROM (
    SELECT queue, fingerprint FROM redrive_record_count WHERE fingerprint <> ''
    GROUP BY 1, 2 HAVING sum(n) > 0) c
GROUP BY 1;

-- name: IncidentsBefore :many
SELECT fingerprint, first_seen, last_seen FROM redrive_incident
WHERE fingerprint > @after AND rules_version < @version AND (refingerprinted_at IS NULL OR last_seen > refingerprinted_at)
ORDER BY fingerprint LIMIT @max;

-- name: IncidentList :many
WITH c AS (
    SELECT fingerprint, queue, state, sum(n)::bigint AS n FROM redrive_record_count
    WHERE fingerprint <> '' AND (@queue::text = '' OR queue = @queue::text) AND (@id::text = '' OR fingerprint = @id::text)
      AND (sqlc.narg(queue_likes)::text[] IS NULL OR queue LIKE ANY(sqlc.narg(queue_likes)::text[]))
    GROUP BY 1, 2, 3 HAVING sum(n) <> 0),
q AS (SELECT fingerprint, array_agg(DISTINCT queue ORDER BY queue) AS queues FROM c GROUP BY 1),
t AS (SELECT fingerprint, state, sum(n)::bigint AS n FROM c GROUP BY 1, 2),
u AS (SELECT fingerprint, jsonb_object_agg(state, n) AS states,
             coalesce(sum(n) FILTER (WHERE @state::text = '' OR state = @state::text), 0)::bigint AS matching
      FROM t GROUP BY 1)
SELECT i.fingerprint, i.error_type, i.signature, coalesce(u.matching, 0)::bigint AS count, coalesce(q.queues, '{}')::text[] AS queues,
       coalesce(u.states, '{}')::jsonb AS states, i.first_seen, i.last_seen, i.sample_id::text AS sample_id, i.sample_message, i.frames
FROM redrive_incident i
LEFT JOIN u USING (fingerprint) LEFT JOIN q USING (fingerprint)
WHERE (@id::text <> '' AND i.fingerprint = @id::text)
   OR (@id::text = '' AND u.matching > 0 AND (sqlc.narg(since)::timestamptz IS NULL OR i.last_seen >= sqlc.narg(since)::timestamptz))
ORDER BY CASE WHEN @sort::text = 'count' THEN coalesce(u.matching, 0) END DESC NULLS LAST, i.last_seen DESC, i.fingerprint
LIMIT @max;

-- name: Unfingerprinted :many
-- A record without an error (a job published over HTTP that no worker has
-- failed yet) has no fingerprint to get.
SELECT id::text AS id, queue, fingerprint, coalesce((errors->-1)::text, '')::text AS last FROM redrive_record_data
WHERE fingerprint = '' AND errors->-1 IS NOT NULL ORDER BY id LIMIT @max;

-- name: RecordsOfIncidents :many
SELECT id::text AS id, queue, fingerprint, coalesce((errors->-1)::text, '')::text AS last FROM redrive_record_data
WHERE fingerprint = ANY(@fingerprints::text[]) AND (fingerprint, id) > (@after_fingerprint::text, @after_id::uuid)
ORDER BY fingerprint, id LIMIT @max;

-- "Resolved, redrive when quiet" (quiet.go).

-- name: QuietRequestSet :one
INSERT INTO redrive_incident_quiet (fingerprint, quiet_ms, canary, rate_limit, requested_by, requested_at)
VALUES (@fingerprint, @quiet_ms, @canary, @rate_limit, @requested_by, @requested_at)
ON CONFLICT (fingerprint) DO UPDATE SET quiet_ms = excluded.quiet_ms, canary = excluded.canary,
    rate_limit = excluded.rate_limit, requested_by = excluded.requested_by, requested_at = excluded.requested_at,
    task_id = NULL, started_at = NULL
RETURNING *;

-- name: QuietRequestGet :one
SELECT q.*, greatest(q.requested_at, coalesce(i.last_arrived_at, i.last_seen))::timestamptz AS quiet_since
FROM redrive_incident_quiet q JOIN redrive_incident i USING (fingerprint)
WHERE q.fingerprint = @fingerprint;

-- name: QuietRequestDelete :one
DELETE FROM redrive_incident_quiet WHERE fingerprint = @fingerprint AND task_id IS NULL
RETURNING *;

-- name: QuietDue :many
SELECT q.*, greatest(q.requested_at, coalesce(i.last_arrived_at, i.last_seen))::timestamptz AS quiet_since
FROM redrive_incident_quiet q JOIN redrive_incident i USING (fingerprint)
WHERE q.task_id IS NULL
  AND greatest(q.requested_at, coalesce(i.last_arrived_at, i.last_seen)) + interval '1 millisecond' * q.quiet_ms <= @now::timestamptz
ORDER BY q.requested_at LIMIT @max;

-- name: QuietStarted :execrows
UPDATE redrive_incident_quiet SET task_id = @task_id, started_at = @started_at
WHERE fingerprint = @fingerprint AND task_id IS NULL AND requested_at = @requested_at;
