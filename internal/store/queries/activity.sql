-- Queue activity (activity.go). The statements that read the record table per
-- queue stay in Go (queueActivitySQL has an EXPLAIN test).

-- name: ActivityCompact :exec
WITH m AS (DELETE FROM redrive_queue_activity a WHERE a.minute >= sqlc.arg(cut)::timestamptz RETURNING *),
h AS (DELETE FROM redrive_queue_activity a WHERE a.minute >= sqlc.arg(hour)::timestamptz AND a.minute < sqlc.arg(cut)::timestamptz RETURNING *),
old AS (DELETE FROM redrive_queue_activity a WHERE a.minute < sqlc.arg(drop_before)::timestamptz),
fm AS (INSERT INTO redrive_queue_activity (queue, fingerprint, minute, added, retried)
    SELECT m.queue, m.fingerprint, m.minute, sum(m.added), sum(m.retried) FROM m GROUP BY 1, 2, 3)
INSERT INTO redrive_queue_activity (queue, fingerprint, minute, added, retried)
SELECT h.queue, h.fingerprint, sqlc.arg(hour)::timestamptz, sum(h.added), sum(h.retried) FROM h GROUP BY 1, 2;

-- name: OldestRecords :many
SELECT q.name::text AS queue, o.created_at FROM unnest(@queues::text[]) AS q(name)
JOIN LATERAL (SELECT r.created_at FROM redrive_record_data r WHERE r.queue >= q.name AND r.queue <= q.name
    ORDER BY r.queue, r.id LIMIT 1) o ON true;

-- Activity series: one statement per index that fits (minute, queue, or
-- fingerprint), so that each plan is made for the filter it has.

-- name: ActivityAll :many
SELECT queue, floor(extract(epoch FROM minute - @since::timestamptz) / @step_seconds::float8)::int AS bucket,
    sum(added)::bigint AS added, sum(retried)::bigint AS retried
FROM redrive_queue_activity WHERE minute >= @since::timestamptz AND minute < @until::timestamptz GROUP BY 1, 2;

-- name: ActivityOfQueue :many
SELECT queue, floor(extract(epoch FROM minute - @since::timestamptz) / @step_seconds::float8)::int AS bucket,
    sum(added)::bigint AS added, sum(retried)::bigint AS retried
FROM redrive_queue_activity WHERE queue = @queue AND minute >= @since::timestamptz AND minute < @until::timestamptz GROUP BY 1, 2;

-- name: ActivityOfFingerprint :many
SELECT queue, floor(extract(epoch FROM minute - @since::timestamptz) / @step_seconds::float8)::int AS bucket,
    sum(added)::bigint AS added, sum(retried)::bigint AS retried
FROM redrive_queue_activity WHERE fingerprint = @fingerprint AND minute >= @since::timestamptz AND minute < @until::timestamptz GROUP BY 1, 2;
