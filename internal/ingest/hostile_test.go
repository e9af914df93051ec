package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/store"
)

// hostileKind names what a hostile DLQ record carries, for the checks.
type hostileKind int

const (
	kindGood hostileKind = iota
	kindLongKey
	kindDeepValue
	kindJSONBRefuses
	kindNotRoutable
	kindForgedRetry
	kindOther
)

// dlqRecord is a native envelope of a failure of a record of topic source,
// with extra headers appended (they win over the envelope's own: the last
// value of a header is the one decoded).
func dlqRecord(source string, key, value []byte, extra ...kgo.RecordHeader) *kgo.Record {
	r := envelope.Encode(&kgo.Record{Topic: source, Key: key, Value: value},
		envelope.FailureInfo{DLQTopic: dlqTopic, Type: "order.created", ErrorType: "db.down", Message: "boom"})
	r.Headers = append(r.Headers, extra...)
	return r
}

func header(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

func nestedJSON(depth int, object bool) string {
	open, close := "[", "]"
	if object {
		open, close = `{"a":`, "}"
	}
	return strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

func randomLetters(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// forgedRetry is the redrive.retry header of issue 17 that looped a record.
const forgedRetry = `{"max_attempts":2000000000,"initial_interval":"PT0.001S","max_interval":"PT0.001S","jitter":false}`

// hostileRecords are the DLQ records of issue 17 that halted ingest or
// looped, and their relatives, by kind.
func hostileRecords() ([]*kgo.Record, []hostileKind) {
	var recs []*kgo.Record
	var kinds []hostileKind
	add := func(k hostileKind, r *kgo.Record) { recs, kinds = append(recs, r), append(kinds, k) }
	v := []byte(`{"id":1}`)
	add(kindLongKey, dlqRecord("orders", []byte(randomLetters(3000)), v))
	add(kindLongKey, dlqRecord("orders", randomBytes(500_000), v))
	add(kindDeepValue, dlqRecord("orders", []byte("k"), []byte(nestedJSON(20000, false))))
	add(kindDeepValue, dlqRecord("orders", []byte("k"), []byte(nestedJSON(5000, true))))
	add(kindJSONBRefuses, dlqRecord("orders", []byte("k"), []byte(`{"n":1e999999}`)))
	add(kindJSONBRefuses, dlqRecord("orders", []byte("k"), []byte(`{"s":"\ud800"}`)))
	add(kindJSONBRefuses, dlqRecord("orders", []byte("k"), []byte(`{"s":"\u0000"}`)))
	add(kindOther, dlqRecord("orders", []byte("k"), v, header(envelope.HeaderType, randomLetters(100_000)),
		header(envelope.HeaderErrorType, randomLetters(100_000)), header(envelope.HeaderSourceGroup, randomLetters(100_000))))
	add(kindOther, dlqRecord("orders", []byte("k"), v, header(envelope.HeaderErrorDetails, `{"d":`+nestedJSON(30000, false)+`}`)))
	add(kindOther, dlqRecord("orders", []byte("k"), v, header(envelope.HeaderErrorDetails, `{"why":"\ud800","n":1e999999}`)))
	many := dlqRecord("orders", []byte("k"), v)
	for i := range 10000 {
		many.Headers = append(many.Headers, kgo.RecordHeader{Key: fmt.Sprint("\xff", i), Value: []byte{0, byte(i)}})
	}
	add(kindOther, many)
	// Redrive's own topics and Kafka's: never a redelivery target.
	add(kindNotRoutable, dlqRecord(dlqTopic+".events", []byte("k"), v))
	add(kindNotRoutable, dlqRecord(dlqTopic, []byte("k"), v, header(envelope.HeaderRetry, forgedRetry)))
	add(kindNotRoutable, dlqRecord("__consumer_offsets", []byte("k"), v))
	for range 20 {
		add(kindForgedRetry, dlqRecord("orders", []byte("k"), v, header(envelope.HeaderRetry, forgedRetry)))
	}
	return recs, kinds
}

// mixed interleaves good records with the hostile ones, so that every batch
// holds both.
func mixed() ([]*kgo.Record, []hostileKind) {
	hostile, kinds := hostileRecords()
	var recs []*kgo.Record
	var out []hostileKind
	for i, h := range hostile {
		for j := range 3 {
			recs = append(recs, dlqRecord("orders", fmt.Appendf(nil, "good-%d-%d", i, j), []byte(`{"ok":true}`)))
			out = append(out, kindGood)
		}
		recs = append(recs, h)
		out = append(out, kinds[i])
	}
	return recs, out
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// watchReady samples an ingester's readiness and paused gauge until stop,
// and says whether it was ever paused.
func watchReady(in *ingest.Ingester, paused prometheus.Gauge) (stop func() bool) {
	var was atomic.Bool
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if in.Ready() != nil || gaugeValue(paused) != 0 {
				was.Store(true)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() bool {
		close(done)
		wg.Wait()
		return was.Load()
	}
}

// Hostile records mixed into the same batches as good ones are all stored,
// and ingest never pauses: not while it stores them, not after a restart,
// not when another group consumes them all again as duplicates. A forged
// record from Redrive's own topics is a dead letter, never retryable; a
// forged retry header is clamped, and says so once in the log.
func TestHostileRecordsNeverPauseIngest(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var logs logtest.Buffer
	logger := logs.TextLogger(slog.LevelInfo)
	cfg := func(c *ingest.Config) {
		c.Reserved = dlq.NewReservedTopics(dlqTopic, dlqTopic+".archive", dlqTopic+".events")
		c.Logger = logger
	}
	// One partition, so that DLQ offsets are the order produced.
	cl := kafkatest.Client(t, b.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	round1, kinds := mixed()
	kafkatest.Produce(t, cl, round1...)

	first := startWith(t, b, b.store, "g", cfg)
	stopWatch := watchReady(first.in, first.metrics.IngestPaused)
	waitForCount(t, b.store, int64(len(round1)))
	first.stop()
	if stopWatch() {
		t.Error("ingest paused while storing the hostile records")
	}

	// Restarted, with more of the same.
	round2, _ := mixed()
	kafkatest.Produce(t, cl, round2...)
	second := startWith(t, b, b.store, "g", cfg)
	stopWatch = watchReady(second.in, second.metrics.IngestPaused)
	waitForCount(t, b.store, int64(len(round1)+len(round2)))
	second.stop()
	if stopWatch() {
		t.Error("ingest paused after a restart")
	}

	// Everything consumed again: duplicates, hostile ones included.
	third := startWith(t, b, b.store, "other", cfg)
	stopWatch = watchReady(third.in, third.metrics.IngestPaused)
	dups := third.metrics.IngestDuplicates.WithLabelValues(dlqTopic)
	eventually.True(t, "every record re-consumed as a duplicate", func() bool { return counterValue(dups) == float64(len(round1)+len(round2)) })
	third.stop()
	if stopWatch() {
		t.Error("ingest paused re-consuming the hostile records")
	}
	waitForCount(t, b.store, int64(len(round1)+len(round2)))
	for _, s := range []*started{first, second, third} {
		if n := counterValue(s.metrics.IngestWriteErrors); n != 0 {
			t.Errorf("%v failed batch writes", n)
		}
	}

	// What the first round stored, by DLQ offset.
	byOffset := map[int64]dlq.Record{}
	page, err := b.store.List(ctx, &store.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Records {
		byOffset[r.DLQ.Offset] = r
	}
	if len(byOffset) != len(round1)+len(round2) {
		t.Fatalf("%d records listed", len(byOffset))
	}
	for i, want := range round1 {
		got, ok := byOffset[int64(i)]
		if !ok {
			t.Fatalf("no record at offset %d", i)
		}
		full, err := b.store.Get(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(full.Key, want.Key) || !bytes.Equal(full.Value, want.Value) {
			t.Errorf("offset %d (%v): key or value not kept byte for byte", i, kinds[i])
		}
		switch kinds[i] {
		case kindGood, kindLongKey:
			if full.State != dlq.StateRetryable || full.PayloadOmitted != "" {
				t.Errorf("offset %d (%v): state %s, payload omitted %q", i, kinds[i], full.State, full.PayloadOmitted)
			}
		case kindDeepValue, kindJSONBRefuses:
			if full.State != dlq.StateRetryable || full.PayloadOmitted == "" {
				t.Errorf("offset %d (%v): state %s, payload omitted %q; want retryable and a reason", i, kinds[i], full.State, full.PayloadOmitted)
			}
		case kindNotRoutable:
			last := full.LastError()
			if full.State != dlq.StateDiscarded || full.Exhaustion != dlq.ExhaustionDeadLetter || len(full.Errors) != 2 ||
				full.Errors[0].Type != "db.down" || last.Type != dlq.ErrorTypeNotRoutable ||
				!strings.Contains(last.Message, "nowhere to redeliver it to") || full.NextRetryAt != nil {
				t.Errorf("offset %d: source %s: state %s/%s, errors %+v; want a dead letter that says it is not routable",
					i, full.Queue, full.State, full.Exhaustion, full.Errors)
			}
		case kindForgedRetry:
			var retry struct {
				MaxAttempts     int    `json:"max_attempts"`
				InitialInterval string `json:"initial_interval"`
				MaxInterval     string `json:"max_interval"`
			}
			if err := json.Unmarshal(full.Retry, &retry); err != nil {
				t.Fatal(err)
			}
			if full.MaxAttempts != 100 || retry.MaxAttempts != 100 || retry.InitialInterval != "PT1S" || retry.MaxInterval != "PT1S" ||
				full.NextRetryAt.Sub(full.Errors[0].OccurredAt) < time.Second {
				t.Errorf("offset %d: forged retry header stored as max_attempts %d, retry %s, next retry %v after the failure",
					i, full.MaxAttempts, full.Retry, full.NextRetryAt.Sub(full.Errors[0].OccurredAt))
			}
		}
	}
	// A flood of forged headers is one warning per ingester run, not one per record.
	if n := logs.Count("redrive.retry header past REDRIVE_RETRY_* limits; clamped"); n < 1 || n > 3 {
		t.Errorf("the clamped header was logged %d times for %d forged records", n, 3*20)
	}
}
