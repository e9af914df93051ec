package events

import (
	"time"
	"unicode/utf8"
)

// Bounds of a job event's strings. What a worker or a producer sent is
// hostile: a job event stays small (it is kept in the broker's history, sent
// to every stream and produced to the events topic) whatever they send.
const (
	// MaxJobEventString bounds job_id, job_type, queue, state, worker_id,
	// error code and type, cancelled_by and trace_id.
	MaxJobEventString = 255
	// MaxJobEventMessage bounds an error message and a cancellation reason.
	MaxJobEventMessage = 2048
)

// JobData is what the worker API knows of a job when it changes state: the
// input of Job. Zero fields are left out of the event.
type JobData struct {
	JobID   string
	JobType string
	Queue   string
	// State is the job's state after the change (available, scheduled,
	// active, completed, retryable, discarded, cancelled).
	State string
	// Attempt is the attempt the event is about, 1-indexed: the one that
	// starts (job.started), succeeded (job.completed), failed (job.failed,
	// job.retrying) or the last one (job.discarded: total_attempts).
	Attempt int
	// MaxAttempts is the job's attempt limit (job.retrying).
	MaxAttempts int
	// WorkerID is the worker that fetched, acknowledged or failed the job.
	WorkerID string
	// Duration is how long the attempt ran, from fetch to ack or failure:
	// duration_ms, always sent on job.completed, on other types when
	// positive.
	Duration time.Duration
	// Priority and ScheduledAt are a job's enqueue options (job.enqueued).
	Priority    *int
	ScheduledAt *time.Time
	// NextRetryAt is when the next attempt is due (job.retrying).
	NextRetryAt *time.Time
	// VisibleUntil is the lease's new end (job.heartbeat).
	VisibleUntil *time.Time
	// Error is the failure: error on job.failed and job.retrying, last_error
	// on job.discarded.
	Error *JobError
	// CancelledBy and Reason say who cancelled the job and why
	// (job.cancelled).
	CancelledBy string
	Reason      string
	// TraceID is the job's trace id (meta.trace_id, or the trace id of
	// meta.traceparent), sent on every event of the job (events spec §8.3).
	TraceID string
}

// JobError is a job's failure, as the worker reported it.
type JobError struct {
	// Code is the machine-readable code (the nack's error.code). Required
	// by the spec: an empty one is sent as "handler_error".
	Code string
	// Type is the error's type or class, when known.
	Type string
	// Message is the human-readable description (cut to
	// MaxJobEventMessage bytes).
	Message string
	// Retryable says whether the failure may be retried (job.failed).
	Retryable bool
}

// JobEventData is the data of a job event (OJS events spec §4.1): job_id,
// job_type, queue and state always, and the fields of its type.
type JobEventData struct {
	JobID   string `json:"job_id"`
	JobType string `json:"job_type"`
	Queue   string `json:"queue"`
	State   string `json:"state,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// MaxAttempts and NextRetryAt are set on job.retrying.
	MaxAttempts int        `json:"max_attempts,omitempty"`
	NextRetryAt *time.Time `json:"next_retry_at,omitempty"`
	// VisibleUntil is set on job.heartbeat.
	VisibleUntil *time.Time `json:"visible_until,omitempty"`
	// TotalAttempts and LastError are set on job.discarded.
	TotalAttempts int           `json:"total_attempts,omitempty"`
	LastError     *JobErrorData `json:"last_error,omitempty"`
	WorkerID      string        `json:"worker_id,omitempty"`
	DurationMS    *int64        `json:"duration_ms,omitempty"`
	Error         *JobErrorData `json:"error,omitempty"`
	Priority      *int          `json:"priority,omitempty"`
	ScheduledAt   *time.Time    `json:"scheduled_at,omitempty"`
	CancelledBy   string        `json:"cancelled_by,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	TraceID       string        `json:"trace_id,omitempty"`
}

// JobErrorData is a failure in a job event: code and message, the error's
// type when known, and retryable on job.failed.
type JobErrorData struct {
	Code      string `json:"code"`
	Type      string `json:"type,omitempty"`
	Message   string `json:"message"`
	Retryable *bool  `json:"retryable,omitempty"`
}

// Job returns a job event of type t (JobEnqueued, JobStarted, JobCompleted,
// JobFailed, JobRetrying, JobDiscarded, JobCancelled) about the job d
// describes: subject the job id, queue d.Queue, data a JobEventData shaped
// as the events spec's §4.1 asks for t. Strings are cut to their bounds.
// Publish it after the change it describes is committed.
func Job(t Type, d JobData) Event {
	data := JobEventData{
		JobID: clipString(d.JobID, MaxJobEventString), JobType: clipString(d.JobType, MaxJobEventString),
		Queue: clipString(d.Queue, MaxJobEventString), State: clipString(d.State, MaxJobEventString),
		Attempt: d.Attempt, WorkerID: clipString(d.WorkerID, MaxJobEventString),
		Priority: d.Priority, ScheduledAt: utcPtr(d.ScheduledAt),
		CancelledBy: clipString(d.CancelledBy, MaxJobEventString), Reason: clipString(d.Reason, MaxJobEventMessage),
		TraceID: clipString(d.TraceID, MaxJobEventString),
	}
	if d.Duration > 0 || t == JobCompleted {
		ms := max(d.Duration, 0).Milliseconds()
		data.DurationMS = &ms
	}
	if d.Error != nil {
		e := &JobErrorData{Code: clipString(d.Error.Code, MaxJobEventString), Type: clipString(d.Error.Type, MaxJobEventString),
			Message: clipString(d.Error.Message, MaxJobEventMessage)}
		if e.Code == "" {
			e.Code = "handler_error"
		}
		switch t {
		case JobDiscarded:
			data.LastError = e
		case JobFailed:
			retryable := d.Error.Retryable
			e.Retryable = &retryable
			data.Error = e
		default:
			data.Error = e
		}
	}
	switch t {
	case JobRetrying:
		data.MaxAttempts, data.NextRetryAt = d.MaxAttempts, utcPtr(d.NextRetryAt)
	case JobHeartbeat:
		data.VisibleUntil = utcPtr(d.VisibleUntil)
	case JobDiscarded:
		data.TotalAttempts = d.Attempt
	}
	return Event{Type: t, Subject: data.JobID, Queue: data.Queue, Data: data}
}

// clipString cuts s to at most n bytes, at a character boundary.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0 && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1]
	}
	return s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
