package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/records"
)

// The worker API (docs/api.md#workers): records as OJS jobs over HTTP, for
// consumers that cannot take a redelivery on Kafka. Publishing, fetching,
// acking and nacking need the write scope; they are data-plane calls, as
// ingest is, and not written to the audit log.

// DefaultJobQueue is the queue of a job published without one (OJS core).
const DefaultJobQueue = "default"

// CodeLeaseExpired is the error code (409) of an ack or nack that came after
// the job's lease expired (docs/api.md#workers).
const CodeLeaseExpired = "lease_expired"

// Bounds of the worker API.
const (
	maxFetchQueues         = 100
	maxFetchCount          = 100
	defaultVisibilitySecs  = 30
	maxVisibilitySecs      = 12 * 60 * 60 // as SQS
	maxWorkerIDBytes       = 255
	maxErrorMessageBytes   = 64 << 10
	defaultFetchCount      = 1
	jobStateActive         = "active"
	jobStateScheduled      = "scheduled"
	jobStateCancelled      = "cancelled"
	jobPath                = BasePath + "/jobs/"
	visibilityTimeoutParam = "visibility_timeout"
)

// MediaTypeOJS is the media type of the job and worker routes' answers,
// errors included (OJS HTTP binding §4.3: "Servers MUST respond with
// application/openjobspec+json regardless of the Accept header value").
const MediaTypeOJS = "application/openjobspec+json"

// ojsMedia makes the answer of a job or worker route, and the error the
// error handler writes for it, application/openjobspec+json: echo sets
// application/json only when no Content-Type is set. A request refused before
// its route (authentication, body size, Content-Type) stays application/json.
func ojsMedia(c echo.Context) {
	c.Response().Header().Set(echo.HeaderContentType, MediaTypeOJS)
}

// workerRoutes are the worker API's routes: write scope, not audited (data
// plane, as ingest is).
func (s *Server) workerRoutes() []route {
	return []route{
		{method: http.MethodPost, path: "/jobs", handler: s.publishJob},
		{method: http.MethodPost, path: "/jobs/batch", handler: s.publishBatch},
		{method: http.MethodGet, path: "/jobs/:id", handler: s.getJob},
		{method: http.MethodDelete, path: "/jobs/:id", handler: s.cancelJob},
		{method: http.MethodPost, path: "/workers/fetch", handler: s.fetchJobs},
		{method: http.MethodPost, path: "/workers/ack", handler: s.ackJob},
		{method: http.MethodPost, path: "/workers/nack", handler: s.nackJob},
	}
}

// jobJSON is a record as an OJS job.
type jobJSON struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Queue string `json:"queue"`
	// Args are a published job's args as sent; for a record read from
	// Kafka, its value when that is JSON, else null.
	Args  json.RawMessage `json:"args"`
	Meta  json.RawMessage `json:"meta"`
	State string          `json:"state"`
	// Priority orders a queue's due jobs for a fetch (core §5.2).
	Priority    int16           `json:"priority"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Retry       json.RawMessage `json:"retry"`
	// Error is the latest error (OJS core §5.3): set when an attempt
	// failed, cleared when the job is acked (completed).
	Error  *jobErrorJSON  `json:"error"`
	Errors []jobErrorJSON `json:"errors"`
	// Exhaustion says how a discarded job is kept: dead_letter or discard.
	Exhaustion *dlq.Exhaustion `json:"exhaustion"`
	// Source is http for a job published over HTTP, kafka for a record
	// read from a DLQ topic (of a pull-mode queue).
	Source     string    `json:"source"`
	CreatedAt  jsonTime  `json:"created_at"`
	EnqueuedAt *jsonTime `json:"enqueued_at"`
	// ScheduledAt is when a waiting job is due for a fetch.
	ScheduledAt *jsonTime `json:"scheduled_at"`
	// StartedAt is when the job was last fetched.
	StartedAt *jsonTime `json:"started_at"`
	// CompletedAt is when the job reached a terminal state: acked
	// (completed) or given up on (discarded, also in discarded_at).
	CompletedAt *jsonTime `json:"completed_at"`
	DiscardedAt *jsonTime `json:"discarded_at"`
	// CancelledAt is when a cancelled job was cancelled (DELETE /jobs/{id}).
	CancelledAt *jsonTime `json:"cancelled_at,omitempty"`
	// PreviousState is, in the answer to a cancel, the state it ended.
	PreviousState string `json:"previous_state,omitempty"`
	// Deduplicated marks, in a batch's answer, a job published as a
	// duplicate its unique policy ignores: this is the job holding the key.
	Deduplicated bool          `json:"deduplicated,omitempty"`
	Lease        *jobLeaseJSON `json:"lease"`
	// Result is what the worker acked the job with.
	Result json.RawMessage `json:"result"`
	// Attributes are the attributes of the published envelope kept as sent
	// (jobs_envelope.go): encoded at the job's top level.
	Attributes json.RawMessage `json:"-"`
}

// MarshalJSON encodes the job with its kept attributes at the top level.
func (j jobJSON) MarshalJSON() ([]byte, error) {
	type plain jobJSON
	b, err := json.Marshal(plain(j))
	if err != nil {
		return nil, err
	}
	return withAttributes(b, j.Attributes)
}

type jobLeaseJSON struct {
	// WorkerID is null when the fetch named no worker.
	WorkerID  *string  `json:"worker_id"`
	ExpiresAt jsonTime `json:"expires_at"`
}

// jobErrorJSON is one failed attempt: code is the error's code (its type).
type jobErrorJSON struct {
	Attempt    int             `json:"attempt"`
	Code       string          `json:"code"`
	Type       string          `json:"type"`
	Message    string          `json:"message"`
	Retryable  bool            `json:"retryable"`
	Details    json.RawMessage `json:"details"`
	OccurredAt jsonTime        `json:"occurred_at"`
}

func toJobJSON(j *records.Job) jobJSON {
	r := j.Record
	out := jobJSON{ID: r.ID, Type: r.Type, Queue: r.Queue, Args: json.RawMessage("null"), Meta: r.Meta,
		State: string(r.State), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Retry: r.Retry,
		Errors: make([]jobErrorJSON, len(r.Errors)), Source: "kafka",
		CreatedAt: jsonTime(r.CreatedAt), EnqueuedAt: optTime(r.EnqueuedAt), ScheduledAt: optTime(r.NextRetryAt),
		StartedAt: optTime(r.RedeliveredAt), CompletedAt: optTime(r.CompletedAt), DiscardedAt: optTime(r.DiscardedAt),
		Result: json.RawMessage("null"), Attributes: j.Lease.Attributes}
	if r.Format == dlq.FormatOJS {
		out.Source = "http"
	}
	if p := payloadOf(r); p != nil {
		out.Args = p
	}
	if len(out.Meta) == 0 {
		out.Meta = json.RawMessage("{}")
	}
	if r.Exhaustion != "" {
		out.Exhaustion = &r.Exhaustion
	}
	if r.State == dlq.StateDiscarded {
		out.CompletedAt = optTime(r.DiscardedAt)
	}
	out.Priority = j.Lease.Priority
	if out.Source == "http" {
		out.ScheduledAt = optTime(j.Lease.FetchAt)
	}
	switch {
	case r.State == dlq.StateAvailable && j.Lease.FetchAt != nil && j.Lease.FetchAt.After(j.At):
		out.State = jobStateScheduled
	case r.State == dlq.StateDiscarded && r.Exhaustion == dlq.ExhaustionCancelled:
		// Core §5.3: completed_at is set when a job is completed or
		// discarded; a cancelled job has cancelled_at instead.
		out.State, out.CancelledAt, out.CompletedAt = jobStateCancelled, optTime(r.DiscardedAt), nil
	}
	if l := j.Lease; l.Until != nil {
		out.State = jobStateActive
		out.Lease = &jobLeaseJSON{ExpiresAt: jsonTime(*l.Until)}
		if l.Worker != "" {
			out.Lease.WorkerID = &l.Worker
		}
	}
	if len(j.Lease.Result) > 0 {
		out.Result = j.Lease.Result
	}
	for i, e := range r.Errors {
		out.Errors[i] = jobErrorJSON{Attempt: e.Attempt, Code: e.Type, Type: e.Type, Message: e.Message,
			Retryable: e.Code == dlq.CodeRetry || e.Code == "", Details: e.Details, OccurredAt: jsonTime(e.OccurredAt)}
		if len(e.Details) == 0 || string(e.Details) == "null" {
			out.Errors[i].Details = json.RawMessage("{}")
		}
	}
	if n := len(out.Errors); n > 0 && r.State != dlq.StateCompleted {
		last := out.Errors[n-1]
		out.Error = &last
	}
	return out
}

// compactKeep returns raw as sent: args are kept byte for byte (numbers
// exact), only the surrounding whitespace trimmed.
func compactKeep(raw json.RawMessage) json.RawMessage { return bytes.TrimSpace(raw) }

// nameProblem says what is wrong with a job type or error code, or "".
func nameProblem(s string) string {
	switch {
	case len(s) > dlq.MaxNameBytes:
		return fmt.Sprintf("at most %d bytes, got %d", dlq.MaxNameBytes, len(s))
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	return ""
}

// jobTypeProblem says what is wrong with a published job's type (OJS core
// §5.1): dot-separated segments, each a lowercase letter then lowercase
// letters, digits or underscores ("email.send"), at most dlq.MaxNameBytes
// bytes. "" when nothing is. Records stored from Kafka keep whatever type
// their producer gave: the rule is the publisher's, over HTTP.
func jobTypeProblem(s string) string {
	if len(s) > dlq.MaxNameBytes {
		return fmt.Sprintf("at most %d bytes, got %d", dlq.MaxNameBytes, len(s))
	}
	const want = `must be dot-separated segments, each a lowercase letter followed by lowercase letters, digits or underscores, such as "email.send"`
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "" || seg[0] < 'a' || seg[0] > 'z' {
			return want + ", got " + jsonString(s)
		}
		for i := 1; i < len(seg); i++ {
			if c := seg[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
				return want + ", got " + jsonString(s)
			}
		}
	}
	return ""
}

// maxJobQueueBytes is the longest queue name a job published over HTTP
// may name (OJS core §5.1).
const maxJobQueueBytes = 128

// jobQueueProblem says what is wrong with the queue of a published job (OJS
// core §5.1: "MUST be a non-empty string matching the pattern
// [a-z0-9][a-z0-9\-\.]* ... Maximum length: 128 characters"), or "". Like
// the type's rule it is the publisher's: a fetch may name any topic, as the
// records of a pull-mode queue keep whatever topic they were read from.
func jobQueueProblem(q string) string {
	const want = `must be lowercase letters, digits, hyphens and dots, starting with a letter or digit (OJS core §5.1), such as "emails" or "billing.retry"`
	if len(q) > maxJobQueueBytes {
		return fmt.Sprintf("at most %d bytes, got %d", maxJobQueueBytes, len(q))
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		lower, digit := c >= 'a' && c <= 'z', c >= '0' && c <= '9'
		if !lower && !digit && (i == 0 || c != '-' && c != '.') {
			return want + ", got " + jsonString(q)
		}
	}
	return ""
}

// checkJobQueue refuses a queue name that is no Kafka topic name, or one of
// Redrive's own topics.
func (s *Server) checkJobQueue(q, field string) error {
	if q == "_default" {
		return invalidParam(field, defaultIsLayer)
	}
	if msg := dlq.TopicNameProblem(q); msg != "" {
		return invalidParam(field, msg)
	}
	if msg := s.rec.TargetProblem(q); msg != "" {
		return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeValidationError,
			Message: field + ": " + jsonString(q) + " " + msg,
			Details: map[string]any{"parameter": field, "fields": []map[string]string{{"field": field, "message": msg}}}}
	}
	return nil
}

func (s *Server) getJob(c echo.Context) error {
	ojsMedia(c)
	id, err := recordID(c)
	if err != nil {
		return err
	}
	// A lease that passed is expired before the job is read, as the next
	// fetch would: a read never shows a job active under a dead lease.
	j, err := s.rec.Job(c.Request().Context(), id, s.cfg.Now())
	if errors.Is(err, records.ErrNotFound) {
		return notFound("no job with id " + id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job": toJobJSON(s.maskedJob(c, j))})
}

// fetchBody is POST /workers/fetch.
type fetchBody struct {
	Queues   []string `json:"queues"`
	WorkerID *string  `json:"worker_id"`
	Count    *int     `json:"count"`
	// VisibilityTimeout is in seconds (Redrive's own field);
	// VisibilityTimeoutMs is OJS HTTP binding §10.1's, in milliseconds.
	VisibilityTimeout   *int   `json:"visibility_timeout"`
	VisibilityTimeoutMs *int64 `json:"visibility_timeout_ms"`
}

// workerIDOf checks an optional worker_id: "" when it is absent.
func workerIDOf(id *string) (string, error) {
	if id == nil {
		return "", nil
	}
	if *id == "" {
		return "", invalidParam("worker_id", "must not be empty when present: leave it out, or name the worker")
	}
	if len(*id) > maxWorkerIDBytes {
		return "", invalidParam("worker_id", fmt.Sprintf("at most %d bytes", maxWorkerIDBytes))
	}
	if msg := nameProblem(*id); msg != "" {
		return "", invalidParam("worker_id", msg)
	}
	return *id, nil
}

func (s *Server) fetchJobs(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b fetchBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	if len(b.Queues) == 0 {
		return invalidParam("queues", "required: the queues to fetch from, at least one")
	}
	if len(b.Queues) > maxFetchQueues {
		return invalidParam("queues", fmt.Sprintf("at most %d queues", maxFetchQueues))
	}
	seen := map[string]bool{}
	var queues []string
	for i, q := range b.Queues {
		if err := s.checkJobQueue(q, "queues["+itoa(i)+"]"); err != nil {
			return err
		}
		if !seen[q] {
			seen[q] = true
			queues = append(queues, q)
		}
	}
	worker, err := workerIDOf(b.WorkerID)
	if err != nil {
		return err
	}
	count := defaultFetchCount
	if b.Count != nil {
		if count = *b.Count; count < 1 || count > maxFetchCount {
			return invalidParam("count", fmt.Sprintf("must be from 1 to %d, got %d", maxFetchCount, count))
		}
	}
	// No visibility timeout in the fetch: each job's own, else the default.
	var lease time.Duration
	switch {
	case b.VisibilityTimeout != nil && b.VisibilityTimeoutMs != nil:
		return invalidParam(visibilityTimeoutParam+"_ms", "is sent as well as "+visibilityTimeoutParam+": send one of the two")
	case b.VisibilityTimeout != nil:
		if vt := *b.VisibilityTimeout; vt < 1 || vt > maxVisibilitySecs {
			return invalidParam(visibilityTimeoutParam, fmt.Sprintf("must be a number of seconds from 1 to %d, got %d", maxVisibilitySecs, vt))
		}
		lease = time.Duration(*b.VisibilityTimeout) * time.Second
	case b.VisibilityTimeoutMs != nil:
		if ms := *b.VisibilityTimeoutMs; ms < 1 || ms > maxVisibilitySecs*1000 {
			return invalidParam(visibilityTimeoutParam+"_ms", fmt.Sprintf("must be a number of milliseconds from 1 to %d, got %d", maxVisibilitySecs*1000, ms))
		}
		lease = time.Duration(*b.VisibilityTimeoutMs) * time.Millisecond
	}
	jobs, err := s.rec.FetchJobs(c.Request().Context(), &records.FetchParams{Queues: queues, Worker: worker, Count: count,
		Lease: lease, DefaultLease: defaultVisibilitySecs * time.Second, Now: s.cfg.Now()})
	if err != nil {
		return err
	}
	out := make([]jobJSON, len(jobs))
	for i := range jobs {
		out[i] = toJobJSON(&jobs[i])
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": out})
}

// jobIDOf reads and checks a body's job_id.
func jobIDOf(id *string) (string, error) {
	if id == nil || *id == "" {
		return "", invalidParam("job_id", "required: the id of a job this worker fetched")
	}
	u, err := uuid.Parse(*id)
	if err != nil {
		return "", invalidParam("job_id", "must be a UUID")
	}
	return u.String(), nil
}

// notLeased is the 409 of an ack or nack of a job no worker holds.
func (s *Server) notLeased(c echo.Context, id string, now time.Time) error {
	msg := "job " + id + " is not held by a worker: it was not fetched, it was acked or nacked already, or it was fetched again since its lease expired"
	return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: msg, Details: s.jobDetails(c, id, now)}
}

// leaseExpired is the 409 of an ack or nack that came after the job's lease
// expired: the attempt counted as failed, and the job is as that left it.
func (s *Server) leaseExpired(c echo.Context, id string, now time.Time) error {
	msg := "the lease on job " + id + " expired before this call: the attempt counted as failed (error type " +
		records.ErrorTypeLeaseExpired + ") and the retry policy decided; fetch the job again to work on it"
	return &APIError{Status: http.StatusConflict, Code: CodeLeaseExpired, Message: msg, Details: s.jobDetails(c, id, now)}
}

// heldByOther is the 409 of an ack or nack naming another worker than the
// one holding the job's lease (OJS worker protocol §5.6: "The backend MUST
// reject ACK or FAIL requests from a worker that does not hold the
// reservation").
func (s *Server) heldByOther(c echo.Context, id, worker string, now time.Time) error {
	msg := "job " + id + " is held by another worker than " + jsonString(worker) + ": only the worker that fetched it may ack or nack it"
	d := s.jobDetails(c, id, now)
	d["worker_id"] = worker
	return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: msg, Details: d}
}

// jobDetails are the details of a 409 of an ack or nack: the job and, when
// it can be read, its state.
func (s *Server) jobDetails(c echo.Context, id string, now time.Time) map[string]any {
	details := map[string]any{"job_id": id}
	if j, err := s.rec.Job(c.Request().Context(), id, now); err == nil {
		details["state"] = toJobJSON(j).State
	}
	return details
}

// ackBody is POST /workers/ack.
type ackBody struct {
	JobID *string `json:"job_id"`
	// WorkerID, when sent, must name the worker holding the job.
	WorkerID *string         `json:"worker_id"`
	Result   json.RawMessage `json:"result"`
}

func (s *Server) ackJob(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b ackBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	id, err := jobIDOf(b.JobID)
	if err != nil {
		return err
	}
	worker, err := workerIDOf(b.WorkerID)
	if err != nil {
		return err
	}
	var result json.RawMessage
	if len(b.Result) > 0 && string(b.Result) != "null" {
		result = bytes.TrimSpace(b.Result)
	}
	now := s.cfg.Now()
	j, err := s.rec.AckJob(c.Request().Context(), id, worker, result, now)
	switch {
	case errors.Is(err, records.ErrNotFound):
		return notFound("no job with id " + id)
	case errors.Is(err, records.ErrLeaseHeldByOther):
		return s.heldByOther(c, id, worker, now)
	case errors.Is(err, records.ErrLeaseExpired):
		return s.leaseExpired(c, id, now)
	case errors.Is(err, records.ErrNotLeased):
		return s.notLeased(c, id, now)
	case err != nil:
		return err
	}
	out := toJobJSON(j)
	return c.JSON(http.StatusOK, map[string]any{"acknowledged": true, "job_id": id, "state": out.State,
		"completed_at": out.CompletedAt, "job": out})
}

// nackBody is POST /workers/nack.
type nackBody struct {
	JobID *string `json:"job_id"`
	// WorkerID, when sent, must name the worker holding the job.
	WorkerID *string        `json:"worker_id"`
	Error    *nackErrorJSON `json:"error"`
}

type nackErrorJSON struct {
	Code      *string         `json:"code"`
	Message   *string         `json:"message"`
	Retryable *bool           `json:"retryable"`
	Details   json.RawMessage `json:"details"`
}

func (s *Server) nackJob(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	var b nackBody
	if err := bindStrict(c, &b); err != nil {
		return err
	}
	id, err := jobIDOf(b.JobID)
	if err != nil {
		return err
	}
	worker, err := workerIDOf(b.WorkerID)
	if err != nil {
		return err
	}
	e := b.Error
	if e == nil {
		return invalidParam("error", "required: {code, message, retryable, details}")
	}
	if e.Code == nil || *e.Code == "" {
		return invalidParam("error.code", "required: the error's code, such as \"Auth.TokenExpired\"")
	}
	if msg := nameProblem(*e.Code); msg != "" {
		return invalidParam("error.code", msg)
	}
	p := &records.NackParams{ID: id, Worker: worker, Code: *e.Code, Retryable: e.Retryable, Now: s.cfg.Now()}
	if e.Message != nil {
		if len(*e.Message) > maxErrorMessageBytes {
			return invalidParam("error.message", fmt.Sprintf("at most %d bytes", maxErrorMessageBytes))
		}
		p.Message = *e.Message
	}
	if len(e.Details) > 0 && string(e.Details) != "null" {
		if t := bytes.TrimSpace(e.Details); t[0] != '{' {
			return invalidParam("error.details", "must be a JSON object")
		}
		p.Details = bytes.TrimSpace(e.Details)
	}
	res, err := s.rec.NackJob(c.Request().Context(), p)
	switch {
	case errors.Is(err, records.ErrNotFound):
		return notFound("no job with id " + id)
	case errors.Is(err, records.ErrLeaseHeldByOther):
		return s.heldByOther(c, id, worker, p.Now)
	case errors.Is(err, records.ErrLeaseExpired):
		return s.leaseExpired(c, id, p.Now)
	case errors.Is(err, records.ErrNotLeased):
		return s.notLeased(c, id, p.Now)
	case err != nil:
		return err
	}
	out := toJobJSON(res.Job)
	var delay *int64
	if res.Job.Record.State == dlq.StateRetryable {
		ms := res.Delay.Milliseconds()
		delay = &ms
	}
	// HTTP binding §10.3's fields, and Redrive's retry_delay_ms, reason, job.
	return c.JSON(http.StatusOK, map[string]any{"job_id": id, "state": out.State, "attempt": out.Attempt,
		"max_attempts": out.MaxAttempts, "next_attempt_at": out.ScheduledAt, "discarded_at": out.DiscardedAt,
		"completed_at":   out.CompletedAt,
		"retry_delay_ms": delay, "reason": res.Reason, "job": out})
}

// maskedJob is j as the caller may read it: reading a job is not the data
// plane (a fetch is), so its args are masked as the record is
// (docs/security.md, "Data masking").
func (s *Server) maskedJob(c echo.Context, j *records.Job) *records.Job {
	m := s.maskerOf(c)
	if !m.masks(j.Record.Queue) {
		return j
	}
	masked := *j
	masked.Record = m.record(j.Record)
	return &masked
}
