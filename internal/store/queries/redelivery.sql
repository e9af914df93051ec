-- Redelivery (redeliver.go). Settle and RescueExpired stay in Go: they unnest
-- several arrays at once, which sqlc cannot type, and have EXPLAIN tests.

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

-- ClaimDue's statement: see Store.ClaimDue. It writes the lifecycle rows
-- only; the wide rows (key, value, headers) are read.
-- name: ClaimDue :many
WITH due AS (
    SELECT d.id, d.state, d.next_retry_at, d.redelivered_at, d.redelivery_failure FROM redrive_lifecycle d
    WHERE d.queue = sqlc.arg(queue) AND d.next_retry_at <= sqlc.arg(now)::timestamptz
    ORDER BY d.next_retry_at LIMIT sqlc.arg(max) FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE redrive_lifecycle r
    SET state = CASE WHEN sqlc.arg(await_ack)::bool THEN 'available' ELSE 'completed' END,
        completed_at = CASE WHEN sqlc.arg(await_ack)::bool THEN NULL ELSE sqlc.arg(now)::timestamptz END,
        completed_by = CASE WHEN sqlc.arg(await_ack)::bool THEN NULL ELSE 'redelivered' END,
        ack_due_at = CASE WHEN sqlc.arg(await_ack)::bool THEN sqlc.arg(now)::timestamptz + interval '1 millisecond' * sqlc.arg(ack_timeout_ms)::bigint END,
        unacknowledged_at = NULL,
        attempt = r.attempt + 1, next_retry_at = NULL, exhaustion = NULL,
        discarded_at = NULL, redelivered_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now)::timestamptz,
        claim_token = sqlc.arg(token)::uuid
    FROM due WHERE r.id = due.id
    RETURNING r.id, r.attempt, due.next_retry_at AS due_at, due.state AS prior_state, due.redelivered_at AS prior_redelivered_at,
              coalesce((due.redelivery_failure->>'failures')::int, 0)::int AS failures),
lease AS (
    INSERT INTO redrive_claim (token, owner, queue, claimed_at, expires_at, ids, prior_states, prior_redelivered_at)
    SELECT sqlc.arg(token)::uuid, sqlc.arg(owner)::text, sqlc.arg(queue)::text, sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz + interval '1 millisecond' * sqlc.arg(lease_ms)::bigint,
        array_agg(claimed.id), array_agg(claimed.prior_state), array_agg(claimed.prior_redelivered_at)
    FROM claimed HAVING count(*) > 0)
SELECT claimed.id, w.queue, w.format, claimed.attempt, w.source_partition, w.source_group, w.key, w.value,
    w.headers, w.redelivery, claimed.due_at, claimed.prior_state, claimed.prior_redelivered_at, claimed.failures
FROM claimed JOIN redrive_record_data w ON w.id = claimed.id;
