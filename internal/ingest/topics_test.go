package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// startLoad produces failure envelopes of "orders" to the DLQ topic, one
// after the other.
func startLoad(t *testing.T, brokers []string) *kafkatest.Load {
	t.Helper()
	return kafkatest.StartLoad(t, brokers, 2*time.Millisecond, func(_ int, key string) *kgo.Record {
		src := &kgo.Record{Topic: "orders", Key: []byte(key), Value: []byte(`{"n":1}`)}
		return envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: "db.down", Code: dlq.CodeDeadLetter})
	})
}

// waitStored waits until every key is stored.
func (b *bundle) waitStored(t *testing.T, keys []string) {
	t.Helper()
	eventually.Nil(t, "every record stored", func() error {
		rows, err := b.pool.Query(context.Background(), "SELECT convert_from(key, 'UTF8') FROM redrive_record")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		have := make(map[string]bool, len(stored))
		for _, k := range stored {
			have[k] = true
		}
		var missing []string
		for _, k := range keys {
			if !have[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d records not stored, e.g. %v", len(missing), len(keys), missing[:min(5, len(missing))])
		}
		return nil
	})
}

// TestRecreatedDLQTopicIsConsumedAgain: a DLQ topic deleted and created
// again under load is taken up anew — every record acknowledged on the new
// topic is stored, from its offset 0 on — and the UNKNOWN_TOPIC_ID errors
// in between are logged once, not once per fetch.
func TestRecreatedDLQTopicIsConsumedAgain(t *testing.T) {
	b := setup(t)
	logs := &logtest.Buffer{}
	startWith(t, b, b.store, "g", func(c *ingest.Config) {
		c.Logger = logs.JSONLogger(slog.LevelInfo)
		c.TopicCheckInterval = 200 * time.Millisecond // default 5s
	})
	load := startLoad(t, b.brokers)
	eventually.True(t, "30 records acknowledged", func() bool { return len(load.AckedIn([2]time.Time{{}, testdate.Now()})) >= 30 })
	beforeDelete := testdate.Now()
	b.waitStored(t, load.AckedIn([2]time.Time{{}, beforeDelete}))

	kafkatest.Recreate(t, b.brokers, dlqTopic, 3)
	recreated := testdate.Now()
	// One more than wanted: the first acknowledgement after recreated may
	// be the old topic's, the produce in flight when it was deleted.
	eventually.True(t, "21 records acknowledged after the recreation", func() bool {
		return len(load.AckedIn([2]time.Time{recreated, testdate.Now()})) >= 21
	})
	load.Stop()
	// Which topic acknowledged a record is where it landed, not when its
	// acknowledgement came back (OnTopicNow): the old topic's last one
	// may come back after the new topic exists, and was deleted with it.
	after := load.OnTopicNow(t, b.brokers)
	if len(after) < 20 {
		t.Fatalf("only %d records produced to the new topic", len(after))
	}
	b.waitStored(t, after)

	if n := len(logs.Find("fetch error", nil)); n > 2 {
		t.Errorf("%d fetch error lines in the log; want each topic and reason logged at most once a minute", n)
	}
	if n := len(logs.Find("deleted and created again", nil)); n != 1 {
		t.Errorf("%d log lines say the topic was taken up anew, want 1", n)
	}
}

// The DLQ topic is deleted and created again while Postgres is down and a
// batch of the old topic waits to be written: that batch is written once
// Postgres is back (the old topic's records exist nowhere else by then), and
// the new topic is taken up after it, from its start. Nothing is lost.
func TestRecreatedDLQTopicWhilePostgresIsDownLosesNothing(t *testing.T) {
	b := setup(t)
	cluster, url := pgtest.NewCluster(t)
	pool := pgtest.Pool(t, url)
	b.pool, b.store = pool, store.New(pool)
	in := startWith(t, b, b.store, "g", func(c *ingest.Config) { c.TopicCheckInterval = 200 * time.Millisecond }).in
	failures := func(prefix string, n int) (keys []string, recs []*kgo.Record) {
		for i := range n {
			key := fmt.Sprintf("%s-%d", prefix, i)
			src := &kgo.Record{Topic: "orders", Key: []byte(key), Value: []byte(`{}`)}
			keys = append(keys, key)
			recs = append(recs, envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: "x", Code: dlq.CodeDeadLetter}))
		}
		return keys, recs
	}
	first, recs := failures("first", 50)
	kafkatest.Produce(t, b.cl, recs...)
	b.waitStored(t, first)

	if err := cluster.Pause(); err != nil {
		t.Fatal(err)
	}
	held, recs := failures("held", 50)
	kafkatest.Produce(t, b.cl, recs...)
	eventually.True(t, "ingest to pause", func() bool { return errors.Is(in.Ready(), ingest.ErrPaused) })
	kafkatest.Recreate(t, b.brokers, dlqTopic, 3) // "held" is only in ingest's memory now
	fresh, recs := failures("fresh", 50)
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), recs...)
	if err := cluster.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.waitStored(t, slices.Concat(first, held, fresh))
}
