package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
)

// TestOneTraceAcrossARecordsLife: a record produced in a trace fails in its
// consumer (kotel's consumer span), is dead-lettered, ingested, redelivered
// by its policy, fails again, is dead-lettered again, and is retried by an
// operator with an edited value, which its consumer handles. Every span the
// client library and Redrive recorded on the way reaches the original
// consumer span through its links (and parents), every redelivered record
// carries exactly one traceparent — its redelivery span's — and the record
// shows the trace's id.
func TestOneTraceAcrossARecordsLife(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	kot := func() kgo.Opt {
		return kgo.WithHooks(kotel.NewKotel(kotel.WithTracer(kotel.NewTracer(kotel.TracerProvider(tp),
			kotel.TracerPropagator(propagation.TraceContext{})))).Hooks()...)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"),
		[]byte("_default:\n  retry: {max_attempts: 2, initial_interval: PT1S, jitter: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	brokers := kafkatest.New(t, dlqTopic, "orders", dlqTopic+".archive", dlqTopic+".events")
	a, _ := apptest.Start(t, brokers, pgtest.URL(t), app.Options{TracerProvider: tp}, "REDRIVE_POLICIES_DIR", dir)
	b := &bundle{brokers: brokers, base: "http://" + a.Addr(), app: a}

	var mu sync.Mutex
	var seen [][]kgo.RecordHeader // the headers of each delivery the handler got
	consumeGroup(t, brokers, "billing", func(_ context.Context, r *kgo.Record) error {
		mu.Lock()
		seen = append(seen, append([]kgo.RecordHeader(nil), r.Headers...))
		mu.Unlock()
		if string(r.Value) != `{"fixed":true}` {
			return redrive.Retry("ledger.rejected", errors.New("ledger rejected the order"))
		}
		return nil
	}, []redrive.Opt{redrive.TracerProvider(tp)}, kot())
	deliveries := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	kafkatest.Produce(t, kafkatest.Client(t, brokers, kot()), &kgo.Record{Topic: "orders", Key: []byte("order-9"), Value: []byte(`{"id":9}`)})

	// The failure, then its redelivery by the policy, which fails too and
	// exhausts the record's two attempts.
	var id string
	eventually.Nil(t, "the record to be discarded after its redelivery failed", func() error {
		var l list
		b.get(t, "/ojs/v1/dead-letter?queue=orders", &l)
		if len(l.Items) != 1 || l.Items[0].State != "discarded" || deliveries() != 2 {
			return fmt.Errorf("%d records %+v, %d deliveries", len(l.Items), l.Items, deliveries())
		}
		id = l.Items[0].ID
		return nil
	})
	resp, err := http.Post(b.base+"/ojs/v1/dead-letter/"+id+"/retry", "application/json",
		bytes.NewReader([]byte(`{"override":{"value":"{\"fixed\":true}"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retry: %d", resp.StatusCode)
	}
	eventually.True(t, "the edited redelivery to be handled", func() bool { return deliveries() == 3 })

	var rec struct {
		State   string  `json:"state"`
		TraceID *string `json:"trace_id"`
	}
	eventually.True(t, "the record to be completed", func() bool {
		b.get(t, "/ojs/v1/dead-letter/"+id, &rec)
		return rec.State == "completed"
	})

	byName := func(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	want := map[string]int{"orders publish": 1, "send dead_letter_queue": 2, "process dead_letter_queue": 2,
		"send orders": 2, "retry orders": 1}
	var spans tracetest.SpanStubs
	eventually.Nil(t, "every span", func() error {
		spans = exp.GetSpans()
		for name, n := range want {
			if got := len(byName(spans, name)); got != n {
				return fmt.Errorf("%d %q spans, want %d", got, name, n)
			}
		}
		return nil
	})
	producer := byName(spans, "orders publish")[0]
	var original tracetest.SpanStub // the consumer span of the first delivery
	for _, s := range byName(spans, "orders receive") {
		if s.Parent.SpanID() == producer.SpanContext.SpanID() {
			original = s
		}
	}
	if !original.SpanContext.IsValid() {
		t.Fatalf("no consumer span of the produced record among %d spans", len(spans))
	}
	if rec.TraceID == nil || *rec.TraceID != producer.SpanContext.TraceID().String() {
		t.Errorf("record trace_id %v, want %s", rec.TraceID, producer.SpanContext.TraceID())
	}

	index := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		index[s.SpanContext.SpanID()] = s
	}
	// reaches follows links and parents from s back to the original
	// consumer span.
	var reaches func(s tracetest.SpanStub, depth int) bool
	reaches = func(s tracetest.SpanStub, depth int) bool {
		if s.SpanContext.SpanID() == original.SpanContext.SpanID() {
			return true
		}
		if depth > 20 {
			return false
		}
		next := []trace.SpanContext{s.Parent}
		for _, l := range s.Links {
			next = append(next, l.SpanContext)
		}
		for _, sc := range next {
			if p, ok := index[sc.SpanID()]; ok && sc.IsValid() && reaches(p, depth+1) {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"send dead_letter_queue", "process dead_letter_queue", "send orders", "retry orders"} {
		for _, s := range byName(spans, name) {
			if len(s.Links) == 0 {
				t.Errorf("%s span %s has no link", name, s.SpanContext.SpanID())
			}
			if !reaches(s, 0) {
				t.Errorf("%s span %s: its links do not reach the original consumer span %s", name, s.SpanContext.SpanID(), original.SpanContext.SpanID())
			}
			if s.SpanContext.TraceID() != producer.SpanContext.TraceID() {
				t.Errorf("%s span in trace %s, want the record's trace %s", name, s.SpanContext.TraceID(), producer.SpanContext.TraceID())
			}
		}
	}
	// Each redelivered record carries one traceparent: its redelivery span's.
	redeliveries := map[string]bool{}
	for _, s := range byName(spans, "send orders") {
		redeliveries[s.SpanContext.SpanID().String()] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for i, hs := range seen[1:] {
		var tps []string
		for _, h := range hs {
			if h.Key == "traceparent" {
				tps = append(tps, string(h.Value))
			}
		}
		if len(tps) != 1 || len(tps[0]) != 55 || !redeliveries[tps[0][36:52]] {
			t.Errorf("redelivery %d carries traceparent %q, want exactly one, a redelivery span's", i+1, tps)
		}
	}
}
