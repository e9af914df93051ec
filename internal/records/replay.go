package records

import (
	"context"
	"time"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store"
)

// ReplayParams is one replay rule's pass over one queue (or every queue).
type ReplayParams struct {
	// Rule is the rule's name, recorded in the record's meta.
	Rule string
	// Filter selects the dead letters the rule replays.
	Filter filter.Filter
	// Queue, when set, restricts the rule to one queue (a rule from a
	// topic's policy).
	Queue string
	// ExcludeQueues are skipped (draining topics).
	ExcludeQueues []string
	// DiscardedBefore: only records discarded at or before it (now - delay).
	DiscardedBefore time.Time
	// MaxReplays: only records this rule replayed fewer times.
	MaxReplays int
	// Limit is the most records replayed (> 0).
	Limit int
	// Now is the time of the replay.
	Now time.Time
}

// Replay sends the dead letters a rule matches back for redelivery, on db
// (the connection holding the replay lock), leaving records of reserved
// queues alone as every retry of many records does. The caller reports
// them (ReplayedEvents) and wakes the scheduler once per pass.
func (s *Service) Replay(ctx context.Context, db *store.Maint, p *ReplayParams) ([]Replayed, error) {
	return db.Replay(ctx, &store.ReplayParams{
		Rule: p.Rule, Filter: p.Filter, Scope: s.RetryScope(), Queue: p.Queue, ExcludeQueues: p.ExcludeQueues,
		DiscardedBefore: p.DiscardedBefore, MaxReplays: p.MaxReplays, Limit: p.Limit, Now: p.Now,
	})
}

// ReplayedEvent is dead_letter.replayed of record d, replayed by rule.
func ReplayedEvent(d *Replayed, rule string) events.Event {
	return events.Record(events.DeadLetterReplayed, events.RecordData{
		ID: d.ID, Queue: d.Queue, RecordKeyData: events.RecordKey(d.KeyPrefix, d.KeySize), Type: d.Type, State: "available",
		ErrorType: d.ErrorType, Rule: rule, ReplayCount: d.ReplayCount,
	})
}
