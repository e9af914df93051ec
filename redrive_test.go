package redrive

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
)

const (
	testTopic = "orders"
	testGroup = "billing"
	testID    = "0194d1a2-7b3c-7def-8a12-3456789abcde"
)

var testNow = time.Date(2026, 2, 13, 10, 5, 0, 0, time.UTC)

type bundle struct {
	cluster *kfake.Cluster
	brokers []string
	cl      *kgo.Client // produces source records and dead letters
	adm     *kadm.Client
}

// setup starts a one-broker cluster with the source and DLQ topics, one
// partition each, and a client on it.
func setup(t *testing.T) *bundle {
	t.Helper()
	return setupTopic(t, 1)
}

func (b *bundle) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(b.brokers...),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.RecordDeliveryTimeout(5 * time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (b *bundle) deadLetterer(t *testing.T, opts ...Opt) *DeadLetterer {
	t.Helper()
	d, err := New(b.cl, append([]Opt{Group(testGroup)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	d.cfg.now = func() time.Time { return testNow }
	return d
}

// readDLQ reads n records from the DLQ topic.
func (b *bundle) readDLQ(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	cl := b.client(t, kgo.ConsumeTopics(DefaultDLQTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d DLQ records", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// dlqSize is how many records the DLQ topic holds.
func (b *bundle) dlqSize(t *testing.T) int64 {
	t.Helper()
	offs, err := b.adm.ListEndOffsets(context.Background(), DefaultDLQTopic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// consumed is a source record as a consumer sees it.
func consumed(key, value string, hs ...kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{
		Topic: testTopic, Partition: 0, Offset: 1042,
		Timestamp: time.Date(2026, 2, 13, 10, 0, 0, 123e6, time.UTC),
		Key:       []byte(key), Value: []byte(value), Headers: hs,
	}
}

func headerMap(hs []kgo.RecordHeader) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

func TestWrapDeadLettersFailedRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t, RecordType(func(*kgo.Record) string { return "order.created" }))
	ctx := context.Background()

	src := consumed("order-17", "\x00\x01avro\xff", kgo.RecordHeader{Key: "traceparent", Value: []byte("00-abc-01")})
	handle := d.Wrap(func(context.Context, *kgo.Record) error {
		return &Error{
			Type: "payment.card_stolen", Code: CodeDeadLetter,
			Details: map[string]any{"last4": "4242"},
			Err:     errors.New("card reported stolen"),
		}
	})
	if err := handle(ctx, src); err != nil {
		t.Fatalf("handler returned %v after a successful dead-letter", err)
	}

	got := b.readDLQ(t, 1)[0]
	if string(got.Key) != "order-17" || string(got.Value) != "\x00\x01avro\xff" {
		t.Errorf("key/value = %q/%q, want the source's byte for byte", got.Key, got.Value)
	}
	h := headerMap(got.Headers)
	want := map[string]string{
		"traceparent":                  "00-abc-01",
		envelope.HeaderSourceTopic:     testTopic,
		envelope.HeaderSourcePartition: "0",
		envelope.HeaderSourceOffset:    "1042",
		envelope.HeaderSourceTimestamp: "2026-02-13T10:00:00.123Z",
		envelope.HeaderSourceGroup:     testGroup,
		envelope.HeaderErrorType:       "payment.card_stolen",
		envelope.HeaderErrorMessage:    "card reported stolen",
		envelope.HeaderErrorCode:       "DEAD_LETTER",
		envelope.HeaderErrorDetails:    `{"last4":"4242"}`,
		envelope.HeaderFailedAt:        "2026-02-13T10:05:00.000Z",
		envelope.HeaderType:            "order.created",
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if len(got.Headers) != len(want) {
		t.Errorf("got %d headers, want %d: %v", len(got.Headers), len(want), h)
	}

	// A failure decodes back to the same context.
	f := envelope.Decode(got)
	if f.Format != dlq.FormatRedrive || f.Source.Topic != testTopic || f.Error.Code != dlq.CodeDeadLetter {
		t.Errorf("decoded %+v", f)
	}
}

func TestWrapCapturesBacktraceOfFailureSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t)
	failHere := func(context.Context, *kgo.Record) error {
		return Retry("db.connection_refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	}
	if err := d.Wrap(failHere)(context.Background(), consumed("k", "v")); err != nil {
		t.Fatal(err)
	}
	h := headerMap(b.readDLQ(t, 1)[0].Headers)
	bt := h[envelope.HeaderErrorBacktrace]
	if !strings.Contains(bt, "TestWrapCapturesBacktraceOfFailureSite") || len(bt) > envelope.MaxBacktraceBytes {
		t.Errorf("backtrace (%d bytes) should name the failure site:\n%s", len(bt), bt)
	}
	if h[envelope.HeaderErrorCode] != "RETRY" || h[envelope.HeaderErrorMessage] != "dial tcp: connection refused" {
		t.Errorf("code %q message %q", h[envelope.HeaderErrorCode], h[envelope.HeaderErrorMessage])
	}
}

func TestWrapSuccessProducesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t)
	calls := 0
	err := d.Wrap(func(context.Context, *kgo.Record) error { calls++; return nil })(context.Background(), consumed("k", "v"))
	if err != nil || calls != 1 {
		t.Fatalf("err %v, %d calls", err, calls)
	}
	if n := b.dlqSize(t); n != 0 {
		t.Fatalf("DLQ holds %d records after a success", n)
	}
}

func TestWrapInlineRetries(t *testing.T) { //nolint:tparallel // the subtests share one DLQ topic and count its records in turn
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t, InlineRetries(3, time.Millisecond))
	ctx := context.Background()

	t.Run("succeeds on second try", func(t *testing.T) {
		calls := 0
		err := d.Wrap(func(context.Context, *kgo.Record) error {
			calls++
			if calls == 1 {
				return errors.New("transient")
			}
			return nil
		})(ctx, consumed("k", "v"))
		if err != nil || calls != 2 {
			t.Fatalf("err %v, %d calls, want nil after 2", err, calls)
		}
		if n := b.dlqSize(t); n != 0 {
			t.Fatalf("DLQ holds %d records", n)
		}
	})
	t.Run("non-retryable code is not retried", func(t *testing.T) {
		calls := 0
		err := d.Wrap(func(context.Context, *kgo.Record) error {
			calls++
			return Discard("payment.card_declined", errors.New("declined"))
		})(ctx, consumed("k", "v"))
		if err != nil || calls != 1 {
			t.Fatalf("err %v, %d calls, want 1", err, calls)
		}
	})
	t.Run("exhausted inline retries dead-letter", func(t *testing.T) {
		calls := 0
		err := d.Wrap(func(context.Context, *kgo.Record) error {
			calls++
			return errors.New("still failing")
		})(ctx, consumed("k", "v"))
		if err != nil || calls != 4 {
			t.Fatalf("err %v, %d calls, want 4", err, calls)
		}
	})
	recs := b.readDLQ(t, 2)
	if c := headerMap(recs[0].Headers)[envelope.HeaderErrorCode]; c != "DISCARD" {
		t.Errorf("first dead letter code %q, want DISCARD (a discard is still recorded)", c)
	}
	if ty := headerMap(recs[1].Headers)[envelope.HeaderErrorType]; ty != ErrorTypeGeneric {
		t.Errorf("second dead letter type %q, want %q", ty, ErrorTypeGeneric)
	}
}

func TestWrapRecoversPanic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t)
	err := d.Wrap(func(context.Context, *kgo.Record) error {
		var m map[string]int
		//lint:ignore SA5000 the nil map write is the panic under test
		m["boom"]++ //nolint:govet,staticcheck // the nil map write is the panic under test
		return nil
	})(context.Background(), consumed("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	h := headerMap(b.readDLQ(t, 1)[0].Headers)
	if h[envelope.HeaderErrorType] != ErrorTypePanic || !strings.HasPrefix(h[envelope.HeaderErrorMessage], "panic: assignment to entry in nil map") {
		t.Errorf("type %q message %q", h[envelope.HeaderErrorType], h[envelope.HeaderErrorMessage])
	}
	if !strings.Contains(h[envelope.HeaderErrorBacktrace], "TestWrapRecoversPanic") {
		t.Errorf("backtrace should show the panic site:\n%s", h[envelope.HeaderErrorBacktrace])
	}
}

func TestWrapRedeliveredRecordKeepsIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t)
	// A record Redrive redelivered: it carries the redelivery headers and,
	// from its first trip, stale envelope headers.
	src := consumed("k", "v",
		kgo.RecordHeader{Key: "traceparent", Value: []byte("00-x")},
		kgo.RecordHeader{Key: envelope.HeaderID, Value: []byte(testID)},
		kgo.RecordHeader{Key: envelope.HeaderAttempt, Value: []byte("3")},
		kgo.RecordHeader{Key: envelope.HeaderRedeliveredAt, Value: []byte("2026-02-13T10:00:00.000Z")},
		kgo.RecordHeader{Key: envelope.HeaderErrorType, Value: []byte("stale.type")},
	)
	if err := d.Wrap(func(context.Context, *kgo.Record) error {
		return Fail("validation.bad_sku", errors.New("unknown sku"))
	})(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	got := b.readDLQ(t, 1)[0]
	counts := map[string]int{}
	for _, h := range got.Headers {
		counts[h.Key]++
	}
	if counts[envelope.HeaderID] != 1 || counts[envelope.HeaderAttempt] != 1 || counts[envelope.HeaderErrorType] != 1 {
		t.Errorf("header counts %v: id, attempt and type must appear once", counts)
	}
	f := envelope.Decode(got)
	if f.RecordID != testID || f.Attempt != 3 || f.Error.Attempt != 3 || f.Error.Type != "validation.bad_sku" || f.Error.Code != dlq.CodeFail {
		t.Errorf("decoded id %q attempt %d/%d type %q code %q", f.RecordID, f.Attempt, f.Error.Attempt, f.Error.Type, f.Error.Code)
	}
	if len(f.Headers) != 1 || f.Headers[0].Key != "traceparent" {
		t.Errorf("original headers %v, want only traceparent", f.Headers)
	}
}

// failDLQProduce makes every produce to the DLQ topic fail with a
// non-retryable error until the returned function is called.
func failDLQProduce(b *bundle) (restore func()) {
	h := b.cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: DefaultDLQTopic,
		Err:   kerr.TopicAuthorizationFailed,
		Count: -1,
	})
	return h.Remove
}

func TestPublishFailureIsNotDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t)
	restore := failDLQProduce(b)
	defer restore()

	handlerErr := errors.New("handler broke")
	err := d.Wrap(func(context.Context, *kgo.Record) error { return handlerErr })(context.Background(), consumed("k", "v"))
	var pe *PublishError
	if !errors.As(err, &pe) || !errors.Is(err, handlerErr) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("err = %v, want a *PublishError wrapping both errors", err)
	}
	if pe.Topic != testTopic || pe.Partition != 0 || pe.Offset != 1042 {
		t.Errorf("PublishError locates %s/%d/%d", pe.Topic, pe.Partition, pe.Offset)
	}
}

// TestConsumerLoopDoesNotCommitWhenDLQFails runs the documented loop: commit
// only records whose wrapped handler returned nil, stop on an error.
func TestConsumerLoopDoesNotCommitWhenDLQFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{"ok-0", "bad-1", "ok-2"} {
		if err := b.cl.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	handler := func(_ context.Context, r *kgo.Record) error {
		if strings.HasPrefix(string(r.Value), "bad") {
			return errors.New("cannot handle " + string(r.Value))
		}
		return nil
	}
	// consume runs the loop with a fresh group member until it stops on an
	// error or has seen want records; it returns the values it handled.
	consume := func(want int) ([]string, error) {
		cl := b.client(t,
			kgo.ConsumerGroup(testGroup), kgo.ConsumeTopics(testTopic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		d, err := New(cl, DLQTopic(DefaultDLQTopic))
		if err != nil {
			t.Fatal(err)
		}
		handle := d.Wrap(handler)
		var seen []string
		for len(seen) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("timed out after %v", seen)
			}
			for _, r := range fs.Records() {
				if err := handle(ctx, r); err != nil {
					return seen, err // not done: do not commit, stop consuming
				}
				if err := cl.CommitRecords(ctx, r); err != nil {
					t.Fatal(err)
				}
				seen = append(seen, string(r.Value))
			}
		}
		return seen, nil
	}
	committed := func() int64 {
		offs, err := b.adm.FetchOffsets(ctx, testGroup)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup(testTopic, 0)
		if !ok {
			return -1
		}
		return o.At
	}

	restore := failDLQProduce(b)
	seen, err := consume(3)
	var pe *PublishError
	if !errors.As(err, &pe) || pe.Offset != 1 {
		t.Fatalf("loop ended with %v after %v, want a PublishError for offset 1", err, seen)
	}
	if at := committed(); at != 1 {
		t.Fatalf("committed offset %d, want 1: the failed record must not be committed", at)
	}
	if n := b.dlqSize(t); n != 0 {
		t.Fatalf("DLQ holds %d records", n)
	}

	// The DLQ comes back: a restarted consumer resumes at the record that
	// was not done, dead-letters it and moves on. Nothing was lost.
	restore()
	seen, err = consume(2)
	if err != nil || strings.Join(seen, ",") != "bad-1,ok-2" {
		t.Fatalf("after recovery handled %v (err %v), want bad-1,ok-2", seen, err)
	}
	if at := committed(); at != 3 {
		t.Fatalf("committed offset %d, want 3", at)
	}
	dead := b.readDLQ(t, 1)[0]
	if string(dead.Value) != "bad-1" || headerMap(dead.Headers)[envelope.HeaderSourceGroup] != testGroup {
		t.Fatalf("dead letter %q with headers %v", dead.Value, headerMap(dead.Headers))
	}
}

func TestProcessStopsAtFirstRecordNotDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.deadLetterer(t)
	restore := failDLQProduce(b)
	defer restore()

	recs := []*kgo.Record{consumed("a", "ok"), consumed("b", "bad"), consumed("c", "ok")}
	for i, r := range recs {
		r.Offset = int64(i)
	}
	fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{
		Topic:      testTopic,
		Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}},
	}}}}
	var calls atomic.Int32
	done, err := d.Process(context.Background(), fetches, func(_ context.Context, r *kgo.Record) error {
		calls.Add(1)
		if string(r.Value) == "bad" {
			return errors.New("bad")
		}
		return nil
	})
	var pe *PublishError
	if !errors.As(err, &pe) || pe.Offset != 1 {
		t.Fatalf("err = %v, want a PublishError for offset 1", err)
	}
	if len(done) != 1 || done[0] != recs[0] || calls.Load() != 2 {
		t.Fatalf("done %d records after %d calls, want 1 after 2", len(done), calls.Load())
	}

	restore()
	done, err = d.Process(context.Background(), fetches, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "bad" {
			return errors.New("bad")
		}
		return nil
	})
	if err != nil || len(done) != 3 {
		t.Fatalf("with the DLQ up: %d done, err %v", len(done), err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name    string
		client  *kgo.Client
		opts    []Opt
		wantErr string
	}{
		{"nil client", nil, nil, "nil client"},
		{"empty topic", b.cl, []Opt{DLQTopic("")}, "empty DLQ topic"},
		{"negative retries", b.cl, []Opt{InlineRetries(-1, 0)}, "negative count"},
		{"negative backoff", b.cl, []Opt{InlineRetries(1, -time.Second)}, "negative backoff"},
		{"transactional", b.client(t, kgo.TransactionalID("tx")), nil, "transactional"},
		{"ok", b.cl, []Opt{DLQTopic("dlq"), InlineRetries(2, time.Millisecond), Logger(nil)}, ""},
	}
	for _, tt := range tests {
		_, err := New(tt.client, tt.opts...)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}

	grouped := b.client(t, kgo.ConsumerGroup("from-client"), kgo.ConsumeTopics(testTopic))
	d, err := New(grouped)
	if err != nil || d.cfg.group != "from-client" || d.cfg.dlqTopic != DefaultDLQTopic {
		t.Fatalf("defaults: group %q topic %q err %v", d.cfg.group, d.cfg.dlqTopic, err)
	}
	d, _ = New(grouped, Group("override"))
	if d.cfg.group != "override" {
		t.Fatalf("Group option: %q", d.cfg.group)
	}
}
