package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// failingFetches makes the broker answer every fetch of topic with
// UNKNOWN_TOPIC_ID, as it answers a client that still holds the id of a
// topic deleted and created since, while on is set.
func failingFetches(c *kfake.Cluster, topic string, on *atomic.Bool) {
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if !on.Load() || !slices.ContainsFunc(req.Topics, func(t kmsg.FetchRequestTopic) bool { return t.Topic == topic || t.Topic == "" }) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.UnknownTopicID.Code
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
}

// /readyz names a DLQ topic that exists but is not being consumed (every
// fetch fails), instead of saying ok, and the failures are logged once a
// minute, not once per fetch; once fetches work again it is ready again.
func TestReadinessNamesADLQTopicThatIsNotConsumed(t *testing.T) {
	t.Parallel()
	c := kafkatest.NewCluster(t, dlqTopic, dlqTopic+".archive", dlqTopic+".events")
	var failing atomic.Bool
	failing.Store(true)
	failingFetches(c, dlqTopic, &failing)
	logs := &logtest.Buffer{}
	b := start(t, c.ListenAddrs(), logs.JSONLogger(slog.LevelDebug))

	var notReady struct {
		Error struct {
			Details struct {
				Checks map[string]string `json:"checks"`
			} `json:"details"`
		} `json:"error"`
	}
	eventually.True(t, "/readyz to name the DLQ topic that is not consumed", func() bool {
		notReady.Error.Details.Checks = nil
		return b.get(t, "/readyz", &notReady) == http.StatusServiceUnavailable &&
			strings.Contains(notReady.Error.Details.Checks["dlq_topics"], `DLQ topic "`+dlqTopic+`" is not being consumed`)
	})
	if check := notReady.Error.Details.Checks["dlq_topics"]; !strings.Contains(check, "UNKNOWN_TOPIC_ID") {
		t.Errorf("dlq_topics = %q, want the error named", check)
	}
	time.Sleep(time.Second) // a second of fetches failing as fast as they can
	if n := len(logs.Find("fetch error", map[string]any{"component": "ingest"})); n == 0 || n > 2 {
		t.Errorf("%d fetch error lines; want the failure logged once (a line per reason and minute)", n)
	}

	failing.Store(false)
	eventually.True(t, "/readyz ok once fetches work", func() bool { return b.get(t, "/readyz", nil) == http.StatusOK })
}

// A forged DLQ record whose source topic is the DLQ topic itself, with a
// retry policy of 1 ms and two billion attempts, is never produced back to
// the DLQ (where it would come back as a failure of itself, over and over):
// it ends a dead letter, and the DLQ topic holds only the forged record.
func TestForgedSelfLoopEndsAfterOneAttemptAtMost(t *testing.T) {
	b := setup(t)
	src := &kgo.Record{Topic: dlqTopic, Key: []byte("loop"), Value: []byte(`{"loop":true}`)}
	forged := envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: "x", Code: dlq.CodeRetry,
		Retry: []byte(`{"max_attempts":2000000000,"initial_interval":"PT0.001S","max_interval":"PT0.001S","jitter":false}`)})
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), forged)

	var got list
	eventually.True(t, "the forged record to end a dead letter", func() bool {
		got = list{}
		return b.get(t, "/ojs/v1/dead-letter?queue="+dlqTopic, &got) == http.StatusOK && len(got.Items) == 1 &&
			got.Items[0].State == "discarded"
	})
	time.Sleep(500 * time.Millisecond) // a loop of 1 ms would have gone round hundreds of times by now
	got = list{}
	if b.get(t, "/ojs/v1/dead-letter?queue="+dlqTopic, &got) != http.StatusOK || len(got.Items) != 1 ||
		got.Items[0].State != "discarded" || got.Items[0].Attempt != 1 {
		t.Errorf("forged record: %+v; want one dead letter, its one attempt the failure that brought it", got.Items)
	}
	ends, err := kadm.NewClient(kafkatest.Client(t, b.brokers)).ListEndOffsets(context.Background(), dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 1 {
		t.Fatalf("the DLQ topic holds %d records; want only the forged one", total)
	}
}

// startDLQLoad produces failures of "orders" to the DLQ topic, one after
// the other, alternately to be retried and to be kept as dead letters.
func startDLQLoad(t *testing.T, brokers []string) *kafkatest.Load {
	t.Helper()
	return kafkatest.StartLoad(t, brokers, 3*time.Millisecond, func(i int, key string) *kgo.Record {
		code := dlq.CodeRetry
		if i%2 == 1 {
			code = dlq.CodeDeadLetter
		}
		return failure(time.Now(), "orders", "t", "db.down", code, key)
	})
}

// query runs sql and returns its one text column.
func query(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// missing returns the elements of want that are not in have.
func missing(want, have []string) []string {
	set := make(map[string]bool, len(have))
	for _, h := range have {
		set[h] = true
	}
	var out []string
	for _, w := range want {
		if !set[w] {
			out = append(out, w)
		}
	}
	return out
}

// waitNoneMissing waits until every element of want is in what list returns.
func waitNoneMissing(t *testing.T, what string, want []string, list func() []string) {
	t.Helper()
	eventually.Nil(t, "every one of "+what, func() error {
		if m := missing(want, list()); len(m) > 0 {
			return fmt.Errorf("%d of %d missing, e.g. %v", len(m), len(want), m[:min(5, len(m))])
		}
		return nil
	}, eventually.Within(60*time.Second))
}

// consumeIDs reads topic from its start until it has seen every id of want
// (as redrive.id headers), or fails.
func consumeIDs(t *testing.T, brokers []string, topic string, want []string) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(missing(want, mapKeys(seen))) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			m := missing(want, mapKeys(seen))
			t.Fatalf("%d of %d records missing from %s, e.g. %v", len(m), len(want), topic, m[:min(5, len(m))])
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "redrive.id" {
					seen[string(h.Value)] = true
				}
			}
		})
	}
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTopicsRecreatedUnderLoadLoseNothing: under a steady stream of
// failures, the DLQ topic, the source topic and the archive topic are each
// deleted and created again. Nothing is lost or stuck: every failure
// acknowledged by the DLQ topic (outside the moment it did not exist) is
// stored, every record due is redelivered — those after the source topic's
// recreation to the new topic — and every dead letter has its copy on the new
// archive topic, the copies lost with the old one made again.
func TestTopicsRecreatedUnderLoadLoseNothing(t *testing.T) {
	t.Parallel()
	const archiveTopic = dlqTopic + ".archive"
	brokers := kafkatest.New(t, dlqTopic, "orders", archiveTopic, dlqTopic+".events")
	dbURL := pgtest.URL(t)
	pool := pgtest.Pool(t, dbURL)
	policies := t.TempDir()
	if err := os.WriteFile(filepath.Join(policies, "p.yaml"),
		[]byte("topics:\n  orders: {retry: {initial_interval: PT0.2S, jitter: false}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// How soon a client sees a topic's new id when a produce fails (franz-go's
	// default is 5s); ingest asks for its topics' ids every 5s on its own.
	a, _ := apptest.Start(t, brokers, dbURL, app.Options{ExtraKafkaOpts: []kgo.Opt{kgo.MetadataMinAge(200 * time.Millisecond)}},
		"REDRIVE_POLICIES_DIR", policies, "REDRIVE_RETRY_MIN_INTERVAL", "100ms")
	base := "http://" + a.Addr()

	load := startDLQLoad(t, brokers)
	storedKeys := func() []string { return query(t, pool, "SELECT convert_from(key, 'UTF8') FROM redrive_record") }
	begin := time.Now()
	time.Sleep(500 * time.Millisecond)

	// The DLQ topic. What it acknowledged before is stored first, so that
	// nothing it held is lost with it.
	beforeDLQ := time.Now()
	waitNoneMissing(t, "records acknowledged before the DLQ topic was recreated", load.AckedIn([2]time.Time{begin, beforeDLQ}), storedKeys)
	kafkatest.Recreate(t, brokers, dlqTopic, 3)
	afterDLQ := time.Now()
	time.Sleep(time.Second)
	// Ingest takes the new topic up within seconds; the next topics are
	// recreated while failures flow through again.
	waitNoneMissing(t, "records acknowledged by the new DLQ topic", load.AckedIn([2]time.Time{afterDLQ, time.Now()}), storedKeys)

	// The source topic: the redeliveries go on, to the new topic.
	kafkatest.Recreate(t, brokers, "orders", 3)
	afterOrders := time.Now()
	time.Sleep(time.Second)

	// The archive topic: the copies made to it are gone.
	kafkatest.Recreate(t, brokers, archiveTopic, 3)
	time.Sleep(time.Second)
	load.Stop()
	end := time.Now()

	acked := load.AckedIn([2]time.Time{begin, beforeDLQ}, [2]time.Time{afterDLQ, end})
	waitNoneMissing(t, "acknowledged failures stored", acked, storedKeys)
	if len(acked) < 200 {
		t.Fatalf("only %d failures under load", len(acked))
	}

	// Nothing stuck: every record to retry was redelivered.
	eventually.True(t, "every due record redelivered", func() bool {
		return len(query(t, pool, "SELECT id::text FROM redrive_record WHERE state = 'retryable'")) == 0
	})
	// Completed by their redelivery (completion: redelivered).
	redelivered := query(t, pool, "SELECT id::text FROM redrive_record WHERE state = 'completed' AND completed_by = 'redelivered' AND redelivered_at > $1", afterOrders)
	if len(redelivered) < 50 {
		t.Fatalf("only %d records redelivered after the source topic was recreated", len(redelivered))
	}
	consumeIDs(t, brokers, "orders", redelivered)

	// Every dead letter's copy is on the new archive topic.
	eventually.True(t, "every archive copy made", func() bool {
		return len(query(t, pool, "SELECT id::text FROM redrive_record WHERE state = 'discarded' AND archive_state IS DISTINCT FROM 'done'")) == 0
	})
	dead := query(t, pool, "SELECT id::text FROM redrive_record WHERE state = 'discarded'")
	if len(dead) < 100 {
		t.Fatalf("only %d dead letters", len(dead))
	}
	consumeIDs(t, brokers, archiveTopic, dead)

	eventually.True(t, "/readyz ok", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// An events topic deleted and created again gets the next lifecycle events:
// the events producer takes the new topic up at its first failed event.
func TestRecreatedEventsTopicGetsTheNextEvents(t *testing.T) {
	b := setup(t)
	const eventsTopic = dlqTopic + ".events"
	cl := kafkatest.Client(t, b.brokers)
	kafkatest.Produce(t, cl, failure(time.Now(), "orders", "t", "db.down", dlq.CodeDeadLetter, "before"))
	kafkatest.Consume(t, b.brokers, eventsTopic, 1, 10*time.Second) // the producer knows the topic

	kafkatest.Recreate(t, b.brokers, eventsTopic, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // failures keep coming: their events are what the new topic must get
		for i := 0; ctx.Err() == nil; i++ {
			_ = cl.ProduceSync(ctx, failure(time.Now(), "orders", "t", "db.down", dlq.CodeDeadLetter, fmt.Sprintf("after-%d", i)))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for _, r := range kafkatest.Consume(t, b.brokers, eventsTopic, 1, 20*time.Second) {
		if !strings.Contains(string(r.Value), "dead_letter.added") {
			t.Fatalf("first event on the new topic: %s", r.Value)
		}
	}
}

// A record whose queue is the DLQ topic itself, written straight to the
// database (as a record stored by an older Redrive would be), is not
// redelivered: the API shows it as a dead letter with a not_routable
// redelivery_failure naming the topic, and nothing due.
func TestNotRoutableRecordSaysWhyInTheAPI(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, dlqTopic+".archive", dlqTopic+".events")
	dbURL := pgtest.URL(t)
	pool := pgtest.Pool(t, dbURL)
	b := start(t, brokers, nil, "REDRIVE_DATABASE_URL", dbURL)
	past := time.Now().Add(-time.Second).UTC()
	id := "01a21500-0000-7000-8000-000000000001"
	if _, err := store.New(pool).InsertRecords(context.Background(), []dlq.Record{{
		ID: id, Queue: dlqTopic, State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 5, Format: dlq.FormatRedrive,
		Source: dlq.Source{Topic: dlqTopic}, DLQ: dlq.Coord{Topic: dlqTopic, Offset: 7}, Value: []byte(`{}`),
		Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "x", Code: dlq.CodeRetry, OccurredAt: past}},
		CreatedAt: past, UpdatedAt: past, NextRetryAt: &past,
	}}); err != nil {
		t.Fatal(err)
	}
	b.app.Scheduler().Wake()
	var rec struct {
		State             string  `json:"state"`
		Exhaustion        *string `json:"exhaustion"`
		Attempt           int     `json:"attempt"`
		NextRetryAt       *string `json:"next_retry_at"`
		RedeliveryFailure *struct {
			Reason        string  `json:"reason"`
			Message       string  `json:"message"`
			NextAttemptAt *string `json:"next_attempt_at"`
		} `json:"redelivery_failure"`
	}
	eventually.True(t, "the record refused", func() bool {
		return b.get(t, "/ojs/v1/dead-letter/"+id, &rec) == http.StatusOK && rec.State == "discarded"
	})
	f := rec.RedeliveryFailure
	if rec.Exhaustion == nil || *rec.Exhaustion != "dead_letter" || rec.Attempt != 1 || rec.NextRetryAt != nil ||
		f == nil || f.Reason != "not_routable" || f.NextAttemptAt != nil ||
		!strings.Contains(f.Message, `"`+dlqTopic+`"`) || !strings.Contains(f.Message, "Redrive's own topics") {
		t.Fatalf("record = %+v, failure %+v; want a dead letter saying not_routable, naming the topic", rec, f)
	}
}
