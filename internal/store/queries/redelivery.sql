-- Redelivery (redeliver.go). ClaimDue, Settle and RescueExpired stay in Go:
-- the claim scans its rows straight into the records it returns (the hot
-- path: no row structs in between), the others unnest several arrays at
-- once, which sqlc cannot type; they have EXPLAIN tests.

-- name: WaitingQueues :many
WITH RECURSIVE q(queue) AS (
    SELECT min(queue) FROM redrive_lifecycle WHERE next_retry_at IS NOT NULL
    UNION ALL
    SELECT (SELECT min(r.queue) FROM redrive_lifecycle r WHERE r.next_retry_at IS NOT NULL AND r.queue > q.queue)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT q.queue::text FROM q WHERE q.queue IS NOT NULL;

-- name: NextDue :many
SELECT u.q::text AS queue, (SELECT min(r.next_retry_at) FROM redrive_lifecycle r WHERE r.queue = u.q AND r.next_retry_at IS NOT NULL) AS due
FROM unnest(@queues::text[]) AS u(q);

-- name: UnacknowledgedQueues :many
SELECT queue, count(*) AS n FROM redrive_lifecycle
WHERE state = 'available' AND unacknowledged_at IS NOT NULL AND queue = ANY(@queues::text[]) GROUP BY queue;

-- name: BlockedQueues :many
SELECT queue, count(*) AS n,
       ((array_agg(redelivery_failure->>'reason' ORDER BY (redelivery_failure->>'failed_at')::timestamptz DESC))[1])::text AS reason,
       ((array_agg(redelivery_failure->>'message' ORDER BY (redelivery_failure->>'failed_at')::timestamptz DESC))[1])::text AS message,
       min((redelivery_failure->>'failed_at')::timestamptz)::timestamptz AS since
FROM redrive_lifecycle WHERE redelivery_failure IS NOT NULL AND state <> 'discarded' AND queue = ANY(@queues::text[])
GROUP BY queue;

-- name: MarkUnacknowledged :many
WITH due AS (
    SELECT d.id FROM redrive_lifecycle d
    WHERE d.state = 'available' AND d.ack_due_at IS NOT NULL AND d.unacknowledged_at IS NULL AND d.ack_due_at <= @now
      AND d.next_retry_at IS NULL AND NOT EXISTS (SELECT 1 FROM redrive_claim c WHERE c.token = d.claim_token)
    ORDER BY d.ack_due_at LIMIT @max FOR UPDATE SKIP LOCKED)
UPDATE redrive_lifecycle r SET unacknowledged_at = @now, updated_at = @now
FROM due WHERE r.id = due.id
RETURNING r.id, r.queue, r.attempt;
