package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// WeeksAhead is how many weeks after the current one the pruner's pass keeps
// partitions made for, so that ingest never writes to the DEFAULT partition.
const WeeksAhead = 4

// keptRecheck is how long a past partition found still needed is left alone
// before the pass reads it again (one scan of its lifecycle rows).
const keptRecheck = time.Hour

// coordCleanBatches bounds the DLQ coordinates of dropped partitions one pass
// removes (batches of BatchSize); the next pass goes on.
const coordCleanBatches = 100

// partitions is the partition step of a pruning pass, before the batched
// deletes: it makes the partitions of this week and the next WeeksAhead,
// drops every past partition none of whose records is needed any more (a
// change of metadata in place of a delete per record), and removes the DLQ
// coordinates of dropped ones. Records of partitions that cannot be dropped
// yet are left to the batched deletes.
func (p *Pruner) partitions(ctx context.Context, db *store.Maint, now time.Time, res *PruneResult) error {
	m := p.cfg.Metrics
	created, err := db.EnsureWeeks(ctx, now, WeeksAhead+1)
	for _, name := range created {
		m.Partitions.WithLabelValues("created").Inc()
		p.log.Info("created partition", "partition", name)
	}
	errs := []error{err}
	parts, err := db.Partitions(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i := range parts {
		part := &parts[i]
		if part.Dropped {
			errs = append(errs, p.cleanCoords(ctx, db, part))
			continue
		}
		if part.HiAt.After(now) || p.keptUntil[part.Name].After(now) {
			continue
		}
		live, err := db.PartitionLive(ctx, part)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if live {
			p.kept(part.Name, now, "records waiting for (re)delivery or an acknowledgement")
			continue
		}
		groups, err := db.DropPartition(ctx, part, func(gs []store.PartitionGroup) string { return p.keepReason(gs, now) })
		if errors.Is(err, store.ErrPartitionKept) {
			p.kept(part.Name, now, err.Error())
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.Partitions.WithLabelValues("dropped").Inc()
		p.reportDropped(ctx, part.Name, groups, res)
		errs = append(errs, p.cleanCoords(ctx, db, part))
	}
	// A lock not granted in time is the tables being busy, not a failure:
	// the next pass tries again.
	var failed []error
	for _, err := range errs {
		if err != nil && store.LockNotGranted(err) {
			p.log.Warn("partition step deferred to the next pass: a lock was not granted in time", "error", err)
			continue
		}
		failed = append(failed, err)
	}
	return errors.Join(failed...)
}

func (p *Pruner) kept(name string, now time.Time, why string) {
	if p.keptUntil == nil {
		p.keptUntil = map[string]time.Time{}
	}
	p.keptUntil[name] = now.Add(keptRecheck)
	p.log.Debug("partition kept", "partition", name, "reason", why)
}

// cleanCoords removes the DLQ coordinates of a dropped partition's records,
// a bounded number per pass.
func (p *Pruner) cleanCoords(ctx context.Context, db *store.Maint, part *store.Partition) error {
	for range coordCleanBatches {
		n, err := db.CleanDroppedCoords(ctx, part, p.cfg.BatchSize)
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}

// keepReason says why a past partition holding groups must be kept, or ""
// when every record in it is past its queue's retention, as the batched
// deletes would remove it: a dead letter past dead_letter.retention.max_age
// (a queue limited by max_count alone keeps its weeks: which records go
// depends on the others), a discard past retention.discarded, a cancelled
// record past retention.cancelled, a completed one past retention.completed,
// and with archiving on, its archive copy made when one is due (under
// pruning_policy archive: made, for every record).
func (p *Pruner) keepReason(groups []store.PartitionGroup, now time.Time) string {
	for _, g := range groups {
		t := p.cfg.Policy(g.Queue)
		var ret time.Duration
		switch {
		case g.State == string(dlq.StateDiscarded) && g.Exhaustion == string(dlq.ExhaustionDeadLetter):
			ret = t.DeadLetter.Retention.MaxAge
		case g.State == string(dlq.StateDiscarded) && g.Exhaustion == string(dlq.ExhaustionDiscard):
			ret = t.Retention.Discarded
		case g.State == string(dlq.StateDiscarded) && g.Exhaustion == string(dlq.ExhaustionCancelled):
			ret = t.Retention.Cancelled
		case g.State == string(dlq.StateCompleted) && g.Exhaustion == "":
			ret = t.Retention.Completed
		default:
			return fmt.Sprintf("queue %s has %s records", g.Queue, g.State)
		}
		if ret <= 0 {
			return fmt.Sprintf("queue %s keeps its %s %s records without an age limit", g.Queue, g.State, g.Exhaustion)
		}
		if !g.Newest.Before(now.Add(-ret)) {
			return fmt.Sprintf("queue %s has %s %s records within their retention", g.Queue, g.State, g.Exhaustion)
		}
		archivePolicy := t.PruningPolicy == policy.PruneArchive
		if archivePolicy && (!p.cfg.Archiving || g.NotArchived) {
			return fmt.Sprintf("queue %s has records without their archive copy (pruning_policy archive)", g.Queue)
		}
		if p.cfg.Archiving && g.ArchiveDue && (archivePolicy || g.State == string(dlq.StateDiscarded)) {
			return fmt.Sprintf("queue %s has records whose archive copy is due", g.Queue)
		}
	}
	return ""
}

// reportDropped counts and announces a dropped partition's records as the
// batched deletes do: per queue and retention, metrics and
// dead_letter.pruned events.
func (p *Pruner) reportDropped(ctx context.Context, name string, groups []store.PartitionGroup, res *PruneResult) {
	type set struct{ queue, state, exhaustion string }
	counts := map[set]int64{}
	var order []set
	var total int64
	for _, g := range groups {
		k := set{g.Queue, g.State, g.Exhaustion}
		if _, ok := counts[k]; !ok {
			order = append(order, k)
		}
		counts[k] += g.N
		total += g.N
	}
	for _, k := range order {
		reason := map[string]string{string(dlq.ExhaustionDeadLetter): ReasonMaxAge, string(dlq.ExhaustionDiscard): ReasonRetentionDiscarded,
			string(dlq.ExhaustionCancelled): ReasonRetentionCancelled, "": ReasonRetentionCompleted}[k.exhaustion]
		p.report(ctx, store.PruneSet{Queue: k.queue, State: dlq.State(k.state), Exhaustion: dlq.Exhaustion(k.exhaustion)},
			reason, p.cfg.Policy(k.queue).PruningPolicy, counts[k], res)
	}
	p.log.Info("dropped partition", "partition", name, "records", total)
}
