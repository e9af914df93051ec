package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const dlqTopic = "dead_letter_queue"

type bundle struct {
	brokers []string
	pool    *pgxpool.Pool
	store   *store.Store
	cl      *kgo.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic)
	pool := pgtest.New(t)
	return &bundle{brokers: brokers, pool: pool, store: store.New(pool), cl: kafkatest.Client(t, brokers)}
}

// started is a running ingester.
type started struct {
	in      *ingest.Ingester
	metrics *metrics.Metrics
	stop    func()
}

// start runs an ingester until the test ends (or until stop is called).
func start(t *testing.T, b *bundle, st *store.Store, group string) *started {
	t.Helper()
	return startWith(t, b, st, group)
}

// startWith is start with changes to the ingester's config.
func startWith(t *testing.T, b *bundle, st *store.Store, group string, mod ...func(*ingest.Config)) *started {
	t.Helper()
	m := metrics.New()
	cfg := ingest.Config{
		Brokers: b.brokers, Group: group, BatchSize: 100, Metrics: m,
		ClientOpts:      kafkatest.ClientOpts(b.brokers),
		RetryBackoffMin: 20 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond,
	}
	for _, f := range mod {
		f(&cfg)
	}
	in, err := ingest.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		if err := in.Stop(); err != nil {
			t.Errorf("ingest: %v", err)
		}
	}
	t.Cleanup(stop)
	return &started{in: in, metrics: m, stop: stop}
}

func waitForCount(t *testing.T, st *store.Store, want int64) {
	t.Helper()
	var n int64
	eventually.Nil(t, fmt.Sprintf("%d records stored", want), func() error {
		var err error
		if n, err = st.Count(context.Background(), &filter.Filter{}); err != nil || n < want {
			return fmt.Errorf("stored %d (%v)", n, err)
		}
		return nil
	})
	if n != want {
		t.Fatalf("stored %d records, want %d", n, want)
	}
}

func garbage(i int) *kgo.Record {
	return &kgo.Record{
		Topic:   dlqTopic,
		Key:     []byte{0xff, byte(i)},
		Value:   []byte(fmt.Sprintf("\x00\x01not an envelope %d \xc3\x28", i)),
		Headers: []kgo.RecordHeader{{Key: "weird", Value: []byte{0, 1, 2}}, {Key: "kafka_dlt-original-partition", Value: []byte{1}}},
	}
}

// produceGarbage produces garbage(i) for i in [from, to) to the DLQ topic.
func (b *bundle) produceGarbage(t *testing.T, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, garbage(i))
	}
	kafkatest.Produce(t, b.cl, recs...)
}

func TestGarbageIsStoredAsUnparseable(t *testing.T) {
	b := setup(t)
	start(t, b, b.store, "g1")
	kafkatest.Produce(t, b.cl, garbage(1), &kgo.Record{Topic: dlqTopic}) // and an empty record
	waitForCount(t, b.store, 2)

	page, err := b.store.List(context.Background(), &store.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Records {
		if r.Format != dlq.FormatUnparseable || r.LastError().Type != dlq.ErrorTypeUnparseable || r.Queue != dlqTopic {
			t.Errorf("record %s: format %q, error type %q, queue %q", r.ID, r.Format, r.LastError().Type, r.Queue)
		}
	}
	// The two may land on different partitions, so either can be stored
	// first: the garbage record is the one with a key.
	got := page.Records[0]
	if len(got.Key) == 0 {
		got = page.Records[1]
	}
	if string(got.Value) != string(garbage(1).Value) || string(got.Key) != "\xff\x01" || len(got.Headers) != 2 {
		t.Errorf("raw bytes not preserved: key %q value %q headers %v", got.Key, got.Value, got.Headers)
	}
}

func TestSameBatchConsumedTwiceStoresNoDuplicates(t *testing.T) {
	b := setup(t)
	b.produceGarbage(t, 0, 50)

	first := start(t, b, b.store, "first")
	waitForCount(t, b.store, 50)
	first.stop()
	// A second group consumes the same records from the start: exactly what
	// happens when a crash comes between the insert and the offset commit.
	second := start(t, b, b.store, "second")
	dups := second.metrics.IngestDuplicates.WithLabelValues(dlqTopic)
	eventually.True(t, "the second group to re-consume all 50", func() bool { return counterValue(dups) == 50 })
	kafkatest.Produce(t, b.cl, garbage(99))
	waitForCount(t, b.store, 51)
}

func TestPostgresOutageMidIngestLosesAndDuplicatesNothing(t *testing.T) {
	b := setup(t)
	cluster, url := pgtest.NewCluster(t)
	pool := pgtest.Pool(t, url)
	st := store.New(pool)
	in := start(t, b, st, "outage").in

	b.produceGarbage(t, 0, 200)
	waitForCount(t, st, 200)

	if err := cluster.Pause(); err != nil {
		t.Fatal(err)
	}
	b.produceGarbage(t, 200, 500) // consumed while Postgres is down: must wait, not be dropped or committed
	eventually.True(t, "ingest to pause", func() bool { return errors.Is(in.Ready(), ingest.ErrPaused) })
	if err := cluster.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.produceGarbage(t, 500, 600)
	waitForCount(t, st, 600)

	var distinct int
	if err := pool.QueryRow(context.Background(),
		"SELECT count(DISTINCT (dlq_partition, dlq_offset)) FROM redrive_record").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != 600 {
		t.Fatalf("distinct DLQ coordinates = %d, want 600", distinct)
	}
	if err := in.Ready(); err != nil {
		t.Fatalf("after Postgres came back ingest is not ready: %v", err)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestPartlyReconsumedBatchAnnouncesTheRecordsItStores(t *testing.T) {
	b := setup(t)
	b.produceGarbage(t, 0, 30)
	first := start(t, b, b.store, "first")
	waitForCount(t, b.store, 30)
	first.stop()

	// A crash between insert and commit, and meanwhile 20 more records:
	// the batch a new member reads mixes 30 stored records with 20 new ones.
	b.produceGarbage(t, 100, 120)
	pub := events.New(events.Config{})
	sub := pub.Broker().Subscribe(events.Filter{})
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Stop() })
	second := startWith(t, b, b.store, "second", func(c *ingest.Config) { c.Events = pub })
	waitForCount(t, b.store, 50)
	added := second.metrics.DeadLetter.AddedTotal.WithLabelValues(dlqTopic, "")
	dups := second.metrics.IngestDuplicates.WithLabelValues(dlqTopic)
	eventually.True(t, "20 added and 30 duplicates counted", func() bool { return counterValue(added) == 20 && counterValue(dups) == 30 })
	ids := map[string]bool{}
	for len(ids) < 20 {
		select {
		case m := <-sub.C:
			if m.Event.Type == events.DeadLetterAdded {
				ids[m.Event.Subject] = true
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d dead_letter.added events, want 20", len(ids))
		}
	}
}

func TestRecreatedDLQTopicIsNotMistakenForDuplicates(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	at := testdate.Now().Add(-time.Hour).Truncate(time.Millisecond)
	batch := func(from int, ts time.Time) []*kgo.Record {
		var out []*kgo.Record
		for i := range 5 {
			r := garbage(from + i)
			r.Timestamp = ts
			out = append(out, r)
		}
		return out
	}
	kafkatest.Produce(t, b.cl, batch(0, at)...)
	first := start(t, b, b.store, "first")
	waitForCount(t, b.store, 5)
	first.stop()

	// The DLQ topic is deleted and created again: its offsets start at 0.
	adm := kadm.NewClient(b.cl)
	if _, err := adm.DeleteTopic(ctx, dlqTopic); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the topic to be gone", func() bool {
		td, err := adm.ListTopics(ctx, dlqTopic)
		return err == nil && !td.Has(dlqTopic)
	})
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, dlqTopic); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), batch(50, at.Add(time.Hour))...) // a client that never knew the old topic id
	start(t, b, b.store, "second")
	// Same coordinates as the old rows, new records: all five are stored.
	waitForCount(t, b.store, 10)
}

// Ingest stopped at random points of its pipeline — mid-COPY, between a
// batch's rows and its offsets, with the next batch decoded and waiting —
// and started again, stores every record exactly once.
func TestStopsAtRandomPointsOfThePipelineLoseAndDuplicateNothing(t *testing.T) {
	b := setup(t)
	const total = 3000
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = garbage(i)
	}
	kafkatest.Produce(t, b.cl, recs...)
	seed := testdate.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	for round := range 6 {
		s := start(t, b, b.store, "crash")
		// Let it get going, then stop it wherever it is: a random pause
		// picks the point, it waits for nothing.
		eventually.True(t, "progress", func() bool {
			n, err := b.store.Count(context.Background(), &filter.Filter{})
			return err == nil && (n >= int64(round*400) || n == total)
		})
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		s.stop()
	}
	start(t, b, b.store, "crash")
	waitForCount(t, b.store, total)
	var rows, distinct int
	if err := b.pool.QueryRow(context.Background(),
		"SELECT count(*), count(DISTINCT (dlq_partition, dlq_offset)) FROM redrive_record").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != total || distinct != total {
		t.Fatalf("%d rows, %d distinct DLQ records; want %d of each", rows, distinct, total)
	}
}
