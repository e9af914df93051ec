package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/store/rawbench"
)

const benchTopic = "dead_letter_queue"

// ingestBatch is the ingest batch size, and the raw baseline's COPY size.
const ingestBatch = 5000

// IngestResult holds the ingest figures of one run.
type IngestResult struct {
	Records     int
	Ingest      time.Duration // DLQ topic → committed rows and offsets, steady state
	IngestCount int           // records that time covers (the first batch is excluded)
	RawCopy     time.Duration // one raw binary COPY of the same rows into the same table
	// The same ingest with the broker in a process of its own, so that its
	// CPU is not booked to Redrive.
	IngestBrokerProcess      time.Duration
	IngestBrokerProcessCount int
}

// Ingest measures end-to-end ingest throughput (DLQ topic → committed rows)
// and a raw COPY of the same rows into the same table, and prints both.
func Ingest(ctx context.Context, cfg Config) (*IngestResult, error) {
	cfg = cfg.withDefaults()
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, benchTopic))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	rules, err := withIngestRules(cfg)
	if err != nil {
		return nil, err
	}
	withRules := "a capacity rule, allowed_job_types and a filter on the topic"
	if rules == nil {
		withRules = "no ingest rules"
	}
	fmt.Fprintf(cfg.Out, "ingest: %d records, %d-byte values, native envelope, %s\n", cfg.Records, cfg.ValueSize, withRules)
	if err := produceFailures(ctx, brokers, cfg.Records, cfg.ValueSize); err != nil {
		return nil, err
	}
	res := &IngestResult{Records: cfg.Records}
	// A warm-up load, untimed: a fresh cluster's first load creates its WAL
	// segments and fills its caches, which the later phases (the raw COPY,
	// the ingest apart) do not pay.
	if _, _, err := timeIngestTopicWith(ctx, pool, brokers, benchTopic, cfg.Records, nil, rules); err != nil {
		return nil, err
	}
	if err := emptyTables(ctx, pool); err != nil {
		return nil, err
	}
	if res.Ingest, res.IngestCount, err = timeIngestTopicWith(ctx, pool, brokers, benchTopic, cfg.Records, nil, rules); err != nil {
		return nil, err
	}
	if res.RawCopy, err = timeRawCopy(ctx, pool, ingestBatch); err != nil {
		return nil, err
	}
	// With the broker apart it is the only broker: the one in this process,
	// and the records it holds, would otherwise stay in this process's heap
	// while the ingest apart is timed (as no deployment has them).
	cluster.Close()
	if res.IngestBrokerProcess, res.IngestBrokerProcessCount, err = ingestFromBrokerProcess(ctx, pool, cfg, rules); err != nil {
		return nil, err
	}
	e2e, raw := rate(res.IngestCount, res.Ingest), rate(res.Records, res.RawCopy)
	apart := rate(res.IngestBrokerProcessCount, res.IngestBrokerProcess)
	fmt.Fprintf(cfg.Out, "  end-to-end ingest   %9.0f records/s  (%d records in %v, broker in process)\n", e2e, res.IngestCount, res.Ingest.Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "  end-to-end ingest   %9.0f records/s  (%d records in %v, broker in its own process)\n", apart,
		res.IngestBrokerProcessCount, res.IngestBrokerProcess.Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "  raw COPY baseline   %9.0f records/s  (%d records in %v)\n", raw, res.Records, res.RawCopy.Round(time.Millisecond))
	fmt.Fprintf(cfg.Out, "  ratio               %9.2f / %.2f    (broker in process / apart; targets >= %.2f / %.2f)\n", e2e/raw, apart/raw,
		IngestInProcessTarget, IngestApartTarget)
	return res, nil
}

// ingestFromBrokerProcess empties the table and times the same ingest again
// with the broker as a `redrive broker` process.
func ingestFromBrokerProcess(ctx context.Context, pool *rawbench.DB, cfg Config, rules func(*ingest.Config)) (time.Duration, int, error) {
	broker, addr, err := startBroker(ctx, []string{benchTopic})
	if err != nil {
		return 0, 0, err
	}
	defer broker.stop()
	if err := produceFailures(ctx, []string{addr}, cfg.Records, cfg.ValueSize); err != nil {
		return 0, 0, err
	}
	if err := emptyTables(ctx, pool); err != nil {
		return 0, 0, err
	}
	return timeIngestTopicWith(ctx, pool, []string{addr}, benchTopic, cfg.Records, nil, rules)
}

// emptyTables empties the record tables for the next timed load, and leaves
// Postgres as every timed load finds it: vacuumed, analyzed, checkpointed.
func emptyTables(ctx context.Context, pool *rawbench.DB) error {
	if _, err := pool.Exec(ctx, "TRUNCATE redrive_record_coord, redrive_record_data, redrive_lifecycle"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE redrive_record_coord, redrive_record_data, redrive_lifecycle"); err != nil {
		return err
	}
	quiesce(ctx, pool)
	return nil
}

// produceFailures fills the DLQ topic with native envelopes of distinct values
// (equal values would compress to nothing and flatter the figures).
func produceFailures(ctx context.Context, brokers []string, n, size int) error {
	return produceAll(ctx, brokers, n, func(i int) (*kgo.Record, error) { return benchFailure(i, distinctValue(i, size)), nil })
}

// benchFailure is the i-th failure the ingest suites produce: the native
// envelope of a record of orders with value, as a client library writes it.
func benchFailure(i int, value []byte) *kgo.Record {
	src := &kgo.Record{Topic: "orders", Partition: int32(i % 12), Offset: int64(i), Key: fmt.Appendf(nil, "order-%d", i), Value: value,
		Timestamp: time.Now(), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	return envelope.Encode(src, envelope.FailureInfo{
		DLQTopic: benchTopic, Group: "billing", Type: "order.created",
		ErrorType: "db.connection_refused", Message: "dial tcp 10.0.0.5:5432: connection refused",
		Backtrace: []string{"main.handle()", "\t/app/handler.go:42"},
	})
}

// produceAll produces record(i) for i in [0, n) and waits until every one
// is acknowledged; it returns the first error.
func produceAll(ctx context.Context, brokers []string, n int, record func(i int) (*kgo.Record, error)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		rec, err := record(i)
		if err != nil {
			return err
		}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return firstErr
}

// timeRawCopy is the ingest baseline (rawbench.DB.TimeRawCopy).
func timeRawCopy(ctx context.Context, pool *rawbench.DB, batch int) (time.Duration, error) {
	return pool.TimeRawCopy(ctx, batch)
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// distinctValue is a JSON value of exactly size bytes, random enough not to
// compress: equal values would compress to nothing and flatter the figures.
func distinctValue(i, size int) []byte {
	pad := make([]byte, size/2)
	_, _ = rand.Read(pad)
	value := fmt.Appendf(nil, `{"order_id":%d,"pad":"%s"}`, i, hex.EncodeToString(pad))
	value = value[:min(len(value), size)]
	if len(value) < size {
		value = append(value, bytes.Repeat([]byte(" "), size-len(value))...)
	}
	return value
}
