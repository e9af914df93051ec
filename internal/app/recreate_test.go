package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
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
	"github.com/redrive/redrive/internal/testdate"
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
		return failure(testdate.Now(), "orders", "t", "db.down", code, key)
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

// waitNoneMissing waits until every element of want is in what list
// returns. When it fails, the error names the missing elements and, with
// explain, says more of them.
func waitNoneMissing(t *testing.T, what string, want []string, list func() []string, explain func(missing []string) string) {
	t.Helper()
	eventually.Nil(t, "every one of "+what, func() error {
		if m := missing(want, list()); len(m) > 0 {
			return &missingErr{missing: m, of: len(want), explain: explain}
		}
		return nil
	}, eventually.Within(60*time.Second))
}

// missingErr says which elements are missing. Its text is only made when
// the wait fails, so explain runs then, once.
type missingErr struct {
	missing []string
	of      int
	explain func([]string) string
}

func (e *missingErr) Error() string {
	msg := fmt.Sprintf("%d of %d missing, e.g. %v", len(e.missing), e.of, e.missing[:min(5, len(e.missing))])
	if e.explain != nil {
		msg += "\n" + e.explain(e.missing[:min(5, len(e.missing))])
	}
	return msg
}

// lossReport explains records of load missing from the database: when each
// was sent and acknowledged, and where; what topic holds now around that
// place, and what is stored of it; the ingest group's committed offsets; the
// ingest's warnings; and the times the test marked.
func lossReport(t *testing.T, brokers []string, pool *pgxpool.Pool, load *kafkatest.Load, topic string,
	logs *logtest.Buffer, marks func() string,
) func([]string) string {
	return func(keys []string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var b strings.Builder
		fmt.Fprintf(&b, "marks: %s\n", marks())
		near := map[int32][2]int64{} // partition → offsets to show
		for _, k := range keys {
			a, ok := load.Acked(k)
			if !ok {
				fmt.Fprintf(&b, "%s: never acknowledged\n", k)
				continue
			}
			fmt.Fprintf(&b, "%s: sent %s, acknowledged %s at %s/%d@%d\n", k, a.Sent.Format("15:04:05.000000"),
				a.At.Format("15:04:05.000000"), topic, a.Partition, a.Offset)
			near[a.Partition] = [2]int64{max(0, a.Offset-3), a.Offset + 3}
		}
		adm := kadm.NewClient(kafkatest.Client(t, brokers))
		starts, _ := adm.ListStartOffsets(ctx, topic)
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			fmt.Fprintf(&b, "list end offsets: %v\n", err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			s, _ := starts.Lookup(topic, o.Partition)
			fmt.Fprintf(&b, "topic %s partition %d now: offsets %d to %d\n", topic, o.Partition, s.Offset, o.Offset)
		})
		// What the topic holds now around each missing record's place.
		parts := map[string]map[int32]kgo.Offset{topic: {}}
		for p, r := range near {
			parts[topic][p] = kgo.NewOffset().At(r[0])
		}
		cl := kafkatest.Client(t, brokers, kgo.ConsumePartitions(parts))
		seen := map[int32]int64{}
		for len(parts[topic]) > 0 && ctx.Err() == nil {
			done := true
			for p, r := range near {
				e, _ := ends.Lookup(topic, p)
				if seen[p] < min(r[1]+1, e.Offset) {
					done = false
				}
			}
			if done {
				break
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				seen[r.Partition] = max(seen[r.Partition], r.Offset+1)
				if w := near[r.Partition]; r.Offset >= w[0] && r.Offset <= w[1] {
					fmt.Fprintf(&b, "  topic now %d@%d: key %s, timestamp %s\n", r.Partition, r.Offset, r.Key,
						r.Timestamp.Format("15:04:05.000000"))
				}
			})
			if pctx.Err() != nil && len(fs.Records()) == 0 {
				break
			}
		}
		for p, r := range near {
			rows, err := pool.Query(ctx, `SELECT dlq_offset, convert_from(key, 'UTF8'), dlq_timestamp, created_at FROM redrive_record
				WHERE dlq_topic = $1 AND dlq_partition = $2 AND dlq_offset BETWEEN $3 AND $4 ORDER BY dlq_offset, dlq_timestamp`,
				topic, p, r[0], r[1])
			if err != nil {
				fmt.Fprintf(&b, "query stored: %v\n", err)
				continue
			}
			for rows.Next() {
				var off int64
				var key string
				var ts, created time.Time
				_ = rows.Scan(&off, &key, &ts, &created)
				fmt.Fprintf(&b, "  stored %d@%d: key %s, timestamp %s, stored %s\n", p, off, key,
					ts.Local().Format("15:04:05.000000"), created.Local().Format("15:04:05.000000"))
			}
			rows.Close()
		}
		if committed, err := adm.FetchOffsets(ctx, "redrive"); err != nil {
			fmt.Fprintf(&b, "committed offsets: %v\n", err)
		} else {
			committed.Each(func(o kadm.OffsetResponse) {
				fmt.Fprintf(&b, "committed %s/%d: %d (err %v)\n", o.Topic, o.Partition, o.At, o.Err)
			})
		}
		for _, l := range logs.Lines(`"component":"ingest"`) {
			if !strings.Contains(l, `"level":"INFO"`) {
				fmt.Fprintln(&b, l)
			}
		}
		return b.String()
	}
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
// deleted and created again. Nothing is lost or stuck: every failure the
// DLQ topic acknowledged is stored — all the old topic acknowledged before
// its deletion was under way, and all the new topic acknowledged — every
// record due is redelivered — those after the source topic's recreation to
// the new topic — and every dead letter has its copy on the new archive
// topic, the copies lost with the old one made again.
//
// Not asserted: the failures the old DLQ topic acknowledged after
// beforeDLQ, up to its deletion. Ingest may not have fetched them before the
// operator deleted them with the topic, and then they exist nowhere for
// Redrive to store. Which topic acknowledged a failure is told by where it
// landed (kafkatest.Load.OnTopicNow), never by when its acknowledgement came
// back: on a loaded machine the old topic's last acknowledgement can come
// back after the new topic exists (a produce that reached the broker just
// before the deletion). Counting it the new topic's made this test fail
// now and then with "1 of N missing". The test waits for progress, never for
// a time, so a slow machine makes it slower, not flaky.
func TestTopicsRecreatedUnderLoadLoseNothing(t *testing.T) {
	t.Parallel()
	const archiveTopic = dlqTopic + ".archive"
	brokers := kafkatest.New(t, dlqTopic, "orders", archiveTopic, dlqTopic+".events")
	dbURL := pgtest.URL(t)
	pool := pgtest.Pool(t, dbURL)
	policies := policyDir(t, "topics:\n  orders: {retry: {initial_interval: PT0.2S, jitter: false}}\n")
	// How soon a client sees a topic's new id when a produce fails (franz-go's
	// default is 5s); ingest asks for its topics' ids every 5s on its own.
	logs := &logtest.Buffer{}
	a, _ := apptest.Start(t, brokers, dbURL, app.Options{Logger: logs.JSONLogger(slog.LevelInfo),
		ExtraKafkaOpts: []kgo.Opt{kgo.MetadataMinAge(200 * time.Millisecond)}},
		"REDRIVE_POLICIES_DIR", policies, "REDRIVE_RETRY_MIN_INTERVAL", "100ms")
	base := "http://" + a.Addr()

	load := startDLQLoad(t, brokers)
	storedKeys := func() []string { return query(t, pool, "SELECT convert_from(key, 'UTF8') FROM redrive_record") }
	var beforeDLQ, deleting, afterDLQ time.Time
	explain := lossReport(t, brokers, pool, load, dlqTopic, logs, func() string {
		f := func(at time.Time) string { return at.Format("15:04:05.000000") }
		return fmt.Sprintf("beforeDLQ %s, deleting %s, afterDLQ %s", f(beforeDLQ), f(deleting), f(afterDLQ))
	})
	waitAcked := func(what string, n int, since time.Time) {
		t.Helper()
		eventually.True(t, fmt.Sprintf("%d failures acknowledged %s", n, what), func() bool {
			return len(load.AckedIn([2]time.Time{since, testdate.Now()})) >= n
		}, eventually.Within(60*time.Second))
	}

	// The DLQ topic. What it acknowledged before is stored first, so that
	// nothing it held is lost with it. (Its acknowledgements after
	// beforeDLQ are the ones it may take with it.)
	waitAcked("before the DLQ topic is recreated", 60, time.Time{})
	beforeDLQ = testdate.Now()
	old := load.AckedIn([2]time.Time{{}, beforeDLQ})
	waitNoneMissing(t, "records acknowledged before the DLQ topic was recreated", old, storedKeys, explain)
	deleting = testdate.Now()
	kafkatest.Recreate(t, brokers, dlqTopic, 3)
	afterDLQ = testdate.Now()
	// Ingest takes the new topic up within seconds; the next topics are
	// recreated while failures flow through again.
	waitAcked("after the DLQ topic was recreated", 60, afterDLQ)
	waitNoneMissing(t, "records acknowledged by the new DLQ topic", load.OnTopicNow(t, brokers), storedKeys, explain)

	// The source topic: the redeliveries go on, to the new topic.
	kafkatest.Recreate(t, brokers, "orders", 3)
	afterOrders := testdate.Now()
	redeliveredSince := func(since time.Time) []string {
		return query(t, pool, "SELECT id::text FROM redrive_record WHERE state = 'completed' AND completed_by = 'redelivered' AND redelivered_at > $1", since)
	}
	eventually.True(t, "50 records redelivered after the source topic was recreated", func() bool {
		return len(redeliveredSince(afterOrders)) >= 50
	}, eventually.Within(60*time.Second))

	// The archive topic: the copies made to it are gone.
	kafkatest.Recreate(t, brokers, archiveTopic, 3)
	waitAcked("after the archive topic was recreated", 30, testdate.Now())
	// At least 200 failures to assert, 100 of them dead letters (odd keys):
	// those acknowledged after afterDLQ are the new topic's, but for the one
	// produce (the load has one at a time) the old topic may have
	// acknowledged as it was deleted.
	eventually.True(t, "201 failures, 101 dead letters, acknowledged outside the DLQ topic's recreation", func() bool {
		keys := slices.Concat(old, load.AckedIn([2]time.Time{afterDLQ, testdate.Now()}))
		dead := 0
		for _, k := range keys {
			var i int
			if _, err := fmt.Sscanf(k, "load-%d", &i); err == nil && i%2 == 1 {
				dead++
			}
		}
		return len(keys) >= 201 && dead >= 101
	}, eventually.Within(60*time.Second))
	load.Stop()

	onNew := load.OnTopicNow(t, brokers)
	if late := missing(load.AckedIn([2]time.Time{deleting, testdate.Now()}), onNew); len(late) > 0 {
		t.Logf("acknowledged by the old DLQ topic as it was deleted, not asserted: %v (returned after the new topic existed: %v)",
			late, missing(late, load.AckedIn([2]time.Time{{}, afterDLQ})))
	}
	acked := slices.Concat(old, onNew)
	waitNoneMissing(t, "acknowledged failures stored", acked, storedKeys, explain)
	if len(acked) < 200 {
		t.Fatalf("only %d failures under load", len(acked))
	}

	// Nothing stuck: every record to retry was redelivered.
	eventually.True(t, "every due record redelivered", func() bool {
		return len(query(t, pool, "SELECT id::text FROM redrive_record WHERE state = 'retryable'")) == 0
	})
	// Completed by their redelivery (completion: redelivered).
	redelivered := redeliveredSince(afterOrders)
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
	kafkatest.Produce(t, cl, failure(testdate.Now(), "orders", "t", "db.down", dlq.CodeDeadLetter, "before"))
	kafkatest.Consume(t, b.brokers, eventsTopic, 1, 10*time.Second) // the producer knows the topic

	kafkatest.Recreate(t, b.brokers, eventsTopic, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // failures keep coming: their events are what the new topic must get
		for i := 0; ctx.Err() == nil; i++ {
			_ = cl.ProduceSync(ctx, failure(testdate.Now(), "orders", "t", "db.down", dlq.CodeDeadLetter, fmt.Sprintf("after-%d", i)))
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
	past := testdate.Now().Add(-time.Second).UTC()
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
