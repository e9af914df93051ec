package records

import (
	"github.com/redrive/redrive/internal/dlq"
)

// TargetError refuses a target topic no redelivery may go to (Redrive's own
// or a Kafka internal one): the caller's mistake.
type TargetError struct {
	Topic string
	// Problem says why, as dlq.ReservedTopics.Problem does.
	Problem string
}

func (e *TargetError) Error() string { return "target topic " + e.Topic + " " + e.Problem }

// NoRouteError refuses to retry a record that has no topic to go back to
// (see route.go) when no target topic was named.
type NoRouteError struct {
	ID, Queue string
	// Why says why its queue is no topic to go back to.
	Why string
}

func (e *NoRouteError) Error() string {
	return "record " + e.ID + " has no topic to go back to: its queue " + e.Queue + " " + e.Why
}

// PolicyError is an operator's retry policy that the bounds or validation
// refuse; Err is the policy package's error (policy.Errors or
// *policy.FieldError), its paths relative to the policy.
type PolicyError struct{ Err error }

func (e *PolicyError) Error() string { return "retry policy: " + e.Err.Error() }
func (e *PolicyError) Unwrap() error { return e.Err }

// RetryConflictError is a retry of a record in no state to be retried: it is
// in flight (errors.Is ErrInFlight) or completed (ErrConflict). Record is
// the record as the retry read it (nil if it vanished), to say why.
type RetryConflictError struct {
	Err    error
	Record *dlq.Record
}

func (e *RetryConflictError) Error() string { return e.Err.Error() }
func (e *RetryConflictError) Unwrap() error { return e.Err }
