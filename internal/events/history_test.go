package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/events"
)

// publishAll publishes evs through a started p and waits until the broker
// has them (a subscriber got the last: the history keeps an event before
// any subscriber is offered it).
func publishAll(t *testing.T, p *events.Publisher, evs ...events.Event) {
	t.Helper()
	sub := p.Broker().Subscribe(events.Filter{})
	defer sub.Close()
	p.Publish(context.Background(), evs...)
	for range evs {
		recv(t, sub.C)
	}
}

// polled is a page's events, decoded.
type polled struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Subject string          `json:"subject"`
	Data    json.RawMessage `json:"data"`
}

func decodePage(t *testing.T, pg events.Page) []polled {
	t.Helper()
	out := make([]polled, len(pg.Events))
	for i, raw := range pg.Events {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatalf("event %s: %v", raw, err)
		}
	}
	return out
}

func subjects(ps []polled) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Subject)
	}
	return strings.Join(out, ",")
}

// jobEv is a job event of job id on queue.
func jobEv(typ events.Type, id, queue, jobType string) events.Event {
	return events.Job(typ, events.JobData{JobID: id, JobType: jobType, Queue: queue, Attempt: 1})
}

// The history keeps the most recent events, oldest first, within its count
// and byte bounds; an event over the per-event bound is streamed but not
// kept. Events spec §9.3: "(oldest pruned first)".
func TestHistoryKeepsTheMostRecentWithinItsBounds(t *testing.T) {
	t.Parallel()
	p := events.New(events.Config{Clock: clock.NewFake(t0), History: events.HistoryConfig{Events: 5, Bytes: 64 << 10, MaxEventBytes: 4 << 10}})
	start(t, p)
	var evs []events.Event
	for i := range 8 {
		evs = append(evs, jobEv(events.JobEnqueued, fmt.Sprint("j", i), "orders", "email.send"))
	}
	publishAll(t, p, evs...)
	all := events.Poll{Limit: 1000}
	if got := subjects(decodePage(t, p.Broker().Recent(all))); got != "j3,j4,j5,j6,j7" {
		t.Fatalf("kept %s, want the last 5 oldest first", got)
	}

	// An event over MaxEventBytes (a reason of 2 KiB is cut, but a queue
	// config can be anything) reaches subscribers and is not kept.
	big := events.Queue(events.QueueConfigUpdated, events.QueueData{Queue: "orders", Config: json.RawMessage(`{"x":"` + strings.Repeat("a", 5<<10) + `"}`)})
	big.Subject = "big"
	publishAll(t, p, big)
	if got := subjects(decodePage(t, p.Broker().Recent(all))); got != "j3,j4,j5,j6,j7" {
		t.Fatalf("after an event too big to keep: %s", got)
	}

	// The byte bound drops the oldest: events of over 2 KiB (a reason is
	// cut to MaxJobEventMessage) within 6 KiB.
	p2 := events.New(events.Config{Clock: clock.NewFake(t0), History: events.HistoryConfig{Events: 100, Bytes: 6 << 10, MaxEventBytes: 4 << 10}})
	start(t, p2)
	evs = nil
	for i := range 6 {
		evs = append(evs, events.Job(events.JobCancelled, events.JobData{JobID: fmt.Sprint("c", i), JobType: "t", Queue: "orders",
			Reason: strings.Repeat("r", 3<<10)}))
	}
	publishAll(t, p2, evs...)
	got := decodePage(t, p2.Broker().Recent(all))
	size := 0
	for _, e := range got {
		size += len(e.Data)
	}
	if subjects(got) != "c4,c5" || size > 6<<10 {
		t.Fatalf("kept %s (%d bytes of data), want the last two within 6 KiB", subjects(got), size)
	}
}

// Recent filters as a stream does — types (prefix patterns too), queues, the
// caller's readable queues, an event naming two queues only for a caller
// who may read both — and by job type, and pages oldest first with a cursor
// and has_more (events spec §6.1, §6.4).
func TestRecentFiltersAndPages(t *testing.T) {
	t.Parallel()
	p := events.New(events.Config{Clock: clock.NewFake(t0)})
	start(t, p)
	publishAll(t, p,
		jobEv(events.JobEnqueued, "a1", "orders", "email.send"),
		jobEv(events.JobEnqueued, "b1", "billing", "invoice.make"),
		jobEv(events.JobStarted, "a1", "orders", "email.send"),
		events.Queue(events.QueuePaused, events.QueueData{Queue: "orders", State: "paused"}),
		jobEv(events.JobCompleted, "a1", "orders", "email.send"),
		events.Record(events.DeadLetterMoved, events.RecordData{ID: "m1", Queue: "orders", FromQueue: "billing", Type: "email.send"}),
		jobEv(events.JobEnqueued, "a2", "orders", "sms.send"),
	)
	b := p.Broker()
	parse := func(q url.Values) events.Filter {
		f, err := events.ParseFilter(q)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	typesOf := func(ps []polled) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Type+":"+p.Subject)
		}
		return strings.Join(out, ",")
	}
	onlyOrders := func(q string) bool { return q == "orders" }
	for _, tc := range []struct {
		name string
		poll events.Poll
		want string
	}{
		{"everything", events.Poll{Limit: 100},
			"job.enqueued:a1,job.enqueued:b1,job.started:a1,queue.paused:orders,job.completed:a1,dead_letter.moved:m1,job.enqueued:a2"},
		{"types", events.Poll{Filter: parse(url.Values{"types": {"job.enqueued,job.completed"}}), Limit: 100},
			"job.enqueued:a1,job.enqueued:b1,job.completed:a1,job.enqueued:a2"},
		{"a prefix pattern", events.Poll{Filter: parse(url.Values{"types": {"job.*"}, "queues": {"orders"}}), Limit: 100},
			"job.enqueued:a1,job.started:a1,job.completed:a1,job.enqueued:a2"},
		{"queues", events.Poll{Filter: parse(url.Values{"queues": {"billing"}}), Limit: 100}, "job.enqueued:b1"},
		{"job types", events.Poll{JobTypes: []string{"email.send"}, Limit: 100},
			"job.enqueued:a1,job.started:a1,job.completed:a1,dead_letter.moved:m1"},
		// The move names billing too: not for a caller who reads orders alone.
		{"the caller's queues", events.Poll{Filter: events.Filter{Allow: onlyOrders}, Limit: 100},
			"job.enqueued:a1,job.started:a1,queue.paused:orders,job.completed:a1,job.enqueued:a2"},
	} {
		if got := typesOf(decodePage(t, b.Recent(tc.poll))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}

	// Pages of 2 of what the orders-only caller sees: has_more until the
	// last; each cursor is the last event's id, and the next page starts
	// after it. A limited caller's has_more counts only its events.
	var seen []string
	after := ""
	for i := 0; ; i++ {
		pg := b.Recent(events.Poll{Filter: events.Filter{Allow: onlyOrders}, After: after, Limit: 2})
		got := decodePage(t, pg)
		for _, e := range got {
			seen = append(seen, e.Type+":"+e.Subject)
		}
		if len(got) > 0 && pg.Cursor != got[len(got)-1].ID {
			t.Fatalf("page %d: cursor %s, want the last event's id %s", i, pg.Cursor, got[len(got)-1].ID)
		}
		if i == 2 {
			if pg.HasMore || len(got) != 1 {
				t.Fatalf("last page: %d events, has_more %v", len(got), pg.HasMore)
			}
			break
		}
		if !pg.HasMore || len(got) != 2 {
			t.Fatalf("page %d: %d events, has_more %v", i, len(got), pg.HasMore)
		}
		after = pg.Cursor
	}
	if strings.Join(seen, ",") != "job.enqueued:a1,job.started:a1,queue.paused:orders,job.completed:a1,job.enqueued:a2" {
		t.Fatalf("paged %v", seen)
	}
	// Past the newest: nothing, and the cursor stays.
	newest := decodePage(t, b.Recent(events.Poll{After: after, Limit: 100}))
	lastID := newest[len(newest)-1].ID
	pg := b.Recent(events.Poll{After: lastID, Limit: 100})
	if len(pg.Events) != 0 || pg.HasMore || pg.Cursor != lastID {
		t.Fatalf("after the newest: %d events, has_more %v, cursor %q", len(pg.Events), pg.HasMore, pg.Cursor)
	}
	// A cursor older than every kept event (an id made before them) gets all.
	const before = "00000000-0000-7000-8000-000000000000" // a UUIDv7 of 1970
	if n := len(b.Recent(events.Poll{After: before, Limit: 100}).Events); n != 7 {
		t.Fatalf("after an id older than the history: %d events, want 7", n)
	}
}

// Job events carry the data the events spec's §4.1 requires of each type,
// with job_id, state and trace_id beside, and stay small whatever a worker
// sends.
func TestJobEventDataFollowsTheSpec(t *testing.T) {
	t.Parallel()
	next := t0.Add(time.Minute)
	prio := 5
	for _, tc := range []struct {
		typ  events.Type
		d    events.JobData
		want string
	}{
		// §4.1 job.enqueued: job_type, queue; priority, scheduled_at optional.
		{events.JobEnqueued, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "scheduled", Priority: &prio, ScheduledAt: &next, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"scheduled","priority":5,"scheduled_at":"2026-03-01T12:01:00Z","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`},
		// job.started: worker_id, attempt.
		{events.JobStarted, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "active", Attempt: 1, WorkerID: "w-1"},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"active","attempt":1,"worker_id":"w-1"}`},
		// job.completed: duration_ms (even 0) and attempt.
		{events.JobCompleted, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "completed", Attempt: 2},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"completed","attempt":2,"duration_ms":0}`},
		// job.failed: attempt, error.code, .message, .retryable; duration_ms optional.
		{events.JobFailed, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "retryable", Attempt: 1, Duration: 1333 * time.Millisecond,
			Error: &events.JobError{Code: "smtp.refused", Message: "connection refused", Retryable: true}},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"retryable","attempt":1,"duration_ms":1333,"error":{"code":"smtp.refused","message":"connection refused","retryable":true}}`},
		// job.retrying: attempt, max_attempts, next_retry_at, error.code, .message.
		{events.JobRetrying, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "retryable", Attempt: 1, MaxAttempts: 3, NextRetryAt: &next,
			Error: &events.JobError{Message: "boom"}},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"retryable","attempt":1,"max_attempts":3,"next_retry_at":"2026-03-01T12:01:00Z","error":{"code":"handler_error","message":"boom"}}`},
		// job.discarded: total_attempts, last_error.code, .message.
		{events.JobDiscarded, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "discarded", Attempt: 3,
			Error: &events.JobError{Code: "smtp.refused", Type: "SMTPError", Message: "connection refused"}},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"discarded","attempt":3,"total_attempts":3,"last_error":{"code":"smtp.refused","type":"SMTPError","message":"connection refused"}}`},
		// job.cancelled: cancelled_by, reason optional.
		{events.JobCancelled, events.JobData{JobID: "j1", JobType: "email.send", Queue: "email", State: "cancelled", CancelledBy: "key:ops", Reason: "superseded"},
			`{"job_id":"j1","job_type":"email.send","queue":"email","state":"cancelled","cancelled_by":"key:ops","reason":"superseded"}`},
	} {
		ev := events.Job(tc.typ, tc.d)
		got, err := json.Marshal(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s data\n got %s\nwant %s", tc.typ, got, tc.want)
		}
		if ev.Type != tc.typ || ev.Subject != "j1" || ev.Queue != "email" {
			t.Errorf("%s: type %s subject %q queue %q", tc.typ, ev.Type, ev.Subject, ev.Queue)
		}
	}

	// Hostile sizes are cut, at a character boundary.
	ev := events.Job(events.JobFailed, events.JobData{JobID: "j", JobType: strings.Repeat("t", 10_000), Queue: "q", WorkerID: strings.Repeat("w", 1000),
		Error: &events.JobError{Code: strings.Repeat("c", 1000), Message: strings.Repeat("é", 60_000)}})
	d := ev.Data.(events.JobEventData)
	if len(d.JobType) != events.MaxJobEventString || len(d.WorkerID) != events.MaxJobEventString || len(d.Error.Code) != events.MaxJobEventString ||
		len(d.Error.Message) > events.MaxJobEventMessage || len(d.Error.Message) < events.MaxJobEventMessage-1 || !utf8.ValidString(d.Error.Message) {
		t.Errorf("not cut: job_type %d, worker_id %d, code %d, message %d bytes (valid UTF-8: %v)",
			len(d.JobType), len(d.WorkerID), len(d.Error.Code), len(d.Error.Message), utf8.ValidString(d.Error.Message))
	}
	raw, _ := json.Marshal(ev.Data)
	if len(raw) > 4<<10 {
		t.Errorf("a hostile job event's data is %d bytes", len(raw))
	}
	if !slices.Contains(events.Types, events.JobCompleted) || !events.JobEnqueued.Valid() {
		t.Error("job event types are not known types")
	}
}
