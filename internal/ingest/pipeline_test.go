package ingest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
)

// While a stored batch waits to be finished (here: on the incidents table,
// held by another transaction), the next batch is stored; neither batch's
// offsets are committed before its incidents are recorded, and both are
// once they can be.
func TestTheNextBatchIsStoredWhileTheLastOneIsFinished(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	hold, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, "LOCK TABLE redrive_incident IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	pub := events.New(events.Config{})
	sub := pub.Broker().Subscribe(events.Filter{})
	if err := pub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Stop() })
	startWith(t, b, b.store, "overlap", func(c *ingest.Config) { c.Events = pub })

	kafkatest.Produce(t, b.cl, dlqRecord("orders", []byte("k1"), []byte(`{"n":1}`)))
	waitForCount(t, b.store, 1)
	// A poll of its own: the first batch is stored and waits to be finished.
	kafkatest.Produce(t, b.cl, dlqRecord("orders", []byte("k2"), []byte(`{"n":2}`)))
	waitForCount(t, b.store, 2)

	adm := kadm.NewClient(b.cl)
	committed := func() (int64, error) {
		offsets, err := adm.FetchOffsets(ctx, "overlap")
		if err != nil {
			return 0, err
		}
		var n int64
		offsets.Each(func(o kadm.OffsetResponse) { n += max(o.At, 0) })
		return n, nil
	}
	// The finish stage is at the incidents, waiting on the lock: past that
	// point come the commits, so none may have happened.
	eventually.Nil(t, "the finish stage waiting on the incidents table", func() error {
		var waiting int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO redrive_incident%'`).Scan(&waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return fmt.Errorf("no statement waits on redrive_incident")
		}
		return nil
	})
	if n, err := committed(); err != nil || n != 0 {
		t.Fatalf("committed %d offsets (%v) while the batches' incidents could not be recorded, want 0", n, err)
	}
	var incidents int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_incident").Scan(&incidents); err != nil {
		t.Fatal(err)
	}
	if incidents != 0 {
		t.Fatalf("%d incidents recorded through the lock", incidents)
	}

	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	eventually.Nil(t, "both batches committed", func() error {
		if n, err := committed(); err != nil || n != 2 {
			return fmt.Errorf("committed %d offsets (%v), want 2", n, err)
		}
		return nil
	})
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_incident").Scan(&incidents); err != nil {
		t.Fatal(err)
	}
	if incidents != 1 {
		t.Fatalf("%d incidents after the lock, want the batches' one", incidents)
	}
	// Finished without their values, their events still carry their keys.
	var keys []string
	for len(keys) < 2 {
		select {
		case m := <-sub.C:
			if d, ok := m.Event.Data.(events.RecordData); ok && m.Event.Type == events.DeadLetterAdded && d.RecordKeyData != nil {
				keys = append(keys, d.Key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("dead_letter.added events with keys: %v, want k1 and k2", keys)
		}
	}
	if !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("dead_letter.added events with keys %v, want [k1 k2]", keys)
	}
}

// A member that joins the group while a steady stream keeps the writer
// busy, every batch slow to store, gets its partitions: the poll loop lets
// the rebalance through as soon as it waits, though the writer is never idle.
func TestAMemberJoinsWhileBatchesKeepComing(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	// Each batch takes at least 200 ms to store.
	if _, err := b.pool.Exec(ctx, `CREATE FUNCTION slow_batch() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_sleep(0.2); RETURN NULL; END $$;
		CREATE TRIGGER slow_batch AFTER INSERT ON redrive_record_coord FOR EACH STATEMENT EXECUTE FUNCTION slow_batch()`); err != nil {
		t.Fatal(err)
	}
	first := startWith(t, b, b.store, "steady")
	streamCtx, stopStream := context.WithCancel(ctx)
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		for i := 0; streamCtx.Err() == nil; i++ {
			// One record after another (each acknowledged first), to every
			// partition: faster than the slowed writer stores them.
			_ = b.cl.ProduceSync(streamCtx, dlqRecord("orders", fmt.Appendf(nil, "k%d", i), []byte(`{}`))).FirstErr()
		}
	}()
	t.Cleanup(func() { stopStream(); <-streamed })
	eventually.Nil(t, "the first member storing", func() error {
		if n := counterValue(first.metrics.IngestRecords.WithLabelValues(dlqTopic, string(dlq.FormatRedrive))); n < 20 {
			return fmt.Errorf("%v records stored", n)
		}
		return nil
	})
	second := startWith(t, b, b.store, "steady")
	eventually.Nil(t, "the second member storing records of its own partitions", func() error {
		if n := counterValue(second.metrics.IngestRecords.WithLabelValues(dlqTopic, string(dlq.FormatRedrive))); n == 0 {
			return fmt.Errorf("the second member stored nothing")
		}
		return nil
	})
}
