package records

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// Bounds of a canary (docs/redelivery.md, Canary).
const (
	// MaxCanarySample is the largest sample: a count above it is refused,
	// a percentage is cut to it.
	MaxCanarySample = 10_000
	// MinCanaryWatch and MaxCanaryWatch bound the watch.
	MinCanaryWatch = time.Second
	MaxCanaryWatch = 24 * time.Hour
	// DefaultAbortIfRefail is abort_if_refail when it is not given.
	DefaultAbortIfRefail = 0.1
)

type (
	// CanarySpec is a canary as a task stores it.
	CanarySpec = store.CanarySpec
	// CanaryReport counts what became of a canary's sample.
	CanaryReport = store.CanaryReport
	// QuietRequest is an incident marked "resolved, redrive when quiet".
	QuietRequest = store.QuietRequest
)

// The task state a canary's verdict ends a task in.
const TaskAborted = store.TaskAborted

// Canary verdicts.
const (
	CanaryPassed       = store.CanaryPassed
	CanaryAborted      = store.CanaryAborted
	CanaryInconclusive = store.CanaryInconclusive
)

// What a canary whose watch ends with outcomes pending does.
const (
	CanaryStop     = store.CanaryStop
	CanaryContinue = store.CanaryContinue
)

// Canary is a canary as an operator asks for it: a sample (a count of
// records, or a percentage of the task's), how long to watch it, and the
// share of it failing again the same way that aborts the task.
type Canary struct {
	// Count is the sample as a number of records; 0 when Percent is used.
	Count int64
	// Percent is the sample as a share of the task's records (0 < p <= 100).
	Percent float64
	// Sample is the sample as given (a JSON number or string).
	Sample json.RawMessage
	// Watch is how long the sample is watched once redelivered; WatchText
	// as given (ISO 8601).
	Watch     time.Duration
	WatchText string
	// AbortIfRefail is a ratio from 0 (any record failing again the same
	// way aborts) to 1 (only the whole sample does).
	AbortIfRefail float64
	// OnInconclusive is "stop" ("" too) or "continue": what the task does
	// when the watch ends with outcomes of the sample still pending.
	OnInconclusive string
}

// FieldError is a field of an operator's request that is wrong: Field
// names it (canary.sample), Msg says what was expected.
type FieldError struct{ Field, Msg string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ParseCanary reads a canary object; errors are *FieldError naming
// canary.<field> (prefix "canary").
func ParseCanary(raw json.RawMessage, prefix string) (*Canary, error) {
	fail := func(field, msg string) error {
		if field != "" {
			field = prefix + "." + field
		} else {
			field = prefix
		}
		return &FieldError{Field: field, Msg: msg}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fail("", `must be an object such as {"sample": 100, "watch": "PT10M", "abort_if_refail": 0.1}`)
	}
	for k := range fields {
		switch k {
		case "sample", "watch", "abort_if_refail", "on_inconclusive":
		default:
			return nil, fail(k, "unknown field: a canary takes sample, watch, abort_if_refail and on_inconclusive")
		}
	}
	c := &Canary{AbortIfRefail: DefaultAbortIfRefail}
	sample, ok := fields["sample"]
	if !ok || isNull(sample) {
		return nil, fail("sample", `required: a number of records (1 to 10000) or a percentage of the task's records such as "5%"`)
	}
	c.Sample = sample
	if err := c.parseSample(sample); err != "" {
		return nil, fail("sample", err)
	}
	watch, ok := fields["watch"]
	if !ok || isNull(watch) {
		return nil, fail("watch", "required: an ISO 8601 duration from PT1S to P1D, such as PT10M")
	}
	if err := json.Unmarshal(watch, &c.WatchText); err != nil {
		return nil, fail("watch", "must be an ISO 8601 duration (a string) from PT1S to P1D, such as PT10M")
	}
	d, err := policy.ParseDuration(c.WatchText)
	if err != nil {
		return nil, fail("watch", err.Error())
	}
	if d < MinCanaryWatch || d > MaxCanaryWatch {
		return nil, fail("watch", "must be from PT1S to P1D")
	}
	c.Watch = d
	if v, ok := fields["abort_if_refail"]; ok && !isNull(v) {
		f, ok := number(v)
		if !ok || f < 0 || f > 1 {
			return nil, fail("abort_if_refail", "must be a number from 0 to 1: the share of the sample failing again the same way that aborts the task")
		}
		c.AbortIfRefail = f
	}
	if v, ok := fields["on_inconclusive"]; ok && !isNull(v) {
		var s string
		if json.Unmarshal(v, &s) != nil || s != store.CanaryStop && s != store.CanaryContinue {
			return nil, fail("on_inconclusive", `must be "stop" (the default: a watch that ends with outcomes of the sample still pending stops the task) or "continue"`)
		}
		c.OnInconclusive = s
	}
	return c, nil
}

// parseSample reads the sample: a whole number of records or a
// percentage string. It returns what is wrong ("" when nothing is).
func (c *Canary) parseSample(raw json.RawMessage) string {
	const want = `must be a number of records from 1 to 10000, or a percentage of the task's records from "0.01%" to "100%"`
	var s string
	if json.Unmarshal(raw, &s) == nil {
		p, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if !ok || err != nil || math.IsNaN(f) || f < 0.01 || f > 100 {
			return want
		}
		c.Percent = f
		return ""
	}
	f, ok := number(raw)
	if !ok || f != math.Trunc(f) || f < 1 || f > MaxCanarySample {
		return want
	}
	c.Count = int64(f)
	return ""
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// number reads a JSON number (and nothing else).
func number(raw json.RawMessage) (float64, bool) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] == '"' {
		return 0, false // json.Number takes a string holding a number too
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0)
}

// Spec is the canary of a task of total records: its sample size is the
// count, or the percentage of total rounded up (at least 1), at most
// MaxCanarySample.
func (c *Canary) Spec(total int64) CanarySpec {
	n := c.Count
	if n == 0 {
		n = max(1, int64(math.Ceil(float64(total)*c.Percent/100)))
	}
	return CanarySpec{Sample: c.Sample, SampleSize: min(n, MaxCanarySample), Watch: c.WatchText, WatchMs: c.Watch.Milliseconds(),
		AbortIfRefail: c.AbortIfRefail, OnInconclusive: c.OnInconclusive}
}

// CanaryOf reads a stored canary back into what an operator asked.
func CanaryOf(spec *CanarySpec) *Canary {
	c := &Canary{Sample: spec.Sample, Watch: spec.WatchDuration(), WatchText: spec.Watch, AbortIfRefail: spec.AbortIfRefail,
		OnInconclusive: spec.OnInconclusive}
	_ = c.parseSample(spec.Sample)
	return c
}

// PublishCanary emits the event of a canary's phase change: watching,
// passed, aborted or inconclusive (the task runner calls it).
func (s *Service) PublishCanary(ctx context.Context, t *Task) {
	var typ events.Type
	switch t.CanaryState.Phase {
	case store.CanaryWatch:
		typ = events.TaskCanaryWatching
	case store.CanaryPassed:
		typ = events.TaskCanaryPassed
	case store.CanaryAborted:
		typ = events.TaskCanaryAborted
	case store.CanaryInconclusive:
		typ = events.TaskCanaryInconclusive
	default:
		return
	}
	queue := ""
	if f, err := filter.ParseJSON(t.Filter, filter.Bulk, "filter"); err == nil {
		queue = f.Queue
	}
	report := t.CanaryState.Report
	if report == nil {
		report = &CanaryReport{}
	}
	s.cfg.Events.Publish(ctx, events.Canary(typ, queue, events.CanaryData{TaskID: t.ID, Filter: t.Filter,
		Phase: t.CanaryState.Phase, Canary: t.Canary, Report: report, WatchUntil: t.CanaryState.WatchUntil}))
}

// QuietParams marks an incident "resolved, redrive when quiet".
type QuietParams struct {
	Incident string
	// Quiet is how long no failure of it may arrive before its retry starts.
	Quiet  time.Duration
	Canary *Canary
	// RateLimit bounds the retry's records per second (0: unlimited).
	RateLimit   float64
	RequestedBy string
	// Now is the time of the request (the services' clock).
	Now time.Time
}

// MarkQuiet stores an incident's "redrive when quiet" request (replacing
// the one it had). ErrNotFound: no such incident.
func (s *Service) MarkQuiet(ctx context.Context, p *QuietParams) (*QuietRequest, error) {
	return s.store.SetQuietRequest(ctx, &QuietRequest{Incident: p.Incident, Quiet: p.Quiet, Canary: p.Canary.Spec(0),
		RateLimit: p.RateLimit, RequestedBy: p.RequestedBy, RequestedAt: p.Now})
}

// QuietRequestOf returns an incident's request, or ErrNotFound.
func (s *Service) QuietRequestOf(ctx context.Context, incident string) (*QuietRequest, error) {
	return s.store.QuietRequestOf(ctx, incident)
}

// WithdrawQuiet withdraws an incident's waiting request (ErrNotFound: none waits).
func (s *Service) WithdrawQuiet(ctx context.Context, incident string) error {
	return s.store.DeleteQuietRequest(ctx, incident)
}

// QuietDue returns up to limit requests whose quiet lasted long enough at now.
func (s *Service) QuietDue(ctx context.Context, now time.Time, limit int) ([]QuietRequest, error) {
	return s.store.QuietDue(ctx, now, limit)
}

// StartQuiet starts the canary retry of a quiet incident, as the operator
// who asked for it: the task (its sample sized from the records it finds
// now), the request marked started, in one transaction; an audit entry in
// their name; the event incident.redrive_started. ErrConflict: the request
// was withdrawn or replaced meanwhile (nothing was created).
func (s *Service) StartQuiet(ctx context.Context, q *QuietRequest, now time.Time) (*Task, error) {
	f := filter.Filter{Incident: q.Incident}
	n, err := s.store.CountRetryable(ctx, &f, s.RetryScope())
	if err != nil {
		return nil, err
	}
	spec := CanaryOf(&q.Canary).Spec(n)
	started := *q
	started.StartedAt = now
	t, err := s.store.CreateTask(ctx, &store.CreateTaskParams{Kind: TaskRetry, Filter: f.Canonical(), RateLimit: q.RateLimit,
		BatchSize: 500, Total: n, CreatedBy: q.RequestedBy, Canary: &spec, Quiet: &started})
	if err != nil {
		return nil, err
	}
	s.cfg.KickTasks()
	canon := f.Canonical()
	if err := s.store.AddAudit(ctx, &AuditEntry{KeyName: q.RequestedBy, Action: "incident.redrive_when_quiet.started",
		Method: "-", Path: "maintenance: incident " + q.Incident + " quiet since " + q.QuietSince.UTC().Format(time.RFC3339),
		Target: "task:" + t.ID, Filter: canon, Count: &n, Status: 202}); err != nil {
		s.log.Error("audit log write failed", "action", "incident.redrive_when_quiet.started", "key", q.RequestedBy, "err", err)
	}
	s.cfg.Events.Publish(ctx, events.RedriveStarted(events.RedriveStartedData{ID: q.Incident, TaskID: t.ID,
		RequestedBy: q.RequestedBy, Quiet: policy.FormatDuration(q.Quiet), QuietSince: q.QuietSince}))
	s.log.Info("incident quiet: canary retry started", "incident", q.Incident, "task", t.ID, "records", n,
		"sample", spec.SampleSize, "requested_by", q.RequestedBy, "quiet_since", q.QuietSince)
	return t, nil
}
