package records

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// The read side the HTTP API renders, and the configuration it keeps (queue
// configs, replay rules, the audit log): each is what the store answers,
// named here so that the API depends on records alone.

// Get reads one record (ErrNotFound when there is none).
func (s *Service) Get(ctx context.Context, id string) (*dlq.Record, error) {
	return s.store.Get(ctx, id)
}

// List reads a page of record previews.
func (s *Service) List(ctx context.Context, p *ListParams) (*PreviewPage, error) {
	return s.store.ListPreviews(ctx, p)
}

// RecordPart reads one part of a record whole (key or value), with the
// record's queue, and nothing else of it.
func (s *Service) RecordPart(ctx context.Context, id, part string) (queue string, b []byte, err error) {
	return s.store.RecordPart(ctx, id, part)
}

// Stats counts the records of queue ("": every queue).
func (s *Service) Stats(ctx context.Context, queue string) (*Stats, error) {
	return s.store.Stats(ctx, queue, nil)
}

// ErrorTypes counts records by error type, among the queues matching
// queueGlobs (nil: every queue).
func (s *Service) ErrorTypes(ctx context.Context, queue, search string, limit int, queueGlobs []string) ([]ErrorTypeCount, int64, error) {
	return s.store.ErrorTypes(ctx, queue, search, limit, queueGlobs)
}

// QueueCounts counts every queue's records by state.
func (s *Service) QueueCounts(ctx context.Context) (map[string]map[string]int64, error) {
	return s.store.QueueCounts(ctx)
}

// OldestRecords is when each of queues' oldest record was stored.
func (s *Service) OldestRecords(ctx context.Context, queues []string) (map[string]time.Time, error) {
	return s.store.OldestRecords(ctx, queues)
}

// QueueHealth is what the queue views show of a queue besides its counts.
type QueueHealth struct {
	// Blocked are its records waiting on a failed produce's backoff.
	Blocked Blocked
	// Unacknowledged counts its records marked unacknowledged.
	Unacknowledged int64
	// Activity is its last hour, and when its oldest record was stored.
	Activity Activity
}

// QueueHealth reads the health of queues; now dates their last hour.
func (s *Service) QueueHealth(ctx context.Context, queues []string, now time.Time) (map[string]QueueHealth, error) {
	blocked, err := s.store.BlockedQueues(ctx, queues)
	if err != nil {
		return nil, err
	}
	unacked, err := s.store.UnacknowledgedQueues(ctx, queues)
	if err != nil {
		return nil, err
	}
	act, err := s.store.QueueActivity(ctx, queues, now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]QueueHealth, len(queues))
	for _, q := range queues {
		out[q] = QueueHealth{Blocked: blocked[q], Unacknowledged: unacked[q], Activity: act[q]}
	}
	return out, nil
}

// QueueConfig reads a topic's API config (ErrNotFound: none).
func (s *Service) QueueConfig(ctx context.Context, name string) (*QueueConfig, error) {
	return s.store.QueueConfig(ctx, name)
}

// CreateQueue stores a new explicit topic config (ErrExists: it has one).
func (s *Service) CreateQueue(ctx context.Context, name string, config json.RawMessage) (*QueueConfig, error) {
	return s.store.CreateQueue(ctx, name, config)
}

// PutQueueConfig replaces (or, with merge, merges into) a topic's API config.
func (s *Service) PutQueueConfig(ctx context.Context, name string, config json.RawMessage, merge bool) (*QueueConfig, error) {
	return s.store.PutQueueConfig(ctx, name, config, merge)
}

// DeleteQueue deletes a topic's API config (ErrNotFound: none).
func (s *Service) DeleteQueue(ctx context.Context, name string) error {
	return s.store.DeleteQueue(ctx, name)
}

// GetTask reads a task (ErrNotFound).
func (s *Service) GetTask(ctx context.Context, id string) (*Task, error) {
	return s.store.GetTask(ctx, id)
}

// ListTasks lists tasks, and whether more follow.
func (s *Service) ListTasks(ctx context.Context, p *ListTasksParams) ([]Task, bool, error) {
	return s.store.ListTasks(ctx, p)
}

// CancelTask asks a task to stop (ErrNotFound, ErrConflict when it is over).
func (s *Service) CancelTask(ctx context.Context, id string) (*Task, error) {
	return s.store.CancelTask(ctx, id)
}

// ListIncidents lists incidents with live records.
func (s *Service) ListIncidents(ctx context.Context, p *IncidentParams) ([]Incident, error) {
	return s.store.ListIncidents(ctx, p)
}

// GetIncident reads one incident (ErrNotFound), counting the records of
// p.QueueGlobs only when set.
func (s *Service) GetIncident(ctx context.Context, p *IncidentParams) (*Incident, error) {
	return s.store.GetIncident(ctx, p)
}

// Activity reads failures stored and records redelivered over time.
func (s *Service) Activity(ctx context.Context, p ActivityParams) (*ActivitySeries, error) {
	return s.store.Activity(ctx, p)
}

// AddAudit appends an entry to the audit log.
func (s *Service) AddAudit(ctx context.Context, e *AuditEntry) error { return s.store.AddAudit(ctx, e) }

// Audit reads the audit log: a page, the total, and whether more follow.
func (s *Service) Audit(ctx context.Context, p *AuditParams) ([]AuditEntry, int64, bool, error) {
	return s.store.Audit(ctx, p)
}

// ListReplayRules lists the API's replay rules.
func (s *Service) ListReplayRules(ctx context.Context) ([]ReplayRule, error) {
	return s.store.ListReplayRules(ctx)
}

// GetReplayRule reads an API replay rule (ErrNotFound).
func (s *Service) GetReplayRule(ctx context.Context, name string) (*ReplayRule, error) {
	return s.store.GetReplayRule(ctx, name)
}

// CreateReplayRule stores a new API replay rule (ErrRuleExists).
func (s *Service) CreateReplayRule(ctx context.Context, r *ReplayRule) error {
	return s.store.CreateReplayRule(ctx, r)
}

// UpdateReplayRule replaces an API replay rule (ErrNotFound).
func (s *Service) UpdateReplayRule(ctx context.Context, r *ReplayRule) error {
	return s.store.UpdateReplayRule(ctx, r)
}

// DeleteReplayRule deletes an API replay rule (ErrNotFound).
func (s *Service) DeleteReplayRule(ctx context.Context, name string) error {
	return s.store.DeleteReplayRule(ctx, name)
}
