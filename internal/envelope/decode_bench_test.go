package envelope

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/testdate"
)

// BenchmarkDecodeNative is ingest's per-record decoding of a native
// envelope, as the client library writes it (a dozen headers).
func BenchmarkDecodeNative(b *testing.B) {
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		src := &kgo.Record{Topic: "orders", Partition: int32(i % 12), Offset: int64(i), Key: fmt.Appendf(nil, "order-%d", i),
			Value: fmt.Appendf(nil, `{"order_id":%d}`, i), Timestamp: testdate.Now(),
			Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
		recs[i] = Encode(src, FailureInfo{DLQTopic: "dead_letter_queue", Group: "billing", Type: "order.created",
			ErrorType: "db.connection_refused", Message: "dial tcp 10.0.0.5:5432: connection refused",
			Backtrace: []string{"main.handle()", "\t/app/handler.go:42"}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		_ = Decode(recs[i%len(recs)])
	}
}
