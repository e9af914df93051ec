package redeliver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/testdate"
)

// TestPoisonRecordsFailOnlyThemselves: a record whose topic is missing, one
// whose topic name is invalid and one too large for Kafka keep failing — on a
// backoff short enough that they fail many times during the test — while 2,000
// records of a healthy queue are redelivered at once, the log says each
// problem once, and each poison record carries its own failure. A discarded
// record too large for the archive topic is archived as a reference copy.
func TestPoisonRecordsFailOnlyThemselves(t *testing.T) {
	b := setup(t, "orders", "big")
	ctx := context.Background()
	huge := bytes.Repeat([]byte("x"), 2<<20)
	healthy := b.due(t, "orders", 2000)
	ghost := b.due(t, "ghost", 1)[0]             // no such topic
	invalid := b.due(t, "bad topic!", 1)[0]      // not a legal topic name
	large := b.dueWith(t, "big", huge)           // over the producer's 1 MB limit
	discarded := b.discardedWith(t, "big", huge) // its archive copy is too large too

	logs := &logtest.Buffer{}
	log := logs.TextLogger(slog.LevelInfo)
	m := metrics.New()
	fast := redeliver.Backoff{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond}
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.Clock, c.Logger, c.Metrics, c.FailureBackoff, c.ParkBackoff, c.BatchSize = clock.Wall, log, m, fast, fast, 500
	})
	a := b.archiver(t, func(c *redeliver.ArchiverConfig) { c.Clock, c.Logger, c.Metrics = clock.Wall, log, m })
	for _, svc := range []service.Service{s, a} {
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	start := testdate.Now()
	eventually.Nil(t, "the healthy records redelivered next to the poison records", func() error {
		if n := b.countState(t, "orders", dlq.StateCompleted); n < int64(len(healthy)) {
			return fmt.Errorf("only %d of %d redelivered", n, len(healthy))
		}
		return nil
	}, eventually.Within(20*time.Second))
	t.Logf("2000 healthy records redelivered in %s next to three poison records", testdate.Since(start).Round(time.Millisecond))

	// Each poison record fails on its own, many times, with its reason.
	for _, want := range []struct {
		id, reason string
	}{{ghost.ID, dlq.ReasonUnknownTopic}, {invalid.ID, dlq.ReasonInvalidTopic}, {large.ID, dlq.ReasonTooLarge}} {
		// Read between two attempts: a claim clears the failure while it runs.
		r := b.waitFor(t, want.id, "repeated "+want.reason+" failures", func(r *dlq.Record) bool {
			return r.RedeliveryFailure != nil && r.RedeliveryFailure.Failures >= 3
		})
		if f := r.RedeliveryFailure; r.State != dlq.StateRetryable || r.Attempt != 1 || f == nil || f.Reason != want.reason || f.Message == "" {
			t.Fatalf("poison record %s: state %s attempt %d failure %+v; want retryable, attempt 1, reason %s", want.id, r.State, r.Attempt, f, want.reason)
		}
	}
	for _, q := range []struct{ queue, reason string }{{"ghost", dlq.ReasonUnknownTopic}, {"bad topic!", dlq.ReasonInvalidTopic}, {"big", dlq.ReasonTooLarge}} {
		if v := counterValue(t, m.Redelivery.Failures.WithLabelValues(q.queue, q.reason)); v < 3 {
			t.Errorf("redrive_redelivery_failures_total{queue=%q,reason=%q} = %v, want >= 3", q.queue, q.reason, v)
		}
	}

	// The discarded record too large for the archive is archived as a
	// reference copy, the reason kept on the record.
	r := b.waitFor(t, discarded.ID, "its reference copy", func(r *dlq.Record) bool {
		return r.Archive != nil && r.Archive.State == dlq.ArchiveDone
	})
	if r.Archive.Reason != dlq.ReasonTooLarge || r.ArchivedAt == nil {
		t.Fatalf("archive of the oversized record: %+v archived_at %v; want done, reason too_large", r.Archive, r.ArchivedAt)
	}
	ref := kafkatest.Consume(t, b.brokers, dlqTopic+".archive", 1, 10*time.Second)[0]
	if header(ref, envelope.HeaderID) != discarded.ID || header(ref, envelope.HeaderValueOmitted) != "2097152" || ref.Value != nil {
		t.Fatalf("reference copy: value %d bytes, headers %v", len(ref.Value), ref.Headers)
	}

	// A quiet log: each queue and reason is logged once (at most once a
	// minute), however often it failed, and the missing topic's park once.
	warns := logs.Lines("level=WARN")
	parked := logs.Lines("topic parked")
	if len(warns) != 4 || len(parked) != 1 || !strings.Contains(parked[0], "topic=ghost") {
		t.Fatalf("%d WARN lines, want 4 (one per poison queue, and ghost's park):\n%s", len(warns), strings.Join(warns, "\n"))
	}
	if errs := logs.Lines("level=ERROR"); len(errs) != 0 {
		t.Fatalf("ERROR lines:\n%s", strings.Join(errs, "\n"))
	}
}

// dueWith stores one record of queue, due now, with value.
func (b *bundle) dueWith(t *testing.T, queue string, value []byte) dlq.Record {
	t.Helper()
	r := b.due(t, queue, 1)[0]
	if _, err := b.pool.Exec(context.Background(), "UPDATE redrive_record_data SET value = $2 WHERE id = $1", r.ID, value); err != nil {
		t.Fatal(err)
	}
	return r
}

// discardedWith stores one discarded record of queue with value; its archive
// copy is due.
func (b *bundle) discardedWith(t *testing.T, queue string, value []byte) dlq.Record {
	t.Helper()
	r := b.due(t, queue, 1)[0]
	if _, err := b.pool.Exec(context.Background(), `WITH d AS (UPDATE redrive_record_data SET value = $2 WHERE id = $1)
		UPDATE redrive_lifecycle SET state = 'discarded',
		exhaustion = 'dead_letter', next_retry_at = NULL, discarded_at = now(), archive_state = 'pending' WHERE id = $1`, r.ID, value); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitFor waits until the record shows ok.
func (b *bundle) waitFor(t *testing.T, id, what string, ok func(*dlq.Record) bool) *dlq.Record {
	t.Helper()
	var r *dlq.Record
	eventually.Nil(t, "record "+id+" to show "+what, func() error {
		var err error
		if r, err = b.store.Get(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if !ok(r) {
			return fmt.Errorf("it is %+v", r)
		}
		return nil
	}, eventually.Within(20*time.Second))
	return r
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
