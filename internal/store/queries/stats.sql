-- The statistics table the triggers keep (stats.go, prune.go).

-- name: QueueCounts :many
SELECT queue, state, exhaustion, sum(n)::bigint AS n FROM redrive_record_count
GROUP BY 1, 2, 3 HAVING sum(n) <> 0;

-- name: CompactCountsLock :one
-- One compaction at a time (replicas share the database): the others skip.
SELECT pg_try_advisory_xact_lock(hashtextextended('redrive_record_count_compact', 0))::boolean AS locked;

-- name: CompactCounts :one
-- Drains the pending deltas into the totals, one row per dimension tuple,
-- updated in place; says how many delta rows it drained.
WITH d AS (DELETE FROM redrive_record_count_delta RETURNING *),
s AS (SELECT queue, type, error_type, state, exhaustion, fingerprint, sum(n)::bigint AS n, sum(bytes)::bigint AS bytes FROM d
      GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 OR sum(bytes) <> 0),
u AS (INSERT INTO redrive_record_count_total AS t (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
      SELECT queue, type, error_type, state, exhaustion, fingerprint, n, bytes FROM s
      ON CONFLICT (queue, state, exhaustion, type, error_type, fingerprint) DO UPDATE SET n = t.n + excluded.n, bytes = t.bytes + excluded.bytes
      RETURNING 1)
SELECT (SELECT count(*) FROM d)::bigint AS drained, (SELECT count(*) FROM u)::bigint AS folded;

-- name: CompactCountsZeros :exec
DELETE FROM redrive_record_count_total WHERE n = 0 AND bytes = 0;

-- name: QueueSize :one
-- A topic's non-terminal records and their bytes (capacity.go).
SELECT coalesce(sum(n), 0)::bigint AS n, coalesce(sum(bytes), 0)::bigint AS bytes FROM redrive_record_count
WHERE queue = @queue AND state IN ('retryable', 'available');

-- name: RecordCounts :many
SELECT queue, state, exhaustion, error_type, sum(n)::bigint AS n FROM redrive_record_count
GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0;

-- name: StatsCounts :many
SELECT queue, error_type, state, exhaustion, sum(n)::bigint AS n FROM redrive_record_count
GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0;

-- name: StatsQueueCounts :many
SELECT queue, error_type, state, exhaustion, sum(n)::bigint AS n FROM redrive_record_count
WHERE queue = @queue GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0;

-- name: ErrorTypes :many
SELECT error_type, sum(n)::bigint AS n, count(*) OVER () AS total FROM redrive_record_count
WHERE (@queue::text = '' OR queue = @queue::text) AND (@search::text = '' OR strpos(lower(error_type), lower(@search::text)) > 0)
  AND (sqlc.narg(queue_likes)::text[] IS NULL OR queue LIKE ANY(sqlc.narg(queue_likes)::text[]))
GROUP BY error_type HAVING sum(n) > 0 ORDER BY 2 DESC, 1 LIMIT @max;

-- name: StatsTop :many
-- GET /dead-letter/stats (StatsTop): the records by state and exhaustion,
-- and the @max largest queues and error types, most records first (ties by
-- name); the rest of each of those two in one row marked rest, with how
-- many keys it holds and their records. Of one queue when @queue is
-- set, of the queues matching @queue_likes when set.
WITH c AS (
    SELECT queue, error_type, state, exhaustion, sum(n)::bigint AS n FROM redrive_record_count
    WHERE (@queue::text = '' OR queue = @queue::text)
      AND (sqlc.narg(queue_likes)::text[] IS NULL OR queue LIKE ANY(sqlc.narg(queue_likes)::text[]))
    GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0),
ranked AS (
    SELECT 'queue'::text AS dim, q.queue AS k, q.n, row_number() OVER (ORDER BY q.n DESC, q.queue) AS rank
    FROM (SELECT queue, sum(n)::bigint AS n FROM c GROUP BY queue) q
    UNION ALL
    SELECT 'error_type'::text, e.error_type, e.n, row_number() OVER (ORDER BY e.n DESC, e.error_type)
    FROM (SELECT error_type, sum(n)::bigint AS n FROM c GROUP BY error_type) e
    UNION ALL
    SELECT 'state'::text, state, sum(n)::bigint, 1 FROM c GROUP BY state
    UNION ALL
    SELECT 'exhaustion'::text, exhaustion, sum(n)::bigint, 1 FROM c WHERE exhaustion <> '' GROUP BY exhaustion)
SELECT r.dim::text AS dim, (r.rank > @max::bigint)::bool AS rest, (CASE WHEN r.rank > @max::bigint THEN '' ELSE r.k END)::text AS key,
    sum(r.n)::bigint AS n, count(*)::bigint AS keys
FROM ranked r GROUP BY 1, 2, 3;
