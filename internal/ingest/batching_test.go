package ingest_test

import (
	"context"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
)

// While the writer is busy with a batch, the poll loop holds what it polls
// and hands the writer one batch of up to BatchSize, not one batch per
// fetch: here every fetch brings one record (each is its own record batch,
// all on one partition), and the writer is held on a
// table lock while 40 records are fetched behind its first batch.
func TestPollsAddUpToOneBatchWhileTheWriterIsBusy(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	const batch, total = 40, 120
	producer := kafkatest.Client(t, b.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range total {
		r := garbage(i)
		r.Partition = 0
		kafkatest.Produce(t, producer, r) // one at a time: one record batch each
	}
	// The writer's COPY waits for this lock (ROW EXCLUSIVE conflicts with SHARE).
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE redrive_record_coord IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	var fetched atomic.Int64
	s := startWith(t, b, b.store, "batching", func(c *ingest.Config) {
		c.BatchSize = batch
		c.ClientOpts = append(c.ClientOpts, kgo.FetchMaxPartitionBytes(1), kgo.WithHooks(fetchCounter{&fetched}))
	})
	// The client fetches again only once the poll loop took the last fetch:
	// 2 + batch records fetched means the first batch went to the writer
	// (which waits on the lock) and the loop polled batch more. Before the
	// loop held polls, it stopped at 3: the second poll waited in submit.
	eventually.True(t, "the poll loop to poll a batch behind the blocked writer", func() bool { return fetched.Load() >= 2+batch })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitForCount(t, b.store, total)
	var m dto.Metric
	if err := s.metrics.IngestBatchRecords.Write(&m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	full := h.GetSampleCount()
	for _, bk := range h.GetBucket() {
		if bk.GetUpperBound() == 16 {
			full -= bk.GetCumulativeCount()
		}
	}
	if full == 0 || h.GetSampleCount() == 0 {
		t.Fatalf("no batch had more than 16 records (%d batches, %v records): polls were not held", h.GetSampleCount(), h.GetSampleSum())
	}
	if h.GetSampleSum() != total {
		t.Errorf("batches held %v records, want %d", h.GetSampleSum(), total)
	}
}

// fetchCounter counts the records the client fetches.
type fetchCounter struct{ n *atomic.Int64 }

func (c fetchCounter) OnFetchRecordBuffered(*kgo.Record) { c.n.Add(1) }
