package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/idptest"
)

// eventListJSON is GET /ojs/v1/events as JSON.
type eventListJSON struct {
	Events []struct {
		SpecVersion string `json:"specversion"`
		ID          string `json:"id"`
		Type        string `json:"type"`
		Source      string `json:"source"`
		Time        string `json:"time"`
		Subject     string `json:"subject"`
		Data        struct {
			JobID      string `json:"job_id"`
			JobType    string `json:"job_type"`
			Queue      string `json:"queue"`
			State      string `json:"state"`
			Attempt    *int   `json:"attempt"`
			DurationMS *int64 `json:"duration_ms"`
			ID         string `json:"id"`
			FromQueue  string `json:"from_queue"`
		} `json:"data"`
	} `json:"events"`
	Cursor  *string `json:"cursor"`
	HasMore bool    `json:"has_more"`
}

var acceptOJS = http.Header{"Accept": {"application/openjobspec+json"}}

// listEvents GETs the JSON list of query as key.
func (b *bundle) listEvents(t *testing.T, key, query string) (resp, eventListJSON) {
	t.Helper()
	r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/events?" + query, key: key, header: acceptOJS})
	var l eventListJSON
	if r.status == http.StatusOK {
		r.json(t, &l)
	}
	return r, l
}

// subjectsOf are a list's event subjects, as type:subject.
func (l eventListJSON) subjectsOf() string {
	var out []string
	for _, e := range l.Events {
		out = append(out, e.Type+":"+e.Subject)
	}
	return strings.Join(out, ",")
}

// Events spec §6.4 (HTTP polling): GET /ojs/v1/events?types=...&queues=...
// &limit=... answers {"events": [...], "cursor", "has_more"}, each an event
// envelope (§2), here the job events of §4.1 as the worker API publishes
// them: job.enqueued with job_type and queue, job.completed with
// duration_ms and attempt too (the official cases L0-EVT-001 and
// L0-EVT-002 read them so). Oldest first; the cursor is the last event's
// id, and after=<cursor> lists what follows.
func TestEventListAnswersJSONWithTheRecentEvents(t *testing.T) {
	b := setup(t)
	pub := b.app.Events()
	ctx := context.Background()
	const q = "conformance-events-test"
	pub.Publish(ctx,
		events.Job(events.JobEnqueued, events.JobData{JobID: "j-1", JobType: "test.echo", Queue: q, State: "available"}),
		events.Job(events.JobEnqueued, events.JobData{JobID: "j-2", JobType: "test.echo", Queue: "other-queue", State: "available"}),
		events.Job(events.JobStarted, events.JobData{JobID: "j-1", JobType: "test.echo", Queue: q, State: "active", Attempt: 1, WorkerID: "w-1"}),
		events.Job(events.JobCompleted, events.JobData{JobID: "j-1", JobType: "test.echo", Queue: q, State: "completed", Attempt: 1, Duration: 250 * time.Millisecond}),
		events.Job(events.JobEnqueued, events.JobData{JobID: "j-3", JobType: "test.echo", Queue: q, State: "available"}),
	)
	var l eventListJSON
	eventually.True(t, "the events listed", func() bool {
		_, l = b.listEvents(t, readKey, "types=job.enqueued&queues="+q+"&limit=10")
		return len(l.Events) == 2
	}, eventually.Within(10*time.Second))
	e := l.Events[0]
	if l.subjectsOf() != "job.enqueued:j-1,job.enqueued:j-3" || e.Data.JobType != "test.echo" || e.Data.Queue != q || e.Data.JobID != "j-1" ||
		e.SpecVersion != "1.0" || e.ID == "" || e.Source == "" || e.Time == "" || l.HasMore || l.Cursor == nil || *l.Cursor != l.Events[1].ID {
		t.Fatalf("enqueued events: %+v", l)
	}
	r, l := b.listEvents(t, readKey, "types=job.completed&queues="+q+"&limit=10")
	if ct := r.header.Get("Content-Type"); ct != "application/openjobspec+json" {
		t.Errorf("Content-Type %q, want application/openjobspec+json", ct)
	}
	if len(l.Events) != 1 || l.Events[0].Data.Attempt == nil || *l.Events[0].Data.Attempt != 1 ||
		l.Events[0].Data.DurationMS == nil || *l.Events[0].Data.DurationMS != 250 || l.Events[0].Data.JobType != "test.echo" {
		t.Fatalf("completed events: %s", r.body)
	}

	// Pages: a prefix pattern, limit 2, then after the cursor (also with
	// the evt_ prefix the spec recommends for ids).
	_, p1 := b.listEvents(t, readKey, "types=job.*&queues="+q+"&limit=2")
	if p1.subjectsOf() != "job.enqueued:j-1,job.started:j-1" || !p1.HasMore || p1.Cursor == nil {
		t.Fatalf("page 1: %+v", p1)
	}
	_, p2 := b.listEvents(t, readKey, "types=job.*&queues="+q+"&limit=2&after=evt_"+*p1.Cursor)
	if p2.subjectsOf() != "job.completed:j-1,job.enqueued:j-3" || p2.HasMore {
		t.Fatalf("page 2: %+v", p2)
	}
	_, p3 := b.listEvents(t, readKey, "types=job.*&queues="+q+"&after="+*p2.Cursor)
	if len(p3.Events) != 0 || p3.HasMore || p3.Cursor == nil || *p3.Cursor != *p2.Cursor {
		t.Fatalf("past the newest: %+v", p3)
	}
	// job_types, and the stream's own names of the filters.
	_, byJobType := b.listEvents(t, readKey, "job_types=test.echo&topic=other-queue")
	if byJobType.subjectsOf() != "job.enqueued:j-2" {
		t.Fatalf("job_types and topic: %+v", byJobType)
	}
	// Nothing matches: an empty list, a null cursor.
	r, none := b.listEvents(t, readKey, "queues=nobody-here")
	if len(none.Events) != 0 || none.Cursor != nil || !strings.Contains(string(r.body), `"events":[]`) {
		t.Fatalf("no match: %s", r.body)
	}
}

// Accept picks the answer: JSON to a client that asks for JSON and not for
// the stream; the stream otherwise (none, */*, text/event-stream, or JSON
// refused with q=0) — as every client of the stream got before the list.
func TestEventsAcceptChoosesListOrStream(t *testing.T) {
	b := setup(t)
	for _, tc := range []struct {
		accept string
		want   string
	}{
		{"", "text/event-stream"},
		{"*/*", "text/event-stream"},
		{"text/event-stream", "text/event-stream"},
		{"application/json, text/event-stream", "text/event-stream"},
		{"application/json;q=0, */*", "text/event-stream"},
		{"application/json", "application/openjobspec+json"},
		{"application/openjobspec+json", "application/openjobspec+json"},
		{"text/html, Application/JSON;q=0.9", "application/openjobspec+json"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/events", nil)
		hreq.Header.Set("Authorization", "Bearer "+readKey)
		if tc.accept != "" {
			hreq.Header.Set("Accept", tc.accept)
		}
		hresp, err := (&http.Client{Transport: &http.Transport{}}).Do(hreq)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if got := hresp.Header.Get("Content-Type"); hresp.StatusCode != http.StatusOK || got != tc.want {
			t.Errorf("Accept %q: %d %s, want %s", tc.accept, hresp.StatusCode, got, tc.want)
		}
		cancel()
		hresp.Body.Close()
	}
}

// Bad parameters of the list are 400 naming the parameter (events spec
// §6.4: limit "default: 100, max: 1000").
func TestEventListRefusesBadParameters(t *testing.T) {
	b := setup(t)
	for query, param := range map[string]string{
		"limit=0":                                "limit",
		"limit=1001":                             "limit",
		"limit=ten":                              "limit",
		"after=yesterday":                        "after",
		"after=" + strings.Repeat("a", 36):       "after",
		"types=job.exploded":                     "types",
		"type=nothing.*":                         "type",
		"queues=bad%20name":                      "queues",
		"job_types=" + strings.Repeat("t", 256):  "job_types",
		"job_types=" + strings.Repeat("a,", 101): "job_types",
		"cursor=abc":                             "cursor",
	} {
		r, _ := b.listEvents(t, readKey, query)
		wantError(t, query, r, http.StatusBadRequest, "invalid_request", param)
	}
	r, l := b.listEvents(t, readKey, "limit=1000&types=job.enqueued")
	if r.status != http.StatusOK || l.Events == nil {
		t.Errorf("at the bound: %d %s", r.status, r.body)
	}
}

// A caller limited to some queues lists only their events, as the stream
// narrows (TestNoRouteShowsAQueueBeyondTheCallersRoles reads the stream):
// not the forbidden queue's, nor an event naming it beside an allowed one,
// nor their count in has_more, whatever its filters name.
func TestEventListShowsOnlyTheCallersQueues(t *testing.T) {
	b, is := startOIDC(t)
	ann := is.UserToken(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments"}})
	root := is.UserToken(idptest.User{Subject: "u-root", Email: "root@example.com", Groups: []string{"sre"}})
	var evs []events.Event
	for i := range hiddenCount {
		evs = append(evs, events.Job(events.JobEnqueued, events.JobData{JobID: fmt.Sprint("hidden-", i), JobType: hiddenType, Queue: hiddenQueue}))
	}
	evs = append(evs,
		events.Job(events.JobEnqueued, events.JobData{JobID: "shown-1", JobType: "card.charge", Queue: shownQueue}),
		events.Record(events.DeadLetterMoved, events.RecordData{ID: "moved-1", Queue: shownQueue, FromQueue: hiddenQueue, Type: hiddenType}),
		events.Job(events.JobFailed, events.JobData{JobID: "hidden-last", JobType: hiddenType, Queue: hiddenQueue, Error: &events.JobError{Code: hiddenErrType}}))
	b.app.Events().Publish(context.Background(), evs...)
	eventually.True(t, "every event listed for root", func() bool {
		_, l := b.listEvents(t, root, "limit=1000")
		return len(l.Events) == len(evs)
	}, eventually.Within(10*time.Second))

	for _, query := range []string{"limit=1000", "queues=" + hiddenQueue, "queues=" + shownQueue + "," + hiddenQueue, "job_types=" + hiddenType,
		"limit=1", "types=job.*&limit=1"} {
		r, l := b.listEvents(t, ann, query)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, r.status, r.body)
		}
		for _, secret := range []string{hiddenQueue, hiddenType, hiddenErrType, "hidden-"} {
			if strings.Contains(string(r.body), secret) {
				t.Errorf("%s shows %q of the forbidden queue: %s", query, secret, r.body)
			}
		}
		want := ""
		if !strings.Contains(query, hiddenQueue) || strings.Contains(query, shownQueue) {
			want = "job.enqueued:shown-1"
		}
		if strings.HasPrefix(query, "job_types=") {
			want = ""
		}
		if got := l.subjectsOf(); got != want {
			t.Errorf("%s: %s, want %q", query, got, want)
		}
		if l.HasMore {
			t.Errorf("%s: has_more counts the forbidden queue's events: %s", query, r.body)
		}
	}
}

// A listed event is the envelope the stream sends: the same bytes.
func TestEventListIsTheStreamsEnvelope(t *testing.T) {
	b := setup(t)
	s, _ := b.openStream(t, readKey, "type=job.cancelled")
	b.app.Events().Publish(context.Background(), events.Job(events.JobCancelled,
		events.JobData{JobID: "c-1", JobType: "report.make", Queue: "orders", State: "cancelled", CancelledBy: "key:ops-write", Reason: "superseded"}))
	var streamed string
	deadline := time.After(10 * time.Second)
	for streamed == "" {
		select {
		case l := <-s.lines:
			if data, ok := strings.CutPrefix(l, "data: "); ok {
				streamed = data
			}
		case <-deadline:
			t.Fatal("no event streamed")
		}
	}
	r, _ := b.listEvents(t, readKey, "types=job.cancelled")
	var raw struct {
		Events []json.RawMessage `json:"events"`
	}
	r.json(t, &raw)
	if len(raw.Events) != 1 || string(raw.Events[0]) != streamed {
		t.Fatalf("listed %s, streamed %s", raw.Events, streamed)
	}
}
