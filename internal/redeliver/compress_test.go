package redeliver_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
)

// Redelivered JSON arrives compressed with snappy; random values, which
// snappy cannot shrink, arrive uncompressed, and whole.
func TestRedeliveriesAreCompressedWhenTheirValuesCompress(t *testing.T) {
	b := setup(t, "orders", "blobs")
	const n = 100
	b.dueEach(t, "orders", n, func(i int, r *dlq.Record) {
		r.Value = fmt.Appendf(nil, `{"order_id":%d,"customer":"c-%d","status":"created","note":"%0900d"}`, i, i%7, i)
	})
	b.dueEach(t, "blobs", n, func(_ int, r *dlq.Record) {
		r.Value = make([]byte, 1024)
		_, _ = rand.Read(r.Value)
	})
	if _, err := b.scheduler(t, nil).RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	for queue, want := range map[string]uint8{"orders": 2, "blobs": 0} { // 2 is snappy's codec
		for _, r := range kafkatest.Consume(t, b.brokers, queue, n, 30*time.Second) {
			if got := r.Attrs.CompressionType(); got != want {
				t.Fatalf("a record redelivered to %s came in a batch of codec %d, want %d", queue, got, want)
			}
		}
	}
	if got := b.countState(t, "blobs", dlq.StateCompleted); got != n {
		t.Fatalf("%d random values redelivered, want %d", got, n)
	}
}
