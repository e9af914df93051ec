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
JOIN LATERAL (SELECT r.created_at FROM redrive_record r WHERE r.queue >= q.name AND r.queue <= q.name
    ORDER BY r.queue, r.id LIMIT 1) o ON true;
