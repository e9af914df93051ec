package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// Workers over HTTP (docs/api.md#workers): some consumers cannot take a
// redelivery on Kafka. They publish failures as OJS jobs (PublishJob), and
// fetch, ack and nack them — and the records of pull-mode queues — over HTTP.

// ErrNotLeased is the conflict of an ack or nack of a job no worker holds.
var ErrNotLeased = store.ErrNotLeased

// ErrLeaseExpired is the conflict of an ack or nack that came after the
// job's lease expired: the attempt counts as failed (ExpireLeases), not as
// the worker's ack or nack.
var ErrLeaseExpired = store.ErrLeaseExpired

// ErrLeaseHeldByOther is the conflict of an ack or nack by a worker that
// names itself while another worker holds the job (OJS worker protocol §5.6).
var ErrLeaseHeldByOther = store.ErrLeaseHeldByOther

// Lease is a job's lease and fetch state beyond its record.
type Lease = store.Lease

// Job is a record seen as an OJS job: the record and its lease, read at At.
type Job struct {
	Record *dlq.Record
	Lease  Lease
	// At is the time of the call that read it: a job due for a fetch after
	// At is scheduled.
	At time.Time
	// Deduplicated says a publish answered with this job, which holds the
	// published job's uniqueness key, instead of storing that one.
	Deduplicated bool
}

// ErrorTypeLeaseExpired is the error type of the failed attempt an expired
// lease records (OJS worker protocol §5.5: "The backend MUST record an error
// in the job's errors array with type "visibility_timeout"").
const ErrorTypeLeaseExpired = "visibility_timeout"

// ErrorTypeTimeout is the error type of an attempt still held when its
// execution timeout (timeout_ms) passed.
const ErrorTypeTimeout = "timeout"

// ErrDuplicateJob is the conflict of a job published with an id a record
// already has (*store.DuplicateJobError says which).
var ErrDuplicateJob = store.ErrDuplicateJob

// DuplicateJobError says which job of a batch named a taken id.
type DuplicateJobError = store.DuplicateJobError

// ErrJobTerminal is the conflict of a cancel of a job that is completed,
// discarded or cancelled already.
var ErrJobTerminal = store.ErrJobTerminal

// PublishParams is a failure published over HTTP as an OJS job envelope.
type PublishParams struct {
	// ID is the id the client chose (a UUIDv7), or "" for a new one.
	ID    string
	Type  string
	Queue string
	// Args is the job's args as sent (kept byte for byte as the value).
	Args json.RawMessage
	// Meta is a JSON object, or empty.
	Meta json.RawMessage
	// Retry is a partial retry policy merged onto the queue's, or nil.
	Retry *policy.RetrySpec
	// Attributes are the envelope's attributes Redrive keeps and returns
	// without acting on them (OJS core §5.5 constraint 4), a JSON object,
	// or empty.
	Attributes json.RawMessage
	// DelayUntil, when after Now, makes the job scheduled until then.
	DelayUntil *time.Time
	// Priority orders a queue's due jobs for a fetch, highest first.
	Priority int16
	// Visibility is the job's own lease length (0: the fetch's default);
	// Timeout its execution timeout (0: none).
	Visibility, Timeout time.Duration
	// Unique, when set, makes the job a duplicate of one holding its key.
	Unique *UniquePolicy
	Now    time.Time
}

// PublishJob stores one job published over HTTP (PublishJobs).
func (s *Service) PublishJob(ctx context.Context, p *PublishParams) (*Job, error) {
	jobs, err := s.PublishJobs(ctx, []*PublishParams{p})
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// PublishJobs stores jobs published over HTTP, all or none — available,
// attempt 0, due for a fetch now or at their delay_until (scheduled) — and
// returns them once they are committed. Each job's retry policy is its
// queue's (and type's) with its Retry merged on, held to the bounds policy
// files are: *PolicyError otherwise. A job naming an id a record has:
// *DuplicateJobError.
func (s *Service) PublishJobs(ctx context.Context, ps []*PublishParams) ([]*Job, error) {
	jobs := make([]store.NewJob, len(ps))
	for i, p := range ps {
		j, err := s.newJob(p)
		if err != nil {
			return nil, err
		}
		jobs[i] = j
	}
	holders, err := s.store.InsertJobs(ctx, jobs, ps[0].Now)
	if err != nil {
		return nil, err
	}
	out := make([]*Job, len(jobs))
	for i, j := range jobs {
		if holders[i] != "" {
			// A duplicate its unique policy ignores: the job holding
			// the key is the answer (unique jobs §5.4).
			got, err := s.readJob(ctx, holders[i], ps[i].Now)
			if err != nil {
				return nil, err
			}
			got.Deduplicated = true
			out[i] = got
			continue
		}
		r := j.Record
		s.cfg.Events.Publish(ctx, events.Record(events.DeadLetterAdded, events.RecordData{ID: r.ID, Queue: r.Queue,
			Type: r.Type, State: string(r.State), Attempt: r.Attempt}))
		s.log.Debug("job published over HTTP", "id", r.ID, "queue", r.Queue, "type", r.Type)
		got, err := s.readJob(ctx, r.ID, ps[i].Now)
		if err != nil {
			return nil, err
		}
		out[i] = got
		state, prio := string(dlq.StateAvailable), int(j.Priority)
		d := events.JobData{Priority: &prio}
		if j.FetchAt.After(r.CreatedAt) {
			state, d.ScheduledAt = "scheduled", &j.FetchAt
		}
		s.jobEvent(ctx, events.JobEnqueued, r, state, d)
	}
	return out, nil
}

// newJob is the record and options PublishJobs stores for p.
func (s *Service) newJob(p *PublishParams) (store.NewJob, error) {
	t := s.cfg.Queues.Resolve(p.Queue, p.Type)
	retry := t.Retry
	if p.Retry != nil {
		if err := s.cfg.Queues.Limits().Check(p.Retry); err != nil {
			return store.NewJob{}, &PolicyError{Err: err}
		}
		retry = retry.Merge(p.Retry)
		if err := retry.Validate(); err != nil {
			return store.NewJob{}, &PolicyError{Err: err}
		}
	}
	raw, err := json.Marshal(retry)
	if err != nil {
		return store.NewJob{}, fmt.Errorf("encode retry policy: %w", err)
	}
	meta := p.Meta
	if len(meta) == 0 {
		meta = json.RawMessage("{}")
	}
	now := p.Now.UTC().Truncate(time.Microsecond)
	id := p.ID
	if id == "" {
		id = dlq.NewID(now)
	}
	r := &dlq.Record{ID: id, Queue: p.Queue, Type: p.Type, State: dlq.StateAvailable,
		MaxAttempts: retry.MaxAttempts, Format: dlq.FormatOJS,
		Source: dlq.Source{Topic: p.Queue, Partition: -1, Offset: -1},
		Value:  p.Args, Errors: []dlq.ErrorEntry{}, Retry: raw, Meta: meta,
		CreatedAt: now, EnqueuedAt: &now, UpdatedAt: now}
	j := store.NewJob{Record: r, FetchAt: now, Priority: p.Priority, Attributes: p.Attributes}
	if p.DelayUntil != nil && p.DelayUntil.After(now) {
		j.FetchAt = p.DelayUntil.UTC().Truncate(time.Microsecond)
	}
	if p.Visibility > 0 {
		ms := p.Visibility.Milliseconds()
		j.VisibilityMs = &ms
	}
	if p.Timeout > 0 {
		ms := p.Timeout.Milliseconds()
		j.TimeoutMs = &ms
	}
	if p.Unique != nil {
		key, err := p.Unique.Key(p.Type, p.Queue, p.Args, p.Meta)
		if err != nil {
			return store.NewJob{}, err
		}
		j.Unique = p.Unique.claim(key)
	}
	return j, nil
}

// Job reads a record as a job at now, or ErrNotFound. A lease that passed
// before now is expired first, as the next fetch would expire it
// (ExpireLeases): the job is read as that failed attempt leaves it —
// retryable and due after its backoff, or discarded when the retry policy
// gives up — never as active under a lease no ack or nack can use any more.
func (s *Service) Job(ctx context.Context, id string, now time.Time) (*Job, error) {
	j, err := s.readJob(ctx, id, now)
	if err != nil || !j.Lease.ExpiredAt(now) {
		return j, err
	}
	if _, err := s.expireLease(ctx, id, now); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotLeased) {
		return nil, err
	}
	return s.readJob(ctx, id, now)
}

// readJob reads a record as a job as it is stored, at now, or ErrNotFound.
func (s *Service) readJob(ctx context.Context, id string, now time.Time) (*Job, error) {
	r, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	l, err := s.store.JobLease(ctx, id)
	if err != nil {
		return nil, err
	}
	return &Job{Record: r, Lease: l, At: now}, nil
}

// FetchParams asks for up to Count due jobs of Queues for Worker, leased
// for Lease (0: each job's own visibility timeout, else DefaultLease).
type FetchParams struct {
	// Queues are in the worker's order of preference (OJS worker protocol
	// §6.3: the first has the highest priority).
	Queues []string
	// Worker names the fetching worker, or "" (anonymous).
	Worker              string
	Count               int
	Lease, DefaultLease time.Duration
	Now                 time.Time
}

// FetchJobs first fails the jobs whose lease expired (ExpireLeases), then
// leases up to Count due records of the queues, oldest due first: jobs
// published over HTTP to any of them, and the records of those whose policy
// says redelivery.mode: pull. Each one's attempt is incremented.
func (s *Service) FetchJobs(ctx context.Context, p *FetchParams) ([]Job, error) {
	if p.Worker != "" {
		// The worker is seen (the registry notes it and its queues), and
		// one told to be quiet or to terminate gets nothing (graceful
		// shutdown §5.1: "The backend MUST NOT assign new jobs to a quiet
		// worker"): an empty answer, not an error, as its next heartbeat
		// may not have told it yet.
		st, err := s.store.TouchWorker(ctx, p.Worker, p.Queues, p.Now)
		if err != nil {
			return nil, err
		}
		if !st.Fetches() {
			return nil, nil
		}
	}
	if _, err := s.ExpireLeases(ctx, p.Now); err != nil {
		s.log.Warn("expiring worker leases failed; fetching anyway", "err", err)
	}
	var pull []string
	for _, q := range p.Queues {
		if t := s.cfg.Queues.Resolve(q, ""); t.Pulled() && t.State != policy.TopicPaused {
			pull = append(pull, q)
		}
	}
	var queues []string
	for _, q := range p.Queues {
		if s.cfg.Queues.Resolve(q, "").State != policy.TopicPaused {
			queues = append(queues, q)
		}
	}
	got, err := s.store.FetchJobs(ctx, &store.FetchParams{Queues: queues, PullQueues: pull, Worker: p.Worker,
		Limit: p.Count, Now: p.Now, Lease: p.Lease, DefaultLease: p.DefaultLease})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(got))
	for i, f := range got {
		ids[i] = f.ID
	}
	read, err := s.store.GetJobs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(got))
	for _, f := range got {
		sj, ok := read[f.ID]
		if !ok {
			continue // deleted since: nothing to work on
		}
		j := Job{Record: sj.Record, Lease: sj.Lease, At: p.Now}
		out = append(out, j)
		s.jobEvent(ctx, events.JobStarted, j.Record, "active", events.JobData{WorkerID: p.Worker})
	}
	return out, nil
}

// AckJob completes a job a worker holds at now, with its result (nil:
// none). worker, when not "", must be the lease holder's name:
// ErrLeaseHeldByOther otherwise. ErrNotFound; ErrLeaseExpired when its lease
// passed before now (lateRefusal); ErrNotLeased when no worker holds it.
func (s *Service) AckJob(ctx context.Context, id, worker string, result json.RawMessage, now time.Time) (*Job, error) {
	if err := s.store.AckJob(ctx, id, worker, result, now); err != nil {
		return nil, s.lateRefusal(ctx, id, now, err)
	}
	j, err := s.readJob(ctx, id, now)
	if err != nil {
		return nil, err
	}
	s.jobEvent(ctx, events.JobCompleted, j.Record, string(dlq.StateCompleted), events.JobData{WorkerID: worker,
		Duration: attemptDuration(j.Record, now)})
	return j, nil
}

// lateRefusal is the answer to an ack or nack the store refused with err.
// ErrLeaseExpired: the lease passed before now and no sweep has failed the
// attempt yet; it is failed now, as the next fetch would fail it, so the job
// moves on at once. ErrNotLeased becomes ErrLeaseExpired too when the job's
// latest attempt ended by its lease expiring (a fetch, a read or an earlier
// late call failed it already): a late worker hears the same whoever came
// first. Other errors are returned as they are.
func (s *Service) lateRefusal(ctx context.Context, id string, now time.Time, err error) error {
	switch {
	case errors.Is(err, ErrLeaseExpired):
		if _, xerr := s.expireLease(ctx, id, now); xerr != nil && !errors.Is(xerr, ErrNotFound) && !errors.Is(xerr, ErrNotLeased) {
			s.log.Warn("expiring a worker's lease failed; the next fetch expires it", "id", id, "err", xerr)
		}
	case errors.Is(err, ErrNotLeased):
		if r, gerr := s.store.Get(ctx, id); gerr == nil && lostToExpiry(r) {
			return ErrLeaseExpired
		}
	}
	return err
}

// lostToExpiry says whether r's latest attempt ended by its lease expiring:
// its last error is the expiry's, of this attempt (a fetch since would have
// counted a new one).
func lostToExpiry(r *dlq.Record) bool {
	e := r.LastError()
	return len(r.Errors) > 0 && (e.Type == ErrorTypeLeaseExpired || e.Type == ErrorTypeTimeout) && e.Attempt == r.Attempt
}

// NackParams is a worker's report that its attempt of a job failed.
type NackParams struct {
	ID string
	// Worker, when not "", must be the lease holder's name
	// (ErrLeaseHeldByOther).
	Worker string
	// Code is the error's code (its type, such as "Auth.TokenExpired").
	Code    string
	Message string
	// Retryable false gives up at once, per the policy's on_exhaustion.
	Retryable *bool
	// Details is a JSON object or empty; a string details.error_class is
	// matched against non_retryable_errors too.
	Details json.RawMessage
	Now     time.Time
}

// NackResult is what the retry policy made of a nack.
type NackResult struct {
	Job *Job
	// Delay is how long until a retryable job is due again (0 when discarded).
	Delay  time.Duration
	Reason policy.Reason
}

// NackJob records a worker's failed attempt on the job and lets its retry
// policy decide (OJS retry spec §6, §7): retryable false, or a code or
// details.error_class that matches non_retryable_errors, gives up at once;
// otherwise max_attempts and the backoff decide. ErrNotFound; ErrLeaseExpired
// when the lease passed before p.Now (lateRefusal: the worker's error is not
// recorded, the expiry's is); ErrNotLeased.
func (s *Service) NackJob(ctx context.Context, p *NackParams) (*NackResult, error) {
	res := &NackResult{}
	entry := dlq.ErrorEntry{Type: p.Code, Message: p.Message, Code: dlq.CodeRetry, Details: p.Details}
	class := errorClass(p.Details)
	r, err := s.store.FailJob(ctx, p.ID, p.Worker, p.Now, false, func(r *dlq.Record, _ store.Lease) (*store.JobFailure, error) {
		t := s.Policy(r)
		var d policy.Decision
		switch {
		case p.Retryable != nil && !*p.Retryable:
			entry.Code = dlq.CodeFail
			d = policy.Decision{State: dlq.StateDiscarded, Exhaustion: t.Retry.OnExhaustion, Reason: policy.ReasonNonRetryable}
		case class != "" && t.Retry.NonRetryable(class):
			d = policy.Decision{State: dlq.StateDiscarded, Exhaustion: t.Retry.OnExhaustion, Reason: policy.ReasonNonRetryable}
		default:
			d = t.Decide(r.Attempt, p.Code, dlq.CodeRetry, firstFailure(r, p.Now), p.Now, rand.Float64())
		}
		res.Delay, res.Reason = d.Delay, d.Reason
		return s.failure(r, entry, d, p.Now), nil
	})
	if err != nil {
		return nil, s.lateRefusal(ctx, p.ID, p.Now, err)
	}
	s.publishFailure(ctx, r)
	s.failureEvents(ctx, r, p.Worker, p.Now, r.NextRetryAt)
	l, err := s.store.JobLease(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	res.Job = &Job{Record: r, Lease: l, At: p.Now}
	return res, nil
}

// errorClass is details.error_class when it is a string.
func errorClass(details json.RawMessage) string {
	var d struct {
		ErrorClass any `json:"error_class"`
	}
	if json.Unmarshal(details, &d) != nil {
		return ""
	}
	s, _ := d.ErrorClass.(string)
	return s
}

// firstFailure is when the record first failed, for max_age: its first
// error's time, or (a job published over HTTP that never failed) now.
func firstFailure(r *dlq.Record, now time.Time) time.Time {
	if len(r.Errors) > 0 && !r.Errors[0].OccurredAt.IsZero() {
		return r.Errors[0].OccurredAt
	}
	if r.Format == dlq.FormatOJS {
		return now
	}
	return r.CreatedAt
}

// failure is the store's change for failed attempt entry of r, decided d.
func (s *Service) failure(r *dlq.Record, entry dlq.ErrorEntry, d policy.Decision, now time.Time) *store.JobFailure {
	entry.Attempt, entry.OccurredAt = r.Attempt, now
	errs := append(append([]dlq.ErrorEntry{}, r.Errors...), entry)
	if n := len(errs) - dlq.MaxErrorHistory; n > 0 {
		errs = errs[n:]
	}
	f := &store.JobFailure{State: d.State, Exhaustion: d.Exhaustion, Errors: errs, Now: now,
		Fingerprint: fingerprint.Of(entry.Type, entry.Message, entry.Backtrace)}
	if d.State == dlq.StateRetryable {
		due := now.Add(d.Delay)
		f.DueAt = &due
	}
	return f
}

// publishFailure emits dead_letter.added for a record a failed attempt
// discarded as a dead letter.
func (s *Service) publishFailure(ctx context.Context, r *dlq.Record) {
	if r.State == dlq.StateDiscarded && r.Exhaustion == dlq.ExhaustionDeadLetter {
		s.cfg.Events.Publish(ctx, events.Record(events.DeadLetterAdded, events.RecordData{ID: r.ID, Queue: r.Queue,
			RecordKeyData: events.KeyOf(r.Key), Type: r.Type, State: string(r.State), Attempt: r.Attempt}))
	}
}

// leaseSweep is the most expired leases one ExpireLeases call fails.
const leaseSweep = 100

// ExpireLeases fails the jobs whose lease passed before now: the worker
// neither acked nor nacked in time, and the attempt counts as failed (OJS
// retry spec §9.2: error type redrive.lease_expired, always retryable while
// attempts are left). It returns how many it failed. A fetch runs it first;
// reading a job (Job) and a late ack or nack (lateRefusal) expire that one
// job's lease the same way.
func (s *Service) ExpireLeases(ctx context.Context, now time.Time) (int, error) {
	ids, err := s.store.ExpiredLeases(ctx, now, leaseSweep)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		_, err := s.expireLease(ctx, id, now)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotLeased) {
			continue // acked, nacked, expired or deleted meanwhile
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// expireLease fails the attempt of job id if its lease passed before now
// (see ExpireLeases): ErrNotFound, or ErrNotLeased when no worker holds it or
// its lease still holds. A lease that ended at the attempt's execution
// deadline records a timeout (error type timeout) and the retry policy's
// backoff applies. Otherwise the worker went quiet (OJS worker protocol
// §5.5): the attempt is counted, an error of type visibility_timeout
// recorded, and a job published over HTTP is available again at once unless
// the retry policy gives up (discarded).
func (s *Service) expireLease(ctx context.Context, id string, now time.Time) (*dlq.Record, error) {
	r, err := s.store.FailJob(ctx, id, "", now, true, func(r *dlq.Record, l store.Lease) (*store.JobFailure, error) {
		t := s.Policy(r)
		who := "worker " + l.Worker
		if l.Worker == "" {
			who = "the worker (fetched without a worker_id)"
		}
		if l.TimedOut() {
			d := t.Decide(r.Attempt, ErrorTypeTimeout, dlq.CodeRetry, firstFailure(r, now), now, rand.Float64())
			msg := fmt.Sprintf("attempt %d by %s ran past its execution timeout of %d ms (at %s)",
				r.Attempt, who, *l.TimeoutMs, l.Deadline.UTC().Format(time.RFC3339Nano))
			return s.failure(r, dlq.ErrorEntry{Type: ErrorTypeTimeout, Message: msg, Code: dlq.CodeRetry}, d, now), nil
		}
		d := t.Decide(r.Attempt, ErrorTypeLeaseExpired, dlq.CodeRetry, firstFailure(r, now), now, rand.Float64())
		msg := fmt.Sprintf("%s neither acked nor nacked attempt %d before its lease expired at %s",
			who, r.Attempt, l.Until.UTC().Format(time.RFC3339Nano))
		f := s.failure(r, dlq.ErrorEntry{Type: ErrorTypeLeaseExpired, Message: msg, Code: dlq.CodeRetry}, d, now)
		if f.State == dlq.StateRetryable {
			// Available again at once: the job did not fail, its worker
			// went away (a record of a pull-mode queue is due now).
			f.DueAt = &now
			if r.Format == dlq.FormatOJS {
				f.State = dlq.StateAvailable
			}
		}
		return f, nil
	})
	if err != nil {
		return nil, err
	}
	s.publishFailure(ctx, r)
	s.failureEvents(ctx, r, "", now, r.NextRetryAt)
	s.log.Info("worker lease expired; the attempt counts as failed", "id", r.ID, "queue", r.Queue,
		"attempt", r.Attempt, "state", r.State)
	return r, nil
}

// CancelJob cancels job id at now (OJS HTTP binding §9.4) and returns it
// with its state before the cancel (active when a worker held it).
// ErrNotFound; ErrJobTerminal when it is completed, discarded or cancelled
// already, or is a record read from Kafka.
func (s *Service) CancelJob(ctx context.Context, id string, now time.Time) (*Job, string, error) {
	previous, err := s.store.CancelJob(ctx, id, now)
	if err != nil {
		return nil, "", err
	}
	j, err := s.readJob(ctx, id, now)
	if err != nil {
		return nil, "", err
	}
	s.log.Debug("job cancelled", "id", id, "queue", j.Record.Queue, "previous_state", previous)
	s.jobEvent(ctx, events.JobCancelled, j.Record, "cancelled", events.JobData{Reason: "cancelled over HTTP (previously " + previous + ")"})
	return j, previous, nil
}
