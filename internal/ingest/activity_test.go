package ingest_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/testdate"
)

// Ingest counts the failures it stores in the queue's activity: a
// re-consumed batch's duplicates are not counted again, and when the
// statistic cannot be written ingest goes on storing records.
func TestIngestCountsStoredFailuresOnce(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	added := func() int64 {
		t.Helper()
		a, err := b.store.QueueActivity(ctx, []string{dlqTopic}, testdate.Now())
		if err != nil {
			t.Fatal(err)
		}
		return a[dlqTopic].Added // unparseable records belong to the DLQ topic
	}
	b.produceGarbage(t, 0, 50)
	first := start(t, b, b.store, "first")
	waitForCount(t, b.store, 50)
	eventually.True(t, "50 added", func() bool { return added() == 50 })
	first.stop()

	// A second group re-consumes the 50 (as after a crash before the offset
	// commit): duplicates, not failures stored.
	logs := &logtest.Buffer{}
	second := startWith(t, b, b.store, "second", func(c *ingest.Config) { c.Logger = logs.TextLogger(slog.LevelInfo) })
	dups := second.metrics.IngestDuplicates.WithLabelValues(dlqTopic)
	eventually.True(t, "the second group to re-consume all 50", func() bool { return counterValue(dups) == 50 })
	kafkatest.Produce(t, b.cl, garbage(99))
	waitForCount(t, b.store, 51)
	eventually.True(t, "51 added", func() bool { return added() == 51 })

	// The activity table cannot be written: records are still stored.
	if _, err := b.pool.Exec(ctx, `ALTER TABLE redrive_queue_activity RENAME TO redrive_queue_activity_away`); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, b.cl, garbage(100))
	waitForCount(t, b.store, 52)
	eventually.True(t, "the failed statistic to be logged", func() bool { return strings.Contains(logs.String(), "record queue activity") })
	if _, err := b.pool.Exec(ctx, `ALTER TABLE redrive_queue_activity_away RENAME TO redrive_queue_activity`); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, b.cl, garbage(101))
	waitForCount(t, b.store, 53)
	eventually.True(t, "52 added", func() bool { return added() == 52 })
}
