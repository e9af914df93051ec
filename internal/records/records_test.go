package records_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/task"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// ownTopic is the DLQ topic the tests reserve as Redrive's own.
const ownTopic = "dead_letter_queue"

var offsets atomic.Int64

// bundle is a records.Service over a fresh database, its events and wakes.
type bundle struct {
	pool   *pgxpool.Pool
	st     *store.Store
	rec    *records.Service
	sub    *events.Subscription
	woken  atomic.Int64
	kicked atomic.Int64
}

func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	b := &bundle{pool: pgtest.New(t)}
	b.st = store.New(b.pool)
	pub := events.New(events.Config{Clock: clock.Wall})
	b.sub = pub.Broker().Subscribe(events.Filter{})
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Stop() })
	var err error
	b.rec, err = records.New(records.Config{Store: b.st, Reserved: dlq.NewReservedTopics(ownTopic), Events: pub,
		Wake: func() { b.woken.Add(1) }, KickTasks: func() { b.kicked.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// insert stores a dead letter of each queue, discarded two hours ago, and
// returns their ids.
func (b *bundle) insert(t *testing.T, queues ...string) []string {
	t.Helper()
	at := testdate.Now().UTC().Add(-2 * time.Hour)
	recs := make([]dlq.Record, len(queues))
	ids := make([]string, len(queues))
	for i, q := range queues {
		ids[i] = dlq.NewID(testdate.Now())
		recs[i] = dlq.Record{ID: ids[i], Queue: q, Type: "order.created", State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter,
			Attempt: 3, MaxAttempts: 3, Format: dlq.FormatRedrive,
			Source: dlq.Source{Topic: q}, DLQ: dlq.Coord{Topic: ownTopic, Offset: offsets.Add(1)},
			Key: []byte("k"), Value: []byte(`{"n":1}`),
			Errors: []dlq.ErrorEntry{{Attempt: 3, Type: "db.timeout", Message: "boom", Code: dlq.CodeRetry, OccurredAt: at}},
			Retry:  json.RawMessage(`{"max_attempts":3}`), Meta: json.RawMessage(`{}`),
			CreatedAt: at.Add(-time.Hour), UpdatedAt: at, DiscardedAt: &at}
	}
	if _, err := b.st.InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return ids
}

// retried lists the queues whose records are no longer dead letters.
func (b *bundle) retried(t *testing.T, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		r, err := b.st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != dlq.StateDiscarded {
			out = append(out, r.Queue)
		}
	}
	sort.Strings(out)
	return out
}

// event waits for the next lifecycle event.
func (b *bundle) event(t *testing.T) events.Event {
	t.Helper()
	select {
	case m := <-b.sub.C:
		return m.Event
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return events.Event{}
}

// The queues of the own-topics rule: an ordinary one, Redrive's own, and a
// Kafka internal one; only the first has a topic to go back to.
var ruleQueues = []string{"orders", ownTopic, "__consumer_offsets"}

// The own-topics rule is one rule: a single retry, a bulk retry task and a
// replay rule each retry the ordinary queue's record and leave those of
// Redrive's own topic and of a Kafka internal topic alone.
func TestOwnTopicsRuleIsTheSameForEveryRetry(t *testing.T) {
	ctx := context.Background()
	want := []string{"orders"}
	same := func(t *testing.T, how string, got []string) {
		t.Helper()
		if len(got) != len(want) || got[0] != want[0] {
			t.Errorf("%s retried the records of %v; want %v only", how, got, want)
		}
	}

	t.Run("single", func(t *testing.T) {
		b := setup(t)
		ids := b.insert(t, ruleQueues...)
		for i, id := range ids {
			_, err := b.rec.Retry(ctx, &records.RetryParams{ID: id})
			var noRoute *records.NoRouteError
			if (err == nil) != (i == 0) || (i > 0 && !errors.As(err, &noRoute)) {
				t.Errorf("retry of the %s record: %v", ruleQueues[i], err)
			}
		}
		same(t, "a single retry", b.retried(t, ids))
	})

	t.Run("bulk", func(t *testing.T) {
		b := setup(t)
		ids := b.insert(t, ruleQueues...)
		res, err := b.rec.Bulk(ctx, &records.BulkParams{Kind: records.TaskRetry, Confirm: true, CreatedBy: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if res.N != 1 || res.Skipped != 2 || res.Task == nil || b.kicked.Load() != 1 {
			t.Fatalf("bulk retry = %+v (kicked %d); want 1 record, 2 skipped, a task, the runner kicked", res, b.kicked.Load())
		}
		scope := b.rec.RetryScope()
		r, err := task.New(task.Config{Poll: 20 * time.Millisecond, RetryScope: &scope}, b.st)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Stop() })
		eventually.Nil(t, "the task to finish", func() error {
			got, err := b.rec.GetTask(ctx, res.Task.ID)
			if err == nil && got.State != records.TaskCompleted {
				err = errors.New("task is " + string(got.State))
			}
			return err
		})
		same(t, "a bulk retry", b.retried(t, ids))
	})

	t.Run("replay", func(t *testing.T) {
		b := setup(t)
		ids := b.insert(t, ruleQueues...)
		everything := func(q string) policy.Topic {
			p := maintenance.DefaultPolicy(q)
			p.ReplayRules = []policy.ReplayRule{{Name: "all", Filter: filter.Filter{}, Delay: time.Hour, MaxReplays: 5, Enabled: true}}
			return p
		}
		r, err := maintenance.NewReplayer(maintenance.ReplayerConfig{Deps: maintenance.Deps{Store: b.st, Policy: everything}, Records: b.rec})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		same(t, "a replay rule", b.retried(t, ids))
	})
}

// A single retry with an override keeps the edited value, headers and
// target topic for the redelivery, merges the retry policy onto the
// record's, wakes the scheduler and emits dead_letter.retried.
func TestRetryWithOverride(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ids := b.insert(t, "orders", ownTopic)
	spec, err := policy.DecodeRetry([]byte(`{"max_attempts": 7}`))
	if err != nil {
		t.Fatal(err)
	}
	rd := &dlq.Redelivery{Topic: "orders.fixed", Headers: []dlq.Header{{Key: "x-fix", Value: []byte("1")}},
		Value: []byte(`{"n":2}`), ValueSet: true}
	r, err := b.rec.Retry(ctx, &records.RetryParams{ID: ids[0], Redelivery: rd, Meta: json.RawMessage(`{"ticket":"OPS-1"}`), Retry: spec})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != dlq.StateAvailable || r.Attempt != 0 || r.MaxAttempts != 7 {
		t.Errorf("retried record: state %s, attempt %d, max_attempts %d; want available, 0, 7", r.State, r.Attempt, r.MaxAttempts)
	}
	got, err := b.rec.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Redelivery == nil || got.Redelivery.Topic != "orders.fixed" || string(got.Redelivery.Value) != `{"n":2}` ||
		len(got.Redelivery.Headers) != 1 || string(got.Value) != `{"n":1}` {
		t.Errorf("stored redelivery %+v, value %s; want the override, the original value kept", got.Redelivery, got.Value)
	}
	var meta map[string]any
	if err := json.Unmarshal(got.Meta, &meta); err != nil || meta["ticket"] != "OPS-1" {
		t.Errorf("meta %s; want the override's ticket merged", got.Meta)
	}
	if ev := b.event(t); ev.Type != events.DeadLetterRetried || ev.Subject != ids[0] {
		t.Errorf("event %s about %s; want %s about %s", ev.Type, ev.Subject, events.DeadLetterRetried, ids[0])
	}
	if b.woken.Load() != 1 {
		t.Errorf("scheduler woken %d times; want 1", b.woken.Load())
	}

	// A record of Redrive's own topic goes out once a target is named; a
	// target that is itself reserved is refused, naming the topic.
	var target *records.TargetError
	if _, err := b.rec.Retry(ctx, &records.RetryParams{ID: ids[1], Redelivery: &dlq.Redelivery{Topic: ownTopic}}); !errors.As(err, &target) ||
		target.Topic != ownTopic {
		t.Errorf("retry to the own topic: %v; want a TargetError naming it", err)
	}
	if _, err := b.rec.Retry(ctx, &records.RetryParams{ID: ids[1], Redelivery: &dlq.Redelivery{Topic: "orders"}}); err != nil {
		t.Errorf("retry of the own topic's record to orders: %v", err)
	}
}

// A retry says why it cannot be done: no such record, a retry policy out of
// bounds, a record that is completed — with the record as it read it.
func TestRetryRefusals(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ids := b.insert(t, "orders")
	if _, err := b.rec.Retry(ctx, &records.RetryParams{ID: uuid.NewString()}); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("retry of a missing record: %v; want ErrNotFound", err)
	}
	bad, err := policy.DecodeRetry([]byte(`{"max_attempts": 2000000000}`))
	if err != nil {
		t.Fatal(err)
	}
	var pe *records.PolicyError
	if _, err := b.rec.Retry(ctx, &records.RetryParams{ID: ids[0], Retry: bad}); !errors.As(err, &pe) {
		t.Errorf("retry with max_attempts beyond the ceiling: %v; want a PolicyError", err)
	}
	if got, _ := b.rec.Get(ctx, ids[0]); got.State != dlq.StateDiscarded {
		t.Fatalf("a refused retry changed the record: %s", got.State)
	}
	_, err = b.pool.Exec(ctx, `UPDATE redrive_lifecycle SET state = 'completed', exhaustion = NULL, discarded_at = NULL,
		next_retry_at = NULL, completed_at = now(), completed_by = 'ack' WHERE id = $1`, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	var conflict *records.RetryConflictError
	_, err = b.rec.Retry(ctx, &records.RetryParams{ID: ids[0]})
	if !errors.As(err, &conflict) || !errors.Is(err, records.ErrConflict) || errors.Is(err, records.ErrInFlight) ||
		conflict.Record == nil || conflict.Record.CompletedBy != dlq.CompletedByAck {
		t.Errorf("retry of an acknowledged record: %v; want a conflict with the record it read (completed by ack)", err)
	}
}
