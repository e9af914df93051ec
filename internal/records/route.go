package records

import (
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// This file is the one place the own-topics rule is applied to record
// transitions: a redelivery never goes to one of Redrive's own topics (DLQ,
// archive, events) or to a Kafka internal one (dlq.ReservedTopics is the
// definition of those topics), so a record whose queue is one of them has no
// topic to go back to. A single retry refuses such a record unless a target
// topic is named (Service.Retry); every transition of many records — bulk
// retry tasks, the compatibility requeue, replay rules — leaves them alone
// (RetryScope).

// RetryScope is what every retry of many records adds to the filter it was
// given: records of reserved queues are left alone.
func RetryScope(reserved dlq.ReservedTopics) filter.Scope {
	return filter.Scope{NotQueues: reserved.Names(), NotInternal: true}
}

// RetryScope is the scope of every retry of many records (see RetryScope).
func (s *Service) RetryScope() filter.Scope { return RetryScope(s.cfg.Reserved) }

// TargetProblem says why topic cannot be the target of a redelivery (an
// override's or a queue config's target topic), or "" when it can.
func (s *Service) TargetProblem(topic string) string { return s.cfg.Reserved.Problem(topic) }

// noRoute says why record r has no topic to go back to, or "" when it has:
// its queue is reserved, or it could not be parsed (its queue is the DLQ
// topic it was read from) — unless a target topic is named, by target or
// by an earlier retry's override.
func (s *Service) noRoute(r *dlq.Record, target string) string {
	if target != "" || (r.Redelivery != nil && r.Redelivery.Topic != "") {
		return ""
	}
	why := s.cfg.Reserved.Problem(r.Queue)
	if r.Format == dlq.FormatUnparseable && why == "" {
		why = "is not the topic it came from: the record could not be parsed"
	}
	return why
}
