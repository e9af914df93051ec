package maintenance_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 3, 1, 5, 0, 0, 0, time.UTC)

type bundle struct {
	pool    *pgxpool.Pool
	store   *store.Store
	clock   *clock.Fake
	metrics *metrics.DeadLetter
	events  *events.Publisher
	sub     *events.Subscription
	offset  atomic.Int64
}

func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	pool := pgtest.New(t)
	b := &bundle{pool: pool, store: store.New(pool), clock: clock.NewFake(t0), metrics: metrics.NewDeadLetter(nil, nil)}
	b.events = events.New(events.Config{Clock: b.clock})
	b.sub = b.events.Broker().Subscribe(events.Filter{})
	if err := b.events.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.events.Stop() })
	return b
}

// deps are the bundle's store, clock, events and metrics, with policy pol.
func (b *bundle) deps(pol maintenance.PolicyFunc) maintenance.Deps {
	return maintenance.Deps{Store: b.store, Policy: pol, Events: b.events, Metrics: b.metrics, Clock: b.clock}
}

// rec describes a record to insert.
type rec struct {
	queue      string
	state      dlq.State
	exhaustion dlq.Exhaustion
	at         time.Time // discarded_at or completed_at
	errorType  string
	typ        string
	message    string    // the latest error's; "second" when empty
	due        time.Time // next_retry_at of a retryable record
	id         string    // the record's id; a new UUIDv7 when empty
}

func (b *bundle) insert(t *testing.T, rs ...rec) []string {
	t.Helper()
	out := make([]dlq.Record, len(rs))
	ids := make([]string, len(rs))
	for i, r := range rs {
		at := r.at
		if r.errorType == "" {
			r.errorType = "db.timeout"
		}
		if r.message == "" {
			r.message = "second"
		}
		d := dlq.Record{
			ID: dlq.NewID(testdate.Now()), Queue: r.queue, Type: r.typ, State: r.state, Exhaustion: r.exhaustion,
			Attempt: 3, MaxAttempts: 3,
			Source: dlq.Source{Topic: r.queue, Partition: 0, Offset: b.offset.Load()},
			DLQ:    dlq.Coord{Topic: "dead_letter_queue", Partition: 0, Offset: b.offset.Add(1)},
			Format: dlq.FormatRedrive, Key: []byte("k"), Value: []byte(`{"n":1}`),
			Headers: []dlq.Header{{Key: "traceparent", Value: []byte("00-abc")}},
			Errors: []dlq.ErrorEntry{
				{Attempt: 1, Type: r.errorType, Message: "first", Code: dlq.CodeRetry, OccurredAt: at.Add(-time.Hour)},
				{Attempt: 2, Type: r.errorType, Message: r.message, Code: dlq.CodeRetry, OccurredAt: at},
			},
			Retry: []byte(`{}`), Meta: []byte(`{}`), CreatedAt: at.Add(-time.Hour), UpdatedAt: at,
		}
		switch r.state {
		case dlq.StateDiscarded:
			d.DiscardedAt = &at
		case dlq.StateCompleted:
			d.CompletedAt = &at
		case dlq.StateRetryable:
			if !r.due.IsZero() {
				d.NextRetryAt = &r.due
			}
		}
		if r.id != "" {
			d.ID = r.id
		}
		out[i], ids[i] = d, d.ID
	}
	res, err := b.store.InsertRecords(context.Background(), out)
	if err != nil || res.N != len(out) {
		t.Fatalf("insert: %d, %v", res.N, err)
	}
	return ids
}

func deadLetter(queue string, at time.Time) rec {
	return rec{queue: queue, state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter, at: at}
}

func (b *bundle) count(t *testing.T, cond string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM redrive_record WHERE "+cond, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// nextEvents collects n events from the bundle's subscription.
func (b *bundle) nextEvents(t *testing.T, n int) []events.Event {
	t.Helper()
	var out []events.Event
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m := <-b.sub.C:
			out = append(out, m.Event)
		case <-timeout:
			t.Fatalf("got %d of %d events: %+v", len(out), n, out)
		}
	}
	return out
}

func (b *bundle) noMoreEvents(t *testing.T) {
	t.Helper()
	select {
	case m := <-b.sub.C:
		t.Fatalf("unexpected event %+v", m.Event)
	case <-time.After(50 * time.Millisecond):
	}
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("not a counter or gauge: %v", &m)
	return 0
}
