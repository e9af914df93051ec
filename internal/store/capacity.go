package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
)

// Queue capacity (max_size, max_size_bytes): a topic's non-terminal records
// (retryable and available) and their bytes (key plus value) are read from
// the statistics table, which the triggers keep current, never counted. A
// batch is checked once it is stored, per topic with a limit: first by one
// read of the topic's size, then, only when that shows it past a limit, in
// a transaction that holds the topic's advisory lock and reads it again:
// replicas ingesting the same topic take turns, so a topic never ends past
// its limit because two of them checked at once. The first read needs no
// lock: a size grows only by batches stored before it is read, and each
// batch is checked after it is stored, so of two replicas' batches the
// later check sees both.

// QueueSize is a topic's non-terminal records and their bytes.
type QueueSize struct {
	Records, Bytes int64
}

// QueueSize reads a topic's size from the statistics table.
func (s *Store) QueueSize(ctx context.Context, queue string) (QueueSize, error) {
	r, err := s.q.QueueSize(ctx, s.pool, queue)
	if err != nil {
		return QueueSize{}, fmt.Errorf("read queue size: %w", err)
	}
	return QueueSize{Records: r.N, Bytes: r.Bytes}, nil
}

// CapacityCheck is one topic's capacity, to enforce after a batch is stored.
type CapacityCheck struct {
	Queue string
	// MaxSize and MaxBytes are the limits; 0 is no limit.
	MaxSize, MaxBytes int64
	// DropOldest discards the topic's oldest retryable records past the
	// limit; otherwise (reject) the newest of the batch's are.
	DropOldest bool
	// Coords are the DLQ coordinates of the batch's retryable records in
	// the topic, stored now or before (a batch consumed again after a crash
	// between its insert and this check is checked all the same).
	Coords []dlq.Coord
}

// EnforceCapacity brings a topic back within its limits: past either limit,
// it locks the records to turn away — the oldest retryable records of the
// topic (DropOldest), or the newest of the batch's (reject) — one at a time until
// the topic fits, passes each to discard, which must make it discarded, and
// saves them (archive copies due, as for any discarded record). It returns
// the records it changed.
func (s *Store) EnforceCapacity(ctx context.Context, c CapacityCheck, discard func(r *dlq.Record)) ([]dlq.Record, error) {
	// Within its limits (as nearly always), a topic costs one round trip
	// per batch, not the four of the locked transaction.
	size, err := s.q.QueueSize(ctx, s.pool, c.Queue)
	if err != nil {
		return nil, fmt.Errorf("enforce capacity of %s: read queue size: %w", c.Queue, err)
	}
	if !c.past(size.N, size.Bytes) {
		return nil, nil
	}
	var out []dlq.Record
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('redrive_capacity:' || $1::text, 0))`, c.Queue); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		size, err := s.q.QueueSize(ctx, tx, c.Queue) // again, under the lock
		if err != nil {
			return fmt.Errorf("read queue size: %w", err)
		}
		overN, overB := c.over(size.N, size.Bytes)
		over := func() bool { return overN > 0 || overB > 0 }
		if !over() {
			return nil
		}
		take := func(recs []dlq.Record) {
			for i := range recs {
				if !over() {
					return
				}
				out = append(out, recs[i])
				overN--
				overB -= int64(len(recs[i].Key) + len(recs[i].Value))
			}
		}
		if c.DropOldest {
			after := "00000000-0000-0000-0000-000000000000"
			for over() {
				const chunk = 500
				limit := int64(chunk)
				if overB <= 0 {
					limit = min(overN, chunk)
				}
				// The oldest retryable records are found (and locked) from
				// the lifecycle's index (queue, id) WHERE retryable.
				recs, err := collect(ctx, tx, "lock oldest records", scanRecord, "SELECT "+storedSQL+
					" FROM redrive_record WHERE id IN (SELECT l.id FROM redrive_lifecycle l WHERE l.queue = $1 AND l.state = 'retryable' AND l.id > $2"+
					" ORDER BY l.queue, l.id LIMIT $3 FOR UPDATE SKIP LOCKED) ORDER BY id",
					c.Queue, after, limit)
				if err != nil {
					return err
				}
				if len(recs) == 0 {
					break
				}
				take(recs)
				after = recs[len(recs)-1].ID
			}
		} else if len(c.Coords) > 0 {
			topics, parts, offsets := make([]string, len(c.Coords)), make([]int32, len(c.Coords)), make([]int64, len(c.Coords))
			for i, co := range c.Coords {
				topics[i], parts[i], offsets[i] = co.Topic, co.Partition, co.Offset
			}
			recs, err := collect(ctx, tx, "lock new records", scanRecord, "SELECT "+storedSQL+
				" FROM redrive_record WHERE id IN (SELECT c.id FROM redrive_record_coord c WHERE (c.dlq_topic, c.dlq_partition, c.dlq_offset) IN (SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[])))"+
				" AND queue = $4 AND state = 'retryable' ORDER BY id DESC FOR UPDATE", topics, parts, offsets, c.Queue)
			if err != nil {
				return err
			}
			take(recs)
		}
		if len(out) == 0 {
			return nil
		}
		batch := &pgx.Batch{}
		for i := range out {
			discard(&out[i])
			if err := queueLifecycle(batch, &out[i], asJSON); err != nil {
				return err
			}
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("enforce capacity of %s: %w", c.Queue, err)
	}
	return out, nil
}

// over is how far a topic of n records and bytes is past each limit (0 or
// less: within it, or no limit).
func (c CapacityCheck) over(n, bytes int64) (overN, overB int64) {
	if c.MaxSize > 0 {
		overN = n - c.MaxSize
	}
	if c.MaxBytes > 0 {
		overB = bytes - c.MaxBytes
	}
	return overN, overB
}

// past reports whether a topic of n records and bytes is past a limit.
func (c CapacityCheck) past(n, bytes int64) bool {
	overN, overB := c.over(n, bytes)
	return overN > 0 || overB > 0
}
