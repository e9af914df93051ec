-- The OJS admin API's counts (admin.go): what the statistics table cannot
-- say, because it depends on the time — a job held by a worker, a job due
-- later — read from the lifecycle's small indexes, never by scanning records.

-- HeldPerQueue counts the records a worker holds at @now (a lease that has
-- not passed), per queue: the lease index holds the leased records alone.
-- name: HeldPerQueue :many
SELECT queue, count(*)::bigint AS n FROM redrive_lifecycle
WHERE lease_until >= @now::timestamptz GROUP BY queue;

-- ScheduledPerQueue counts, per queue of @queues, the jobs published over
-- HTTP that wait, available, for a fetch after @now: one range of the
-- (queue, fetch_at) index per queue, over its future entries only.
-- name: ScheduledPerQueue :many
SELECT q.name::text AS queue, c.n FROM unnest(@queues::text[]) AS q(name)
CROSS JOIN LATERAL (SELECT count(*)::bigint AS n FROM redrive_lifecycle l
    WHERE l.queue = q.name AND l.fetch_at > @now::timestamptz AND l.state = 'available') c
WHERE c.n > 0;

-- CompletedPerQueue counts, per queue of @queues, the records completed
-- (redelivered or acked) after @since: one range of the (queue,
-- completed_at) index of completed records per queue.
-- name: CompletedPerQueue :many
SELECT q.name::text AS queue, c.n FROM unnest(@queues::text[]) AS q(name)
CROSS JOIN LATERAL (SELECT count(*)::bigint AS n FROM redrive_lifecycle l
    WHERE l.state = 'completed' AND l.queue = q.name AND l.completed_at > @since::timestamptz) c
WHERE c.n > 0;

-- FailedPerQueue counts, per queue of @queues, the records whose latest
-- failure (a failure stored from Kafka, a worker's nack, an expired lease)
-- happened after @since: one range of the (queue, failed_at) index per
-- queue. A job published over HTTP that never failed has no error type
-- (its failed_at is its creation).
-- name: FailedPerQueue :many
SELECT q.name::text AS queue, c.n FROM unnest(@queues::text[]) AS q(name)
CROSS JOIN LATERAL (SELECT count(*)::bigint AS n FROM redrive_record_data d
    WHERE d.queue = q.name AND d.failed_at > @since::timestamptz AND d.error_type <> '') c
WHERE c.n > 0;

-- QueueDepth is a queue's depth at @now (OJS backpressure spec §3:
-- available + scheduled + retryable): its records not settled, from the
-- statistics table, less those a worker holds — found from the lease index
-- (the leased records alone), never from the queue's records.
-- name: QueueDepth :one
WITH held AS MATERIALIZED (SELECT l.queue FROM redrive_lifecycle l WHERE l.lease_until >= @now::timestamptz)
SELECT ((SELECT coalesce(sum(c.n), 0) FROM redrive_record_count c WHERE c.queue = @queue::text AND c.state IN ('retryable', 'available'))
    - (SELECT count(*) FROM held WHERE held.queue = @queue::text))::bigint AS depth;
