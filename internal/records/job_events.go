package records

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/tracing"
)

// The worker API's lifecycle events (OJS events spec §4.1): each published
// once the change it describes is committed.

// jobEvent publishes an event of type t about job r, now in state, with
// what d adds (its job fields are set here).
func (s *Service) jobEvent(ctx context.Context, t events.Type, r *dlq.Record, state string, d events.JobData) {
	d.JobID, d.JobType, d.Queue, d.State = r.ID, r.Type, r.Queue, state
	if d.Attempt == 0 {
		d.Attempt = r.Attempt
	}
	d.TraceID = traceID(r.Meta)
	s.cfg.Events.Publish(ctx, events.Job(t, d))
	s.observe(ctx, t, r, state, &d)
}

// observe records what the OJS observability extension asks of a job's
// state change t (ojs-observability.md): its metrics (§8, JobMetrics) and,
// for a job that carries a trace context, its spans (§6, §7, Tracer): the
// enqueue span when it is published, a process span when an attempt ends
// (ack, failure, or a cancel while a worker held it), from its fetch.
func (s *Service) observe(ctx context.Context, t events.Type, r *dlq.Record, state string, d *events.JobData) {
	m, tr := s.cfg.JobMetrics, s.cfg.Tracer
	if m == nil && !tr.On() {
		return
	}
	switch t {
	case events.JobEnqueued:
		m.JobEnqueued(r.Queue, r.Type)
		if tr.On() {
			tr.JobEnqueued(ctx, tracing.JobContext(r.Meta, r.Headers), tracing.Job{ID: r.ID, Type: r.Type, Queue: r.Queue,
				State: state, Priority: d.Priority, ScheduledAt: d.ScheduledAt}, r.CreatedAt)
		}
	case events.JobStarted:
		// The first fetch of a job published over HTTP (a record read
		// from Kafka has no enqueued_at): its queue time (§8.2).
		if r.Attempt == 1 && r.EnqueuedAt != nil && r.RedeliveredAt != nil {
			m.JobStarted(r.Queue, r.Type, r.RedeliveredAt.Sub(*r.EnqueuedAt))
		}
	case events.JobCompleted:
		m.JobCompleted(r.Queue, r.Type)
		s.attemptEnded(ctx, r, state, d.Duration, d.WorkerID, nil)
	case events.JobFailed:
		var e *tracing.JobError
		if d.Error != nil {
			e = &tracing.JobError{Type: d.Error.Type, Message: d.Error.Message, Attempt: r.Attempt}
		}
		s.attemptEnded(ctx, r, state, d.Duration, d.WorkerID, e)
		// Every failed attempt either gives up (job.discarded follows)
		// or tries again: retryable, or available again at once after an
		// expired lease (which publishes no job.retrying).
		if r.State == dlq.StateDiscarded {
			m.JobFailed(r.Queue, r.Type)
		} else {
			m.JobRetried(r.Queue, r.Type)
		}
	case events.JobCancelled:
		m.JobCancelled(r.Queue, r.Type)
		if attemptOpen(r) && r.DiscardedAt != nil {
			// Cancelled while a worker held it: the attempt ends here.
			s.attemptEnded(ctx, r, state, r.DiscardedAt.Sub(*r.RedeliveredAt), "", nil)
		}
	}
}

// attemptEnded records r's current attempt, which ran for took from its
// fetch and left the job in state: its duration (ojs.job.duration) and its
// process span, linked to the job's trace context.
func (s *Service) attemptEnded(ctx context.Context, r *dlq.Record, state string, took time.Duration, worker string, e *tracing.JobError) {
	if r.RedeliveredAt == nil {
		return // never fetched: no attempt ran
	}
	s.cfg.JobMetrics.AttemptEnded(r.Queue, r.Type, state, took)
	if !s.cfg.Tracer.On() {
		return
	}
	start := *r.RedeliveredAt
	s.cfg.Tracer.JobProcessed(ctx, tracing.JobContext(r.Meta, r.Headers), tracing.Job{ID: r.ID, Type: r.Type, Queue: r.Queue,
		State: state, Attempt: r.Attempt, Worker: worker}, start, start.Add(max(took, 0)), e)
}

// attemptOpen says whether r's current attempt was fetched and has not
// ended: no error of that attempt is recorded (a nack and an expired lease
// record one) and r is not completed. It is how a cancel tells a job a
// worker held (its previous state active) from one waiting for a fetch.
func attemptOpen(r *dlq.Record) bool {
	if r.Attempt == 0 || r.RedeliveredAt == nil || r.State == dlq.StateCompleted {
		return false
	}
	return len(r.Errors) == 0 || r.LastError().Attempt != r.Attempt
}

// traceID is a job's trace id (events spec §8.3): meta.trace_id, or the
// trace id of meta.traceparent (W3C: version-traceid-parentid-flags).
func traceID(meta json.RawMessage) string {
	var m struct {
		TraceID     any `json:"trace_id"`
		TraceParent any `json:"traceparent"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return ""
	}
	if s, ok := m.TraceID.(string); ok {
		return s
	}
	if s, ok := m.TraceParent.(string); ok {
		if parts := strings.Split(s, "-"); len(parts) == 4 {
			return parts[1]
		}
	}
	return ""
}

// attemptDuration is how long r's current attempt ran until now: from its
// fetch (started_at).
func attemptDuration(r *dlq.Record, now time.Time) time.Duration {
	if r.RedeliveredAt == nil {
		return 0
	}
	return now.Sub(*r.RedeliveredAt)
}

// failureEvents publishes what a failed attempt of r (its latest error)
// made of it: job.failed, then job.retrying (retryable, due at due) or
// job.discarded.
func (s *Service) failureEvents(ctx context.Context, r *dlq.Record, worker string, now time.Time, due *time.Time) {
	last := r.LastError()
	e := &events.JobError{Code: last.Type, Type: last.Type, Message: last.Message,
		Retryable: r.State != dlq.StateDiscarded}
	s.jobEvent(ctx, events.JobFailed, r, string(r.State), events.JobData{WorkerID: worker, Error: e,
		Duration: attemptDuration(r, now)})
	switch r.State {
	case dlq.StateRetryable:
		s.jobEvent(ctx, events.JobRetrying, r, string(r.State), events.JobData{MaxAttempts: r.MaxAttempts, NextRetryAt: due, Error: e})
	case dlq.StateDiscarded:
		s.jobEvent(ctx, events.JobDiscarded, r, string(r.State), events.JobData{Error: e})
	}
}

// JobDepth counts the jobs of every queue by OJS job state at now
// (JobCounts: the statistics table, the lease index and the scheduled jobs'
// index ranges, never a count of records), queue -> state -> n, every
// state present: what ojs_queue_depth shows (ojs-observability §8.3).
func (s *Service) JobDepth(ctx context.Context, now time.Time) (map[string]map[string]int64, error) {
	counts, err := s.JobCounts(ctx, "", nil, now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]int64, len(counts))
	for q, c := range counts {
		out[q] = map[string]int64{JobScheduled: c.Scheduled, JobAvailable: c.Available, JobActive: c.Active,
			JobRetryable: c.Retryable, JobCompleted: c.Completed, JobDiscarded: c.Discarded, JobCancelled: c.Cancelled}
	}
	return out, nil
}
