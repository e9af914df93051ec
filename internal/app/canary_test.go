package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/testdate"
)

// canaryTask is the part of a task the canary tests read.
type canaryTask struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Total     int64  `json:"total"`
	Processed int64  `json:"processed"`
	UpdatedAt string `json:"updated_at"`
	Canary    *struct {
		SampleSize int64   `json:"sample_size"`
		Phase      string  `json:"phase"`
		Sampled    int64   `json:"sampled"`
		Verdict    *string `json:"verdict"`
		WatchUntil *string `json:"watch_until"`
		Report     report  `json:"report"`
	} `json:"canary"`
}

type report struct {
	Sample          int64 `json:"sample"`
	Delivered       int64 `json:"delivered"`
	Completed       int64 `json:"completed"`
	FailedSame      int64 `json:"failed_same"`
	FailedDifferent int64 `json:"failed_different"`
	Pending         int64 `json:"pending"`
	Deleted         int64 `json:"deleted"`
}

func (m *mApp) task(t *testing.T, id string) canaryTask {
	t.Helper()
	var ct canaryTask
	status, body := m.do(t, http.MethodGet, "/ojs/v1/tasks/"+id, "")
	if err := json.Unmarshal(body, &ct); status != http.StatusOK || err != nil || ct.Canary == nil {
		t.Fatalf("GET /tasks/%s: %d %s", id, status, body)
	}
	return ct
}

// waitTask waits until the task satisfies cond.
func (m *mApp) waitTask(t *testing.T, id, what string, cond func(canaryTask) bool) canaryTask {
	t.Helper()
	var ct canaryTask
	eventually.Nil(t, what, func() error {
		if ct = m.task(t, id); !cond(ct) {
			return fmt.Errorf("task is %s, canary %+v", ct.State, *ct.Canary)
		}
		return nil
	}, eventually.Within(60*time.Second))
	return ct
}

// outcome is what the application's handler does with a record.
type outcome int32

const (
	succeed outcome = iota
	failSame
	failOther
)

// application runs the orders consumer, wrapped by the client library, until
// the test ends: decide says what it does with each record (by its index,
// the number in its key), which the test may change as it goes (a fix
// deployed). It counts the deliveries it saw.
type application struct {
	decide     atomic.Value // func(i int, redelivered bool) outcome
	deliveries atomic.Int64
	redelivers atomic.Int64
}

func runApplication(t *testing.T, brokers []string) *application {
	t.Helper()
	a := &application{}
	a.decide.Store(func(int, bool) outcome { return failSame })
	cl := kafkatest.Client(t, brokers, kgo.ConsumerGroup("orders-svc"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	dl, err := redrive.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	handle := dl.Wrap(func(_ context.Context, r *kgo.Record) error {
		i, _ := strconv.Atoi(strings.TrimPrefix(string(r.Key), "order-"))
		redelivered := false
		for _, h := range r.Headers {
			redelivered = redelivered || h.Key == "redrive.id"
		}
		a.deliveries.Add(1)
		if redelivered {
			a.redelivers.Add(1)
		}
		switch a.decide.Load().(func(int, bool) outcome)(i, redelivered) {
		case failSame:
			return redrive.Retry("db.connection_refused", fmt.Errorf("dial tcp 10.0.%d.5:5432: connect: connection refused", i%200))
		case failOther:
			return redrive.Retry("order.invalid", fmt.Errorf("order %d: total does not match its lines", i))
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, r := range cl.PollFetches(ctx).Records() {
				if err := handle(ctx, r); err != nil {
					return
				}
				_ = cl.CommitRecords(ctx, r)
			}
		}
	}()
	return a
}

// An incident of 1,000 records, retried with a canary (a sample of 100,
// watched 10 minutes, abort at half of it failing again the same way):
// while the application still fails them, the task aborts after the sample
// and leaves the other 900 records as they were; once it is fixed, the
// next canary passes with its exact outcomes (a few records of the sample
// still fail, some differently), and the task retries the rest. Serve is
// restarted in the middle of the second watch: the new one resumes the
// canary where it was, neither sampling again nor starting the watch over.
func TestCanaryAbortsWhileTheFixIsMissingAndPassesOnceItIsThere(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders", dlqTopic+".events", dlqTopic+".archive")
	policies := policyDir(t, "_default:\n  retry: {max_attempts: 1}\n")
	dbURL := pgtest.URL(t)
	// Now, so that what Postgres's now() stamps is due on it too; the test moves it.
	clk := clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond))
	a, stopA := startApp(t, dbURL, brokers, policies, clk)
	events := a.sse(t, "/ojs/v1/events?type=task.canary_watching,task.canary_passed,task.canary_aborted")

	// The incident: 1,000 orders the application fails alike.
	app := runApplication(t, brokers)
	const n = 1000
	orders := make([]*kgo.Record, n)
	for i := range orders {
		orders[i] = &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "order-%d", i), Value: fmt.Appendf(nil, `{"order":%d}`, i)}
	}
	kafkatest.Produce(t, kafkatest.Client(t, brokers), orders...)
	recordIDs(t, a, "state=discarded&limit=1000", n)
	var incidents struct {
		Items []struct {
			ID    string `json:"id"`
			Count int    `json:"count"`
		} `json:"items"`
	}
	status, body := a.do(t, http.MethodGet, "/ojs/v1/incidents", "")
	if err := json.Unmarshal(body, &incidents); status != http.StatusOK || err != nil || len(incidents.Items) != 1 || incidents.Items[0].Count != n {
		t.Fatalf("GET /incidents: %d %s", status, body)
	}
	incident := incidents.Items[0].ID
	// The records by id: the sample is the first 100.
	type rec struct {
		ID     string `json:"id"`
		Key    string `json:"key"`
		Errors []struct {
			Type string `json:"type"`
		} `json:"errors"`
		State         string  `json:"state"`
		RedeliveredAt *string `json:"redelivered_at"`
	}
	all := func() []rec {
		var page struct {
			Items []rec `json:"items"`
		}
		status, body := a.do(t, http.MethodGet, "/ojs/v1/dead-letter?incident="+incident+"&limit=1000", "")
		if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil {
			t.Fatalf("list: %d %s", status, body)
		}
		return page.Items
	}
	byID := func(recs []rec) []rec {
		return slices.SortedFunc(slices.Values(recs), func(x, y rec) int { return strings.Compare(x.ID, y.ID) })
	}
	before := byID(all())
	if len(before) != n {
		t.Fatalf("%d records in the incident, want %d", len(before), n)
	}
	sample := map[string]bool{}
	for _, r := range before[:100] {
		sample[r.ID] = true
	}

	// The fix is not deployed yet: the canary aborts after the sample. It
	// asks that the whole sample fail again the same way (abort_if_refail
	// 1) so that the verdict comes once every outcome is in and the report
	// is exact; a lower ratio aborts sooner, on the outcomes in by then.
	canary := `"canary":{"sample":100,"watch":"PT10M","abort_if_refail":0.5}`
	strict := `"canary":{"sample":100,"watch":"PT10M","abort_if_refail":1}`
	status, body = a.do(t, http.MethodPost, "/ojs/v1/dead-letter/retry", `{"filter":{"incident":"`+incident+`"},"confirm":true,`+strict+`}`)
	var created struct {
		Task canaryTask `json:"task"`
	}
	if err := json.Unmarshal(body, &created); status != http.StatusAccepted || err != nil || created.Task.Canary == nil ||
		created.Task.Canary.SampleSize != 100 || created.Task.Canary.Phase != "sample" {
		t.Fatalf("bulk retry with a canary: %d %s", status, body)
	}
	first := a.waitTask(t, created.Task.ID, "the first canary's verdict", func(ct canaryTask) bool { return ct.State == "aborted" })
	r := first.Canary.Report
	if first.Canary.Phase != "aborted" || *first.Canary.Verdict != "aborted" || first.Processed != 100 ||
		r != (report{Sample: 100, Delivered: 100, FailedSame: 100}) {
		t.Fatalf("aborted task: processed %d, canary %+v", first.Processed, *first.Canary)
	}
	// The sample failed again (its failures joined it), the rest is untouched.
	eventually.Nil(t, "the sample's repeat failures", func() error {
		failed := 0
		for _, r := range all() {
			if r.RedeliveredAt != nil {
				if !sample[r.ID] {
					t.Fatalf("record %s outside the sample was redelivered", r.ID)
				}
				if r.State == "discarded" && r.Errors[0].Type == "db.connection_refused" {
					failed++
				}
			}
		}
		if failed != 100 {
			return fmt.Errorf("%d of the sample failed again", failed)
		}
		return nil
	})
	if got := app.redelivers.Load(); got != 100 {
		t.Fatalf("the application got %d redeliveries, want the sample's 100", got)
	}
	// The sample may be delivered whole before its first repeat failure is
	// back: the watch then begins (and says so) and the refailures abort
	// it; else they abort the sample phase itself.
	ev := collect(t, events, 1)
	if ev[0] == "task.canary_watching "+first.ID {
		ev = append(ev, collect(t, events, 1)...)
	}
	if ev[len(ev)-1] != "task.canary_aborted "+first.ID {
		t.Errorf("events %v", ev)
	}

	// The fix is deployed: every order goes through, except that, among
	// redeliveries, order numbers ending in 3 still fail the same way and
	// those ending in 7 fail another way (data the fix does not cover).
	app.decide.Store(func(i int, redelivered bool) outcome {
		switch {
		case i%10 == 3:
			return failSame
		case i%10 == 7:
			return failOther
		}
		return succeed
	})
	var wantSame, wantOther int64
	for _, r := range before[:100] {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.Key, "order-"))
		switch i % 10 {
		case 3:
			wantSame++
		case 7:
			wantOther++
		}
	}
	status, body = a.do(t, http.MethodPost, "/ojs/v1/dead-letter/retry", `{"filter":{"incident":"`+incident+`"},"confirm":true,`+canary+`}`)
	if err := json.Unmarshal(body, &created); status != http.StatusAccepted || err != nil {
		t.Fatalf("second bulk retry: %d %s", status, body)
	}
	second := created.Task.ID
	want := report{Sample: 100, Delivered: 100, Completed: 100 - wantSame - wantOther, FailedSame: wantSame, FailedDifferent: wantOther}
	watching := a.waitTask(t, second, "every outcome of the second sample", func(ct canaryTask) bool {
		return ct.Canary.Phase == "watch" && ct.Canary.Report == want
	})
	if watching.State != "running" || watching.Processed != 100 || watching.Canary.Verdict != nil {
		t.Fatalf("watching: %+v %+v", watching, *watching.Canary)
	}

	// Serve stops in the middle of the watch and another takes over.
	stopA()
	b, _ := startApp(t, dbURL, brokers, policies, clk)
	events = b.sse(t, "/ojs/v1/events?type=task.canary_watching,task.canary_passed,task.canary_aborted")
	clk.Advance(9 * time.Minute) // not long enough
	advanced := testdate.Now()
	// The new runner took the task over and judged the sample since.
	ct := b.waitTask(t, second, "a pass of the new runner", func(ct canaryTask) bool {
		at, err := time.Parse(time.RFC3339Nano, ct.UpdatedAt)
		return err == nil && at.After(advanced)
	})
	if ct.State != "running" || ct.Canary.Phase != "watch" || ct.Processed != 100 || ct.Canary.Sampled != 100 || ct.Canary.Report != want ||
		ct.Canary.WatchUntil == nil || *ct.Canary.WatchUntil != *watching.Canary.WatchUntil {
		t.Fatalf("before the watch ends: %+v %+v", ct, *ct.Canary)
	}
	clk.Advance(time.Minute)
	done := b.waitTask(t, second, "the second task", func(ct canaryTask) bool { return ct.State == "completed" })
	if done.Canary.Phase != "passed" || *done.Canary.Verdict != "passed" || done.Canary.Report != want || done.Processed != n {
		t.Fatalf("passed task: processed %d, canary %+v, want report %+v", done.Processed, *done.Canary, want)
	}
	if ev := collect(t, events, 1); ev[0] != "task.canary_passed "+second {
		t.Errorf("events %v", ev)
	}
	// Every record was redelivered; those the application still fails are
	// back in the DLQ: the sample's known ones, and as many of the rest.
	eventually.Nil(t, "the rest redelivered", func() error {
		if got := app.redelivers.Load(); got != 100+n {
			return fmt.Errorf("%d redeliveries", got)
		}
		return nil
	})
	recordIDs(t, b, "state=completed&limit=1000", 800)
	recordIDs(t, b, "state=discarded&error_type=db.connection_refused&limit=1000", 100)
	recordIDs(t, b, "state=discarded&error_type=order.invalid&limit=1000", 100)
}

// An incident marked "resolved, redrive when quiet" (PT10M) starts its
// canary retry once no failure of it has arrived for ten minutes, on the
// app's clock: a failure arriving meanwhile starts the ten minutes over. The
// task is the operator's (created_by, the audit log), and the event says so.
func TestAQuietIncidentIsRedrivenWithACanary(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders", dlqTopic+".events", dlqTopic+".archive")
	policies := policyDir(t, "_default:\n  retry: {max_attempts: 1}\n")
	clk := clock.NewPinned(testdate.Now().UTC().Truncate(time.Millisecond))
	a, _ := startApp(t, pgtest.URL(t), brokers, policies, clk)
	events := a.sse(t, "/ojs/v1/events?type=incident.redrive_started,task.canary_watching,task.canary_passed")
	producer := kafkatest.Client(t, brokers)
	fail := func(from, to int) {
		t.Helper()
		recs := make([]*kgo.Record, 0, to-from)
		for i := from; i < to; i++ {
			recs = append(recs, failure(clk.Now(), "orders", "order.created", "db.down", "RETRY", fmt.Sprintf("order-%d", i)))
		}
		kafkatest.Produce(t, producer, recs...)
		recordIDs(t, a, "state=discarded&limit=100", to)
	}
	fail(0, 20)
	var incidents struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	eventually.Nil(t, "the incident", func() error { // noted just after its records
		_, body := a.do(t, http.MethodGet, "/ojs/v1/incidents", "")
		if err := json.Unmarshal(body, &incidents); err != nil || len(incidents.Items) != 1 {
			return fmt.Errorf("incidents: %s", body)
		}
		return nil
	})
	incident := incidents.Items[0].ID
	status, body := a.do(t, http.MethodPost, "/ojs/v1/incidents/"+incident+"/redrive-when-quiet",
		`{"quiet":"PT10M","canary":{"sample":5,"watch":"PT1M"}}`)
	if status != http.StatusOK {
		t.Fatalf("mark quiet: %d %s", status, body)
	}
	type quiet struct {
		State      string  `json:"state"`
		QuietSince string  `json:"quiet_since"`
		TaskID     *string `json:"task_id"`
	}
	request := func() quiet {
		t.Helper()
		var in struct {
			RedriveWhenQuiet *quiet `json:"redrive_when_quiet"`
		}
		status, body := a.do(t, http.MethodGet, "/ojs/v1/incidents/"+incident, "")
		if err := json.Unmarshal(body, &in); status != http.StatusOK || err != nil || in.RedriveWhenQuiet == nil {
			t.Fatalf("GET incident: %d %s", status, body)
		}
		return *in.RedriveWhenQuiet
	}
	// pass runs one pass of the quiet redriver as its leader: the app's own
	// pass may hold the lock (one replica at a time) at that moment.
	pass := func() {
		t.Helper()
		eventually.Nil(t, "a pass of the quiet redriver as its leader", func() error {
			res, err := a.app.Quiet().RunOnce(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !res.Leader {
				return errors.New("another pass holds the lock")
			}
			return nil
		})
	}

	clk.Advance(9 * time.Minute)
	pass()
	if q := request(); q.State != "waiting" {
		t.Fatalf("after 9 quiet minutes: %+v", q)
	}
	// A failure of the incident arrives: the quiet starts over.
	fail(20, 21)
	arrived := clk.Now()
	eventually.Nil(t, "the new failure noted on its incident", func() error {
		if q := request(); q.QuietSince != arrived.Format("2006-01-02T15:04:05.000Z") {
			return fmt.Errorf("quiet since %s", q.QuietSince)
		}
		return nil
	})
	if q := request(); q.QuietSince != arrived.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("quiet since %s, want the new failure's arrival %s", q.QuietSince, arrived)
	}
	clk.Advance(2 * time.Minute) // 11 minutes after the request, 2 after the failure
	pass()
	if q := request(); q.State != "waiting" {
		t.Fatalf("2 minutes after a new failure: %+v", q)
	}
	clk.Advance(8 * time.Minute)
	pass()
	q := request()
	if q.State != "started" || q.TaskID == nil {
		t.Fatalf("10 quiet minutes after the last failure: %+v", q)
	}
	ct := a.task(t, *q.TaskID)
	if ct.Total != 21 || ct.Canary.SampleSize != 5 {
		t.Fatalf("task: %+v %+v", ct, *ct.Canary)
	}
	var task struct {
		CreatedBy string `json:"created_by"`
	}
	_, body = a.do(t, http.MethodGet, "/ojs/v1/tasks/"+*q.TaskID, "")
	_ = json.Unmarshal(body, &task)
	var audit struct {
		Items []struct {
			KeyName string `json:"key_name"`
			Target  string `json:"target"`
			Count   int64  `json:"count"`
		} `json:"items"`
	}
	_, body = a.do(t, http.MethodGet, "/ojs/v1/audit?action=incident.redrive_when_quiet.started", "")
	if err := json.Unmarshal(body, &audit); err != nil || len(audit.Items) != 1 || audit.Items[0].KeyName != task.CreatedBy ||
		task.CreatedBy != "anonymous (auth disabled)" || audit.Items[0].Target != "task:"+*q.TaskID || audit.Items[0].Count != 21 {
		t.Fatalf("audit %s; task created by %q", body, task.CreatedBy)
	}
	// Another pass starts nothing more.
	pass()
	if q2 := request(); *q2.TaskID != *q.TaskID {
		t.Fatalf("a second task: %+v", q2)
	}
	if ev := collect(t, events, 2); ev[0] != "incident.redrive_started "+incident || ev[1] != "task.canary_watching "+*q.TaskID {
		t.Errorf("events %v", ev)
	}
	// Nothing consumes the orders: the sample completes by its redelivery,
	// and after the watch the rest follows.
	clk.Advance(time.Minute)
	done := a.waitTask(t, *q.TaskID, "the quiet incident's task", func(ct canaryTask) bool { return ct.State == "completed" })
	if done.Processed != 21 || *done.Canary.Verdict != "passed" || done.Canary.Report != (report{Sample: 5, Delivered: 5, Completed: 5}) {
		t.Errorf("task: %+v %+v", done, *done.Canary)
	}
}
