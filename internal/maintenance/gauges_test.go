package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/metrics"
)

// redrive_redelivery_due counts the records whose redelivery is due, per
// queue (retryable ones and operator retries): not those still backing off,
// not dead letters; and a queue whose
// backlog drained reads 0, not its last value. Autoscalers read it.
func TestGaugesCountDueRedeliveries(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := metrics.NewDeadLetter(reg, b.clock.Now)
	now := b.clock.Now()
	retryable := func(queue string, due time.Time) rec {
		return rec{queue: queue, state: dlq.StateRetryable, at: now.Add(-time.Hour), due: due}
	}
	b.insert(t,
		retryable("orders", now.Add(-time.Minute)), retryable("orders", now.Add(-time.Second)), retryable("orders", now),
		retryable("orders", now.Add(time.Hour)), // still backing off
		retryable("billing", now.Add(-time.Minute)),
		deadLetter("orders", now.Add(-time.Hour)),
	)
	// An operator's retry waits for the scheduler as available, due now.
	retried := b.insert(t, deadLetter("orders", now.Add(-time.Hour)))
	if _, err := b.pool.Exec(ctx, "UPDATE redrive_lifecycle SET state = 'available', exhaustion = NULL, discarded_at = NULL, next_retry_at = $2 WHERE id = $1", retried[0], now); err != nil {
		t.Fatal(err)
	}
	g, err := maintenance.NewGauges(maintenance.GaugesConfig{Store: b.store, Metrics: m, Clock: b.clock})
	mustNoErr(t, err)
	mustNoErr(t, g.RunOnce(ctx))
	want := `
# HELP redrive_redelivery_due Records whose redelivery is due and not yet claimed, per queue, read from Postgres (saturates at 100,000 per queue): the backlog an autoscaler adds replicas for.
# TYPE redrive_redelivery_due gauge
redrive_redelivery_due{queue="billing"} 1
redrive_redelivery_due{queue="orders"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "redrive_redelivery_due"); err != nil {
		t.Error(err)
	}

	// billing's record is claimed (no longer retryable): its series reads 0.
	if _, err := b.pool.Exec(ctx, "UPDATE redrive_lifecycle SET state = 'available', next_retry_at = NULL WHERE queue = 'billing'"); err != nil {
		t.Fatal(err)
	}
	mustNoErr(t, g.RunOnce(ctx))
	want = strings.Replace(want, `{queue="billing"} 1`, `{queue="billing"} 0`, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "redrive_redelivery_due"); err != nil {
		t.Error(err)
	}
}
