-- Statements behind the gauges that autoscalers read (internal/maintenance/gauges.go).

-- RedeliveryDue counts, per queue, the records due for redelivery now
-- (retryable, or retried by an operator and waiting for the scheduler), at
-- most `cap` per queue. The queues come from the statistics (those holding
-- retryable or available records), and each is one range of the index the
-- scheduler claims by, cut at the cap: a backlog of millions costs what the
-- cap costs, and records still backing off are never read.
-- name: RedeliveryDue :many
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM redrive_lifecycle l
                              WHERE l.queue = q.queue AND l.next_retry_at <= sqlc.arg(now)::timestamptz
                              LIMIT sqlc.arg(cap)::bigint) d)::bigint AS n
FROM (SELECT c.queue FROM redrive_record_count c
      WHERE c.state IN ('retryable', 'available')
      GROUP BY c.queue HAVING sum(c.n) > 0) q;
