package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/dlq"
)

// The record page shows the record's trace id, linked through
// REDRIVE_TRACE_URL to the operator's tracing UI (a new tab), and says so
// when the record carries no trace context; the page fits 800 and 1400 px.
func TestTheRecordPageLinksItsTrace(t *testing.T) {
	t.Parallel()
	s := startServer(t, "REDRIVE_ARCHIVE_TOPIC", "off", "REDRIVE_TRACE_URL", "https://jaeger.example/trace/{trace_id}")
	traced := failure("orders", "order-42", []byte(`{"id":42}`), false)
	traced.Headers = []dlq.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}
	untraced := failure("orders", "order-43", []byte(`{"id":43}`), false)
	s.storeRecords(t, []dlq.Record{traced, untraced})

	b := newBrowser(t)
	b.run(t, "the traced record", chromedp.Navigate(s.base+"/ui/records/"+traced.ID), waitText("#record-trace", "4bf92f3577b34da6a3ce929d0e0e4736"))
	if got := eval[[]string](t, b, `(() => { const a = document.querySelector("a#record-trace"); return a ? [a.href, a.target, a.rel] : []; })()`); len(got) != 3 ||
		got[0] != "https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736" || got[1] != "_blank" || got[2] != "noopener noreferrer" {
		t.Errorf("the trace link is %q, want the Jaeger URL of the trace, in a new tab", got)
	}
	b.noSidewaysScroll(t, "record-trace")
	b.run(t, "the untraced record", chromedp.Navigate(s.base+"/ui/records/"+untraced.ID), waitText("#record-trace", "no traceparent"))
	if b.count(t, "a#record-trace") != 0 {
		t.Error("a record without a trace context links a trace")
	}
}
