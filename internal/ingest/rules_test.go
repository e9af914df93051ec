package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// A crash between a batch's insert and its capacity check leaves the batch
// stored and its offsets uncommitted: consumed again (here by a new group, as
// after the crash), every record is a duplicate, and the records past the
// limit are still turned away, by their DLQ coordinates.
func TestCapacityIsEnforcedOnABatchConsumedAgain(t *testing.T) {
	b := setup(t)
	var recs []*kgo.Record
	for i := range 5 {
		src := &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(`{"n":1}`)}
		rec := envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, Type: "t", ErrorType: "db.down", Message: "boom"})
		rec.Partition = 0 // one partition: the order of the records is the order of their offsets
		recs = append(recs, rec)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())},
		kafkatest.ClientOpts(b.brokers)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The first run stores them without any rule: the insert before the crash.
	first := start(t, b, b.store, "before-crash")
	waitForCount(t, b.store, 5)
	first.stop()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("topics:\n  orders: {max_size: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := policy.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	again := startWith(t, b, b.store, "after-crash", func(c *ingest.Config) { c.Policies = set })
	eventually.Nil(t, "the two newest turned away", func() error {
		n, err := b.store.Count(context.Background(), &filter.Filter{ErrorType: policy.ErrorTypeQueueFull})
		if err != nil || n != 2 {
			return fmt.Errorf("%d queue_full (%v)", n, err)
		}
		return nil
	})
	page, err := b.store.List(context.Background(), &store.ListParams{Limit: 10, Filter: filter.Filter{State: dlq.StateRetryable}})
	if err != nil || len(page.Records) != 3 {
		t.Fatalf("%d retryable (%v), want 3", len(page.Records), err)
	}
	for _, r := range page.Records {
		if k := string(r.Key); k == "k3" || k == "k4" {
			t.Errorf("%s is retryable; the newest two are past the limit", k)
		}
	}
	// Counted once the batch is committed, just after the records change.
	eventually.Nil(t, "the two counted", func() error {
		if v := counterValue(again.metrics.Rules.TurnedAway.WithLabelValues("orders", "queue_full")); v != 2 {
			return fmt.Errorf("turned away counted %v, want 2", v)
		}
		return nil
	})
}
