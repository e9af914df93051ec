package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// Deleting a queue with strategies discard and move (queue-config spec
// §5.3), against the whole processor: the dry run's counts, the task, the
// records after, their archive copies, the audit log and the events.

type queueDeleteAnswer struct {
	Queue        string  `json:"queue"`
	Strategy     string  `json:"strategy"`
	TargetQueue  *string `json:"target_queue"`
	JobsAffected int64   `json:"jobs_affected"`
	ByState      struct {
		Retryable int64 `json:"retryable"`
		Available int64 `json:"available"`
	} `json:"by_state"`
	InFlight int64     `json:"in_flight"`
	DryRun   bool      `json:"dry_run"`
	State    string    `json:"state"`
	Deleted  bool      `json:"deleted"`
	Task     *taskJSON `json:"task"`
}

// seedQueueToDelete stores, in orders: 2 retryable and 1 available
// records (waiting: a delete takes them), a dead letter and a completed
// record (settled: it leaves them), and one waiting record of billing. It
// returns the waiting records' ids, then the settled ones'.
func seedQueueToDelete(t *testing.T, b *bundle) (waiting, settled []string) {
	t.Helper()
	ids := b.seed(t, rec{queue: "orders", state: dlq.StateRetryable, key: "k-1"}, rec{queue: "orders", state: dlq.StateRetryable},
		rec{queue: "orders", state: dlq.StateAvailable}, rec{queue: "orders"}, rec{queue: "orders", state: dlq.StateCompleted},
		rec{queue: "billing", state: dlq.StateRetryable})
	return ids[:3], ids[3:5]
}

type auditItem struct {
	Action string            `json:"action"`
	Target string            `json:"target"`
	Status int               `json:"status"`
	Count  *int64            `json:"count"`
	Filter map[string]string `json:"filter"`
	Before json.RawMessage   `json:"before"`
	After  json.RawMessage   `json:"after"`
}

func (b *bundle) audit(t *testing.T, action string) []auditItem {
	t.Helper()
	var out struct{ Items []auditItem }
	wantStatus(t, b.get(t, "/ojs/v1/audit?action="+action, &out), http.StatusOK)
	slices.Reverse(out.Items) // oldest first
	return out.Items
}

// eventsOn reads the events topic until n events of the given types are
// there, and returns them (type and data) oldest first.
func eventsOn(t *testing.T, b *bundle, want map[string]int) []map[string]any {
	t.Helper()
	n := 0
	for _, c := range want {
		n += c
	}
	var out []map[string]any
	cl := kafkatest.Client(t, b.brokers, kgo.ConsumeTopics(dlqTopic+".events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	eventually.True(t, "the events", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, r := range cl.PollFetches(ctx).Records() {
			var e map[string]any
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatal(err)
			}
			if _, ok := want[e["type"].(string)]; ok {
				out = append(out, e)
			}
		}
		return len(out) >= n
	}, eventually.Within(20*time.Second))
	got := map[string]int{}
	for _, e := range out {
		got[e["type"].(string)]++
	}
	for typ, c := range want {
		if got[typ] != c {
			t.Errorf("%d %s events, want %d", got[typ], typ, c)
		}
	}
	return out
}

func TestQueueDeleteMove(t *testing.T) {
	b := setup(t)
	waiting, settled := seedQueueToDelete(t, b)
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config", map[string]any{"retry": map[string]any{"max_attempts": 4}}, nil), http.StatusOK)

	// The dry run counts exactly, and changes nothing.
	var dry queueDeleteAnswer
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/orders", map[string]any{"strategy": "move", "target_queue": "billing", "dry_run": true}, &dry), http.StatusOK)
	if !dry.DryRun || dry.JobsAffected != 3 || dry.ByState.Retryable != 2 || dry.ByState.Available != 1 || dry.InFlight != 0 ||
		dry.Strategy != "move" || dry.TargetQueue == nil || *dry.TargetQueue != "billing" || dry.Task != nil {
		t.Fatalf("dry run %+v, want 3 records (2 retryable, 1 available) to move to billing", dry)
	}
	if n := b.count(t, "queue = 'orders' AND state IN ('retryable', 'available')"); n != 3 {
		t.Fatalf("after the dry run %d waiting records in orders, want 3", n)
	}
	var q queueJSONView
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders", &q), http.StatusOK)
	if q.State != "active" {
		t.Fatalf("after the dry run orders is %s, want active", q.State)
	}

	// Confirmed: the queue is paused and a task moves them.
	var done queueDeleteAnswer
	r := b.send(t, http.MethodDelete, "/ojs/v1/queues/orders", map[string]any{"strategy": "move", "target_queue": "billing", "confirm": true}, &done)
	wantStatus(t, r, http.StatusAccepted)
	if done.DryRun || done.JobsAffected != 3 || done.State != "paused" || done.Task == nil || done.Task.Kind != "queue_move" ||
		done.Task.Total != 3 || done.Task.CreatedBy != "ops-write" {
		t.Fatalf("confirmed %+v", done)
	}
	if loc := r.header.Get("Location"); loc != "/ojs/v1/tasks/"+done.Task.ID {
		t.Errorf("Location %q", loc)
	}
	tj := b.waitTask(t, done.Task.ID, "completed", 20*time.Second)
	if tj.Processed != 3 || len(tj.Errors) != 0 {
		t.Errorf("task %+v, want 3 processed and no errors", tj)
	}

	// The records moved to billing are redelivered there, to every group.
	got := kafkatest.Consume(t, b.brokers, "billing", 3, 20*time.Second)
	var produced []string
	for _, rec := range got {
		for _, h := range rec.Headers {
			if h.Key == "redrive.id" {
				produced = append(produced, string(h.Value))
			}
		}
	}
	slices.Sort(produced)
	if !slices.Equal(produced, waiting) {
		t.Errorf("produced to billing %v, want the moved records %v", produced, waiting)
	}
	eventually.True(t, "the moved records are completed in billing", func() bool {
		return b.count(t, "id = ANY($1) AND queue = 'billing' AND state = 'completed' AND meta->>'redrive.moved_from' = 'orders'", waiting) == 3
	})
	// The settled records stay in orders as they were.
	if n := b.count(t, "id = ANY($1) AND queue = 'orders' AND state IN ('discarded', 'completed')", settled); n != 2 {
		t.Errorf("%d settled records left in orders as they were, want 2", n)
	}
	// The queue's API config is gone: it is implicit again, and active.
	var cfg struct {
		APIConfig json.RawMessage `json:"api_config"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders/config", &cfg), http.StatusOK)
	if string(cfg.APIConfig) != "null" {
		t.Errorf("api_config after the move %s, want null", cfg.APIConfig)
	}

	// Audited: the dry run and the confirmed call, with the counts, the
	// strategy and the config before and after the pause.
	au := b.audit(t, "queue.delete")
	if len(au) != 2 {
		t.Fatalf("audit entries %+v, want 2", au)
	}
	for i, status := range []int{200, 202} {
		e := au[i]
		if e.Target != "orders" || e.Status != status || e.Count == nil || *e.Count != 3 ||
			e.Filter["strategy"] != "move" || e.Filter["target_queue"] != "billing" || e.Filter["queue"] != "orders" {
			t.Errorf("audit entry %d %+v", i, e)
		}
	}
	if !strings.Contains(string(au[1].Before), `"max_attempts":4`) || strings.Contains(string(au[1].Before), "paused") ||
		!strings.Contains(string(au[1].After), `"state":"paused"`) {
		t.Errorf("audit before %s after %s, want the config before and paused after", au[1].Before, au[1].After)
	}

	evs := eventsOn(t, b, map[string]int{"dead_letter.moved": 3, "queue.deleted": 1})
	for _, e := range evs {
		d := e["data"].(map[string]any)
		switch e["type"] {
		case "dead_letter.moved":
			if d["queue"] != "billing" || d["from_queue"] != "orders" || !slices.Contains(waiting, d["id"].(string)) {
				t.Errorf("moved event %v", d)
			}
		case "queue.deleted":
			if d["queue"] != "orders" || d["strategy"] != "move" || d["target_queue"] != "billing" || d["records"] != float64(3) ||
				d["task_id"] != done.Task.ID {
				t.Errorf("queue.deleted %v", d)
			}
		}
	}
}

type queueJSONView struct {
	Name  string           `json:"name"`
	State string           `json:"state"`
	Stats map[string]int64 `json:"stats"`
}

func TestQueueDeleteDiscard(t *testing.T) {
	b := setup(t)
	waiting, settled := seedQueueToDelete(t, b)

	var dry queueDeleteAnswer
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/orders", map[string]any{"strategy": "discard", "dry_run": true}, &dry), http.StatusOK)
	if !dry.DryRun || dry.JobsAffected != 3 || dry.ByState.Retryable != 2 || dry.ByState.Available != 1 || dry.TargetQueue != nil {
		t.Fatalf("dry run %+v, want 3 records (2 retryable, 1 available)", dry)
	}
	var done queueDeleteAnswer
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/orders", map[string]any{"strategy": "discard", "confirm": true, "rate_limit": 1000}, &done),
		http.StatusAccepted)
	if done.Task == nil || done.Task.Kind != "queue_discard" || done.JobsAffected != 3 {
		t.Fatalf("confirmed %+v", done)
	}
	b.waitTask(t, done.Task.ID, "completed", 20*time.Second)

	// Each waiting record is discarded, kept as cancelled, its latest error
	// queue_deleted naming who deleted the queue; nothing else changed.
	for _, id := range waiting {
		var r recordJSON
		wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+id, &r), http.StatusOK)
		last := r.Errors[len(r.Errors)-1]
		if r.Queue != "orders" || r.State != "discarded" || r.Exhaustion == nil || *r.Exhaustion != "cancelled" || r.DiscardedAt == nil ||
			r.NextRetryAt != nil || len(r.Errors) != 3 || last["type"] != "queue_deleted" || last["code"] != "DISCARD" ||
			!strings.Contains(last["message"].(string), "queue orders was deleted by ops-write") || last["attempt"] != float64(3) {
			t.Errorf("record %s after the discard: %+v", id, r)
		}
	}
	if n := b.count(t, "id = ANY($1) AND state IN ('discarded', 'completed') AND (exhaustion IS NULL OR exhaustion = 'dead_letter')", settled); n != 2 {
		t.Errorf("%d settled records as they were, want 2", n)
	}
	if n := b.count(t, "queue = 'billing' AND state = 'retryable'"); n != 1 {
		t.Errorf("billing's record: %d retryable, want 1 (another queue is left alone)", n)
	}
	var q queueJSONView
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders", &q), http.StatusOK)
	if q.Stats["cancelled"] != 3 || q.Stats["depth"] != 0 || q.Stats["dead_letter"] != 1 || q.State != "active" {
		t.Errorf("orders after the discard: %+v", q)
	}
	var l listJSON
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?queue=orders&exhaustion=cancelled&error_type=queue_deleted", &l), http.StatusOK)
	if got := l.itemIDs(); len(got) != 3 {
		t.Errorf("list by exhaustion cancelled: %v", got)
	}

	// Archived like every discard: copies with their exhaustion and error.
	copies := map[string]map[string]string{}
	cl := kafkatest.Client(t, b.brokers, kgo.ConsumeTopics(dlqTopic+".archive"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	eventually.True(t, "the cancelled records are archived", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, r := range cl.PollFetches(ctx).Records() {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			copies[h["redrive.id"]] = h
		}
		for _, id := range waiting {
			if copies[id] == nil {
				return false
			}
		}
		return true
	}, eventually.Within(20*time.Second))
	for _, id := range waiting {
		h := copies[id]
		if h["redrive.exhaustion"] != "cancelled" || h["redrive.error.type"] != "queue_deleted" || h["redrive.state"] != "discarded" {
			t.Errorf("archive copy of %s: %v", id, h)
		}
	}

	evs := eventsOn(t, b, map[string]int{"job.discarded": 3, "queue.deleted": 1})
	for _, e := range evs {
		d := e["data"].(map[string]any)
		if e["type"] == "job.discarded" && (d["exhaustion"] != "cancelled" || d["error_type"] != "queue_deleted" || d["queue"] != "orders") {
			t.Errorf("job.discarded %v", d)
		}
		if e["type"] == "queue.deleted" && (d["strategy"] != "discard" || d["records"] != float64(3)) {
			t.Errorf("queue.deleted %v", d)
		}
	}
	au := b.audit(t, "queue.delete")
	if len(au) != 2 || au[1].Status != 202 || au[1].Count == nil || *au[1].Count != 3 || au[1].Filter["strategy"] != "discard" ||
		string(au[1].Before) != "null" || !strings.Contains(string(au[1].After), "paused") {
		t.Errorf("audit %+v", au)
	}
}

// Every mistake in a delete is refused naming its field, and nothing is
// changed: no record, no pause, no task. A queue declared in a policy file
// cannot be deleted (409 naming the file).
func TestQueueDeleteRefusals(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{queue: "orders", state: dlq.StateRetryable}, rec{queue: "payments", state: dlq.StateRetryable})
	for _, tc := range []struct {
		what   string
		queue  string
		body   any
		status int
		code   string
		field  string
	}{
		{"unknown strategy", "orders", map[string]any{"strategy": "purge"}, 400, "invalid_request", "strategy"},
		{"empty strategy", "orders", map[string]any{"strategy": ""}, 400, "invalid_request", "strategy"},
		{"strategy not a string", "orders", map[string]any{"strategy": 1}, 400, "invalid_request", "strategy"},
		{"move without a target", "orders", map[string]any{"strategy": "move", "confirm": true}, 400, "invalid_request", "target_queue"},
		{"target with discard", "orders", map[string]any{"strategy": "discard", "target_queue": "billing", "confirm": true}, 400, "invalid_request", "target_queue"},
		{"target with no strategy", "orders", map[string]any{"target_queue": "billing"}, 400, "invalid_request", "target_queue"},
		{"target not a topic name", "orders", map[string]any{"strategy": "move", "target_queue": "bad name!", "confirm": true}, 400, "invalid_request", "target_queue"},
		{"target the queue itself", "orders", map[string]any{"strategy": "move", "target_queue": "orders", "confirm": true}, 400, "invalid_request", "target_queue"},
		{"target the layer", "orders", map[string]any{"strategy": "move", "target_queue": "_default", "confirm": true}, 400, "invalid_request", "target_queue"},
		{"target Redrive's DLQ", "orders", map[string]any{"strategy": "move", "target_queue": dlqTopic, "confirm": true}, 422, "validation_error", "target_queue"},
		{"target the archive", "orders", map[string]any{"strategy": "move", "target_queue": dlqTopic + ".archive", "confirm": true}, 422, "validation_error", "target_queue"},
		{"target internal", "orders", map[string]any{"strategy": "move", "target_queue": "__consumer_offsets", "confirm": true}, 422, "validation_error", "target_queue"},
		{"rate limit negative", "orders", map[string]any{"strategy": "discard", "rate_limit": -1, "confirm": true}, 400, "invalid_request", "rate_limit"},
		{"rate limit too high", "orders", map[string]any{"strategy": "discard", "rate_limit": 1e6, "confirm": true}, 400, "invalid_request", "rate_limit"},
		{"rate limit with reject", "orders", map[string]any{"rate_limit": 5}, 400, "invalid_request", "rate_limit"},
		{"confirm not a boolean", "orders", map[string]any{"strategy": "discard", "confirm": "yes"}, 400, "invalid_request", "confirm"},
		// Safe by default (admin API §4): a discard or move is confirmed,
		// or asked for its counts alone; never a silent dry run.
		{"discard without confirm", "orders", map[string]any{"strategy": "discard"}, 400, "invalid_request", "confirm"},
		{"move without confirm", "orders", map[string]any{"strategy": "move", "target_queue": "billing"}, 400, "invalid_request", "confirm"},
		{"confirm false", "orders", map[string]any{"strategy": "discard", "confirm": false}, 400, "invalid_request", "confirm"},
		{"dry_run false, no confirm", "orders", map[string]any{"strategy": "discard", "dry_run": false}, 400, "invalid_request", "confirm"},
		{"dry_run and confirm", "orders", map[string]any{"strategy": "discard", "dry_run": true, "confirm": true}, 400, "invalid_request", "confirm"},
		{"dry_run with reject", "orders", map[string]any{"strategy": "reject", "dry_run": true}, 400, "invalid_request", "dry_run"},
		{"dry_run not a boolean", "orders", map[string]any{"strategy": "discard", "dry_run": "yes"}, 400, "invalid_request", "dry_run"},
		{"unknown field", "orders", map[string]any{"strategy": "discard", "force": true}, 400, "invalid_request", "force"},
		{"query parameter", "orders?strategy=discard", nil, 400, "invalid_request", "strategy"},
		{"the default layer", "_default", map[string]any{"strategy": "discard", "confirm": true}, 400, "invalid_request", "name"},
		{"reject with waiting records", "orders", nil, 409, "conflict", ""},
		{"a policy file's queue", "payments", map[string]any{"strategy": "discard", "confirm": true}, 409, "conflict", ""},
		{"a policy file's queue, move", "payments", map[string]any{"strategy": "move", "target_queue": "billing", "confirm": true}, 409, "conflict", ""},
	} {
		r := b.send(t, http.MethodDelete, "/ojs/v1/queues/"+tc.queue, tc.body, nil)
		wantError(t, tc.what, r, tc.status, tc.code, tc.field)
		if strings.HasPrefix(tc.what, "a policy file's") && !strings.Contains(r.err(t).Error.Message, "topics.yaml") {
			t.Errorf("%s: %s, want the file named", tc.what, r.body)
		}
	}
	if n := b.count(t, "state = 'retryable'"); n != 2 {
		t.Errorf("%d retryable records after the refusals, want 2: something was half-applied", n)
	}
	var tasks struct{ Items []taskJSON }
	wantStatus(t, b.get(t, "/ojs/v1/tasks", &tasks), http.StatusOK)
	if len(tasks.Items) != 0 {
		t.Errorf("tasks after the refusals: %+v", tasks.Items)
	}
	for _, name := range []string{"orders", "payments"} {
		var q queueJSONView
		wantStatus(t, b.get(t, "/ojs/v1/queues/"+name, &q), http.StatusOK)
		if q.State != "active" {
			t.Errorf("%s is %s after the refusals, want active", name, q.State)
		}
	}
	// Every refused call is audited, with its status.
	if au := b.audit(t, "queue.delete"); len(au) != 29 {
		t.Errorf("%d audit entries, want 29", len(au))
	}
	// A delete with nothing to take is the reject's, at once.
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/billing/config", map[string]any{"retry": map[string]any{"max_attempts": 2}}, nil), http.StatusOK)
	var done queueDeleteAnswer
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/billing", map[string]any{"strategy": "discard", "confirm": true}, &done), http.StatusOK)
	if !done.Deleted || done.Strategy != "discard" || done.Task != nil {
		t.Errorf("delete of an empty queue: %+v", done)
	}
}
