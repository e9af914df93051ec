package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The record tables are partitioned by week of their ids (migration 00211):
// redrive_record_data and redrive_lifecycle each have one partition per week
// (Monday 00:00 UTC to the next, in UUIDv7 terms), the same bounds for both,
// an "old" partition holding what a populated database had before, and a
// DEFAULT partition for ids outside every range. redrive_partition lists the
// ranges Redrive made; the pruner's pass creates weeks ahead and drops those
// none of whose records is needed any more.

// partitionLockTimeout bounds how long partition DDL waits for a lock: a
// CREATE, ATTACH or DROP queues every later statement on the tables behind
// it, so it gives up (and the next pass tries again) rather than stall them.
const partitionLockTimeout = "2s"

// Partition is one week (or the old range) of the record tables.
type Partition struct {
	// Name is the partitions' suffix: w20261123 (the week's Monday) or old.
	Name string
	// Lo is the range's first id, invalid for the old partition (every id
	// below Hi); Hi is the first id after it.
	Lo, Hi pgtype.UUID
	// HiAt is the time of Hi: every record of the range was stored before.
	HiAt time.Time
	// Dropped is set once the partition is dropped and its DLQ coordinates
	// are still being removed.
	Dropped bool
}

// EnsureWeeks creates the partitions of the weeks from the one holding from
// to weeks-1 weeks later that do not exist yet, and returns the names it
// created. Concurrent callers (replicas, a migration) serialize on an
// advisory lock; a week an existing range overlaps is skipped. A week that
// cannot be made (a lock not granted in time, rows of it in the DEFAULT
// partition) does not stop the others: the errors are joined.
func (m *Maint) EnsureWeeks(ctx context.Context, from time.Time, weeks int) ([]string, error) {
	var created []string
	var errs []error
	for i := range weeks {
		at := from.Add(time.Duration(i) * 7 * 24 * time.Hour)
		var made bool
		err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+partitionLockTimeout+"'"); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT redrive_create_week($1)", at).Scan(&made)
		})
		if err != nil {
			if ctx.Err() != nil {
				return created, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("create the partitions of the week of %s: %w", weekStart(at).Format(time.DateOnly), err))
			continue
		}
		if made {
			created = append(created, "w"+weekStart(at).Format("20060102"))
		}
	}
	return created, errors.Join(errs...)
}

// EnsureWeeks is Maint().EnsureWeeks.
func (s *Store) EnsureWeeks(ctx context.Context, from time.Time, weeks int) ([]string, error) {
	return s.Maint().EnsureWeeks(ctx, from, weeks)
}

// weekStart is the Monday 00:00 UTC starting t's week.
func weekStart(t time.Time) time.Time {
	t = t.UTC().Truncate(24 * time.Hour)
	return t.AddDate(0, 0, -((int(t.Weekday()) + 6) % 7))
}

// Partitions lists the registered ranges, oldest first.
func (m *Maint) Partitions(ctx context.Context) ([]Partition, error) {
	rows, err := m.db.Query(ctx, `SELECT name, lo, hi, hi_at, dropped_at IS NOT NULL FROM redrive_partition
		ORDER BY hi`)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := r.Scan(&p.Name, &p.Lo, &p.Hi, &p.HiAt, &p.Dropped)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	return out, nil
}

// lo is the range's first id for SQL: the smallest UUID for the old range.
func (p *Partition) lo() pgtype.UUID {
	if p.Lo.Valid {
		return p.Lo
	}
	return pgtype.UUID{Valid: true}
}

// PartitionLive says whether the partition holds a record that waits for
// (re)delivery or an acknowledgement (retryable or available), by its
// (state, id) index: such a partition is never dropped, whatever the
// retention.
func (m *Maint) PartitionLive(ctx context.Context, p *Partition) (bool, error) {
	var live bool
	err := m.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM redrive_lifecycle WHERE state = 'retryable' AND id >= $1 AND id < $2)
		OR EXISTS (SELECT 1 FROM redrive_lifecycle WHERE state = 'available' AND id >= $1 AND id < $2)`, p.lo(), p.Hi).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("partition %s: look for live records: %w", p.Name, err)
	}
	return live, nil
}

// PartitionGroup is what a partition holds of one statistics group
// (queue, type, error type, state, exhaustion, fingerprint).
type PartitionGroup struct {
	Queue, Type, ErrorType, State, Exhaustion, Fingerprint string
	// N records of Bytes key and value bytes.
	N, Bytes int64
	// Newest is the latest time one of them was discarded or completed;
	// far in the future when one has no such time (its age is unknown).
	Newest time.Time
	// ArchiveDue: one of them has an archive copy pending or failing.
	ArchiveDue bool
	// NotArchived: one of them has no archive copy made (pending, failing,
	// or never asked for).
	NotArchived bool
}

// unknownAge is the Newest of a group holding a record of unknown age.
var unknownAge = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrPartitionKept is returned by DropPartition when keep decided to keep it.
var ErrPartitionKept = errors.New("partition kept")

// DropPartition drops partition p of both record tables if keep, shown
// what it holds, says nothing in it is needed (keep returns "" or a
// reason to keep it, returned wrapped in ErrPartitionKept). Its groups are
// read (one scan of its lifecycle rows) and shown to keep without locking
// anything, so that a partition kept costs other statements nothing. Then it
// is dropped one parent table at a time, each in a transaction that locks
// that parent exclusively:
//   - the wide rows' partition, once the groups, read again under the lock
//     (writes to the week's lifecycle wait), are still to be dropped; the
//     records leave the view, which joins both tables;
//   - the lifecycle's partition, with the week's counts subtracted from the
//     statistics (a DROP fires no trigger) in the same transaction.
//
// Its DLQ coordinates are removed afterwards (CleanDroppedCoords). A drop
// stopped between the two is finished by the next pass's.
//
// One parent per transaction, and the parent before its partitions: every
// statement on the record tables locks a parent before the partitions (a
// generic plan locks them all), and the two parents in either order (a
// cached plan locks its range table in order: the view's lifecycle first, a
// claim's wide rows first). A drop holding one lock and waiting for another
// could wait on a statement that waits on the drop: a deadlock, which
// Postgres breaks by aborting whoever waited deadlock_timeout first, the
// statement (ingest, the scheduler, an import: seen at each week's turn,
// when the pruner drops the week that ended). Each transaction also waits
// parentLockTimeout at most, since every later statement on that table
// queues behind it; it is then tried again after a pause, up to
// dropAttempts times in all, and after that at the next pass.
func (m *Maint) DropPartition(ctx context.Context, p *Partition, keep func([]PartitionGroup) string) ([]PartitionGroup, error) {
	groups, err := partitionGroups(ctx, m.db, p)
	if err != nil {
		return nil, fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	if why := keep(groups); why != "" {
		return groups, fmt.Errorf("%w: %s", ErrPartitionKept, why)
	}
	if err := m.locked(ctx, "redrive_record_data", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT redrive_lock_partition($1)", p.Name); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		groups, err := partitionGroups(ctx, tx, p)
		if err != nil {
			return err
		}
		if why := keep(groups); why != "" {
			return fmt.Errorf("%w: %s", ErrPartitionKept, why)
		}
		if _, err := tx.Exec(ctx, "SELECT redrive_drop_partition_data($1)", p.Name); err != nil {
			return fmt.Errorf("drop the wide rows: %w", err)
		}
		return nil
	}); err != nil {
		if errors.Is(err, ErrPartitionKept) {
			return groups, err
		}
		return nil, fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	err = m.locked(ctx, "redrive_lifecycle", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT redrive_lock_partition($1)", p.Name); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		var err error
		if groups, err = partitionGroups(ctx, tx, p); err != nil {
			return err
		}
		if err := subtractGroups(ctx, tx, groups); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT redrive_drop_partition($1)", p.Name); err != nil {
			return fmt.Errorf("drop: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	p.Dropped = true
	return groups, nil
}

// locked runs f in a transaction that has locked parent (a record table)
// exclusively, waiting parentLockTimeout at most, and tries again after a
// pause when the lock is not granted, dropAttempts times in all.
func (m *Maint) locked(ctx context.Context, parent string, f func(pgx.Tx) error) error {
	var err error
	for attempt := range dropAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * dropPause):
			}
		}
		err = pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+parentLockTimeout+"'"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE ONLY "+parent+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return fmt.Errorf("lock %s: %w", parent, err)
			}
			return f(tx)
		})
		if !LockNotGranted(err) {
			return err
		}
	}
	return err
}

// parentLockTimeout bounds a drop's wait for a parent table, which every
// later statement on it waits behind.
const parentLockTimeout = "100ms"

// dropAttempts is how many times a drop's transaction is tried when its lock
// is not granted in time; dropPause (times the attempt) is the pause
// between.
const (
	dropAttempts = 3
	dropPause    = 250 * time.Millisecond
)

// isDeadlock says err is Postgres aborting the transaction to break a
// deadlock (SQLSTATE 40P01).
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// partitionGroups reads what partition p holds, grouped as the statistics
// count it.
func partitionGroups(ctx context.Context, db dbtx, p *Partition) ([]PartitionGroup, error) {
	rows, err := db.Query(ctx, `SELECT queue, type, error_type, state, coalesce(exhaustion, ''), fingerprint, count(*), sum(bytes)::bigint,
			max(coalesce(discarded_at, completed_at, 'infinity')),
			coalesce(bool_or(coalesce(archive_state IN ('pending', 'failed'), false) OR archive_token IS NOT NULL), false),
			bool_or(archive_state IS DISTINCT FROM 'done')
		FROM redrive_lifecycle WHERE id >= $1 AND id < $2 GROUP BY 1, 2, 3, 4, 5, 6`, p.lo(), p.Hi)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	groups, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PartitionGroup, error) {
		var g PartitionGroup
		var newest pgtype.Timestamptz
		err := r.Scan(&g.Queue, &g.Type, &g.ErrorType, &g.State, &g.Exhaustion, &g.Fingerprint, &g.N, &g.Bytes,
			&newest, &g.ArchiveDue, &g.NotArchived)
		g.Newest = newest.Time
		if newest.InfinityModifier != pgtype.Finite {
			g.Newest = unknownAge
		}
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return groups, nil
}

// subtractGroups takes groups out of the statistics.
func subtractGroups(ctx context.Context, tx pgx.Tx, groups []PartitionGroup) error {
	n := len(groups)
	queues, types, errTypes, states, exhs, fps := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	counts, bytes := make([]int64, n), make([]int64, n)
	for i, g := range groups {
		queues[i], types[i], errTypes[i], states[i], exhs[i], fps[i] = g.Queue, g.Type, g.ErrorType, g.State, g.Exhaustion, g.Fingerprint
		counts[i], bytes[i] = -g.N, -g.Bytes
	}
	if _, err := tx.Exec(ctx, `INSERT INTO redrive_record_count_delta (queue, type, error_type, state, exhaustion, fingerprint, n, bytes)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[])`,
		queues, types, errTypes, states, exhs, fps, counts, bytes); err != nil {
		return fmt.Errorf("subtract from the statistics: %w", err)
	}
	return nil
}

// CleanDroppedCoords removes up to limit DLQ coordinates of dropped
// partition p (those of records no longer stored) and returns how many; when
// none is left it removes p from the registry, so that its week may be made
// again.
func (m *Maint) CleanDroppedCoords(ctx context.Context, p *Partition, limit int) (int64, error) {
	tag, err := m.db.Exec(ctx, `DELETE FROM redrive_record_coord WHERE id IN (
		SELECT c.id FROM redrive_record_coord c WHERE c.id >= $1 AND c.id < $2
			AND NOT EXISTS (SELECT 1 FROM redrive_lifecycle l WHERE l.id = c.id) LIMIT $3)`, p.lo(), p.Hi, limit)
	if err != nil {
		return 0, fmt.Errorf("partition %s: remove coordinates: %w", p.Name, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := m.db.Exec(ctx, "DELETE FROM redrive_partition WHERE name = $1 AND dropped_at IS NOT NULL", p.Name); err != nil {
			return 0, fmt.Errorf("partition %s: unregister: %w", p.Name, err)
		}
	}
	return tag.RowsAffected(), nil
}

// idBefore is the smallest UUID of t's millisecond: every id made at t or
// later is at least it (redrive_uuid_at in SQL).
func idBefore(t time.Time) pgtype.UUID {
	var id pgtype.UUID
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id.Bytes[i] = byte(ms >> (40 - 8*i))
	}
	id.Valid = true
	return id
}

// LockNotGranted says err is partition DDL giving up on a lock it waited
// partitionLockTimeout for (SQLSTATE 55P03), or aborted to break a deadlock
// as often as it tried: busy tables, tried again next pass.
func LockNotGranted(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03" || isDeadlock(err)
}
