package records

import (
	"context"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// Replay sends the dead letters a rule matches back for redelivery, on db
// (the connection holding the replay lock), leaving records of reserved
// queues alone as every retry of many records does, and the records an
// ingest-side rule turned away (a skip_retry filter's, QUEUE_FULL, …): those
// are never redelivered automatically; an operator may retry them. The
// caller reports them (ReplayedEvents) and wakes the scheduler once per pass.
func (s *Service) Replay(ctx context.Context, db *store.Maint, p *ReplayParams) ([]Replayed, error) {
	sc := s.RetryScope()
	sc.NotErrorTypes = policy.TurnedAwayErrorTypes()
	return db.Replay(ctx, sc, p)
}

// ReplayedEvent is dead_letter.replayed of record d, replayed by rule.
func ReplayedEvent(d *Replayed, rule string) events.Event {
	return events.Record(events.DeadLetterReplayed, events.RecordData{
		ID: d.ID, Queue: d.Queue, RecordKeyData: events.RecordKey(d.KeyPrefix, d.KeySize), Type: d.Type, State: "available",
		ErrorType: d.ErrorType, Rule: rule, ReplayCount: d.ReplayCount,
	})
}
