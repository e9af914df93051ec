-- Pruning (prune.go). The batches, whose condition depends on the set, are
-- compiled in Go.

-- name: TerminalQueues :many
WITH RECURSIVE d(queue) AS (
    SELECT min(queue) FROM redrive_lifecycle WHERE state = 'discarded'
    UNION ALL
    SELECT (SELECT min(r.queue) FROM redrive_lifecycle r WHERE r.state = 'discarded' AND r.queue > d.queue)
    FROM d WHERE d.queue IS NOT NULL
), c(queue) AS (
    SELECT min(queue) FROM redrive_lifecycle WHERE state = 'completed'
    UNION ALL
    SELECT (SELECT min(r.queue) FROM redrive_lifecycle r WHERE r.state = 'completed' AND r.queue > c.queue)
    FROM c WHERE c.queue IS NOT NULL
)
SELECT d.queue::text AS queue FROM d WHERE d.queue IS NOT NULL
UNION
SELECT c.queue::text FROM c WHERE c.queue IS NOT NULL
ORDER BY 1;

-- name: DeadLetterDepth :many
SELECT c.queue, c.n, (SELECT min(r.discarded_at) FROM redrive_lifecycle r
                      WHERE r.queue = c.queue AND r.state = 'discarded' AND r.exhaustion = 'dead_letter') AS oldest
FROM (SELECT queue, sum(n)::bigint AS n FROM redrive_record_count
      WHERE state = 'discarded' AND exhaustion = 'dead_letter' GROUP BY queue) c;

-- name: AdvisoryTryLock :one
SELECT pg_try_advisory_lock(@key::bigint);

-- name: AdvisoryUnlock :one
SELECT pg_advisory_unlock(@key::bigint);
