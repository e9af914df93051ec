package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// CanarySpec is a bulk retry's canary, as stored with its task: redeliver
// SampleSize records first, watch them for WatchMs, and abort the task when
// the share of the sample that fails again the way it failed before reaches
// AbortIfRefail.
type CanarySpec struct {
	// Sample is the sample as the operator gave it: a count (100) or a
	// share of the task's records ("5%").
	Sample json.RawMessage `json:"sample"`
	// SampleSize is how many records the sample takes (at most).
	SampleSize int64 `json:"sample_size"`
	// Watch is the watch as given (ISO 8601), WatchMs the same in ms.
	Watch   string `json:"watch"`
	WatchMs int64  `json:"watch_ms"`
	// AbortIfRefail is a ratio from 0 to 1.
	AbortIfRefail float64 `json:"abort_if_refail"`
	// OnInconclusive is what a watch that ends with outcomes still pending
	// does: CanaryStop (""), or CanaryContinue with the rest.
	OnInconclusive string `json:"on_inconclusive,omitempty"`
}

// What a canary whose watch ends with outcomes pending does.
const (
	CanaryStop     = "stop"
	CanaryContinue = "continue"
)

// WatchDuration is how long the sample is watched.
func (c *CanarySpec) WatchDuration() time.Duration {
	return time.Duration(c.WatchMs) * time.Millisecond
}

// Canary phases.
const (
	// CanarySample: the sample is being retried, then redelivered.
	CanarySample = "sample"
	// CanaryWatch: the sample was redelivered and is watched until WatchUntil.
	CanaryWatch = "watch"
	// CanaryPassed: the verdict let the task go on with the rest.
	CanaryPassed = "passed"
	// CanaryAborted: the verdict stopped the task.
	CanaryAborted = "aborted"
	// CanaryInconclusive: the watch ended with outcomes of the sample still
	// pending; the task stopped, or went on when asked to (OnInconclusive).
	CanaryInconclusive = "inconclusive"
)

// CanaryState is where a task's canary stands.
type CanaryState struct {
	// Phase is one of the Canary* phases; "" for a task without a canary.
	Phase string
	// Sampled counts the records of the sample retried so far.
	Sampled int64
	// SampledAt is when the whole sample had been retried; WatchUntil when
	// the watch ends (both on the task runner's clock).
	SampledAt, WatchUntil *time.Time
	// Report is the sample's outcomes as last counted (nil before the first count).
	Report *CanaryReport
}

// CanaryReport counts what became of a canary's sample.
type CanaryReport struct {
	// Sample is how many records the sample holds.
	Sample int64 `json:"sample"`
	// Delivered were produced to their topic since their retry.
	Delivered int64 `json:"delivered"`
	// Completed are completed (by their redelivery or an acknowledgement,
	// as their topic's completion says) and did not fail again.
	Completed int64 `json:"completed"`
	// FailedSame failed again with the fingerprint they had before;
	// FailedDifferent failed again with another one.
	FailedSame      int64 `json:"failed_same"`
	FailedDifferent int64 `json:"failed_different"`
	// Pending neither completed nor failed yet (not redelivered yet, or
	// waiting for an acknowledgement).
	Pending int64 `json:"pending"`
	// Deleted were deleted (purged, pruned) meanwhile.
	Deleted int64 `json:"deleted"`
}

// canaryOf reads a task row's canary into t.
func canaryOf(t *Task, r *dbsqlc.RedriveTask) error {
	if len(r.Canary) > 0 {
		t.Canary = &CanarySpec{}
		if err := json.Unmarshal(r.Canary, t.Canary); err != nil {
			return fmt.Errorf("decode task canary: %w", err)
		}
	}
	if r.CanaryPhase != nil {
		t.CanaryState.Phase = *r.CanaryPhase
	}
	t.CanaryState.Sampled, t.CanaryState.SampledAt, t.CanaryState.WatchUntil = r.CanarySampled, r.CanarySampledAt, r.CanaryWatchUntil
	if len(r.CanaryReport) > 0 {
		t.CanaryState.Report = &CanaryReport{}
		if err := json.Unmarshal(r.CanaryReport, t.CanaryState.Report); err != nil {
			return fmt.Errorf("decode task canary report: %w", err)
		}
	}
	return nil
}

// AddSample notes, in the transaction of a task's batch, that the records
// ids (just retried by it) belong to its canary's sample, with the
// fingerprint and latest error they have: a retry keeps both, so they are
// what the records had before it. The task's Sampled counts them (once
// each).
func (s *Store) AddSample(ctx context.Context, tx *Tx, taskID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.q.TaskSampleAdd(ctx, tx.tx, taskID, ids); err != nil {
		return fmt.Errorf("note the canary sample of task %s: %w", taskID, err)
	}
	return nil
}

// SampleRecord is one record of a canary's sample as it is now.
type SampleRecord struct {
	ID string
	// Fingerprint is the record's fingerprint before its retry, LastError
	// its latest error then (nil: none).
	Fingerprint string
	LastError   *dlq.ErrorEntry
	// Outcome is "failed_same" or "failed_different" once it was seen
	// failing again (it stays so), "" otherwise.
	Outcome string
	// Present is false when the record was deleted.
	Present bool
	// State and CompletedBy are the record's now.
	State       dlq.State
	CompletedBy dlq.CompletedBy
	// Queued says it waits for its redelivery still (or is being produced).
	Queued bool
	// FirstNew is the first error it got since its retry; nil when it got
	// none (or Outcome is already set).
	FirstNew *dlq.ErrorEntry
}

// Sample returns the records of a task's canary sample as they are now.
func (s *Store) Sample(ctx context.Context, taskID string) ([]SampleRecord, error) {
	rows, err := s.q.TaskSampleStates(ctx, s.pool, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the canary sample of task %s: %w", taskID, err)
	}
	out := make([]SampleRecord, len(rows))
	for i, r := range rows {
		out[i] = SampleRecord{ID: r.RecordID, Fingerprint: r.Fingerprint, Outcome: r.Outcome, Present: r.Present,
			State: dlq.State(r.State), CompletedBy: dlq.CompletedBy(r.CompletedBy), Queued: r.Queued}
		for _, e := range []struct {
			raw json.RawMessage
			to  **dlq.ErrorEntry
		}{{r.LastError, &out[i].LastError}, {r.FirstNew, &out[i].FirstNew}} {
			if len(e.raw) == 0 || string(e.raw) == "null" {
				continue
			}
			var entry dlq.ErrorEntry
			if err := json.Unmarshal(e.raw, &entry); err != nil {
				return nil, fmt.Errorf("read the canary sample of task %s: decode an error of %s: %w", taskID, r.RecordID, err)
			}
			*e.to = &entry
		}
	}
	return out, nil
}

// Sample outcomes that stay.
const (
	OutcomeFailedSame      = "failed_same"
	OutcomeFailedDifferent = "failed_different"
)

// SetSampleOutcomes notes that records of a task's sample failed again
// (outcomes[i] is OutcomeFailedSame or OutcomeFailedDifferent): an outcome
// once noted is never changed.
func (s *Store) SetSampleOutcomes(ctx context.Context, taskID string, ids, outcomes []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE redrive_task_sample s SET outcome = u.outcome
		FROM unnest($2::uuid[], $3::text[]) AS u(id, outcome)
		WHERE s.task_id = $1 AND s.record_id = u.id AND s.outcome IS NULL`, taskID, ids, outcomes)
	if err != nil {
		return fmt.Errorf("note the canary outcomes of task %s: %w", taskID, err)
	}
	return nil
}

// CanaryUpdate is a change of a task's canary; nil fields stay as they are.
type CanaryUpdate struct {
	Phase                 string
	SampledAt, WatchUntil *time.Time
	Report                *CanaryReport
}

// UpdateCanary changes a task's canary and renews its lease (the runner
// calls it while it watches), or returns ErrLeaseLost.
func (s *Store) UpdateCanary(ctx context.Context, t *Task, u CanaryUpdate, lease time.Duration) (*Task, error) {
	p := dbsqlc.TaskCanaryUpdateParams{SampledAt: u.SampledAt, WatchUntil: u.WatchUntil, LeaseMs: lease.Milliseconds(),
		ID: t.ID, LeaseToken: t.LeaseToken}
	if u.Phase != "" {
		p.Phase = &u.Phase
	}
	if u.Report != nil {
		b, err := json.Marshal(u.Report)
		if err != nil {
			return nil, fmt.Errorf("encode canary report: %w", err)
		}
		p.Report = b
	}
	nt, err := oneTask(s.q.TaskCanaryUpdate(ctx, s.pool, p))
	if errors.Is(err, ErrNotFound) {
		return nil, ErrLeaseLost
	}
	if err != nil {
		return nil, fmt.Errorf("update the canary of task %s: %w", t.ID, err)
	}
	return nt, nil
}
