package store_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
)

// BenchmarkEncode is the per-batch cost ingest pays before a COPY: 5,000
// records of 1 KiB JSON values (as the ingest benchmark), encoded as one
// binary COPY stream per table (as the COPYs read them).
func BenchmarkEncode(b *testing.B) {
	records := make([]dlq.Record, 5000)
	for i := range records {
		r := newRecord(int64(i), "orders")
		pad := make([]byte, 480)
		_, _ = rand.Read(pad)
		r.Value = fmt.Appendf(nil, `{"order_id":%d,"items":[{"sku":"a","n":1}],"pad":"%s"}`, i, hex.EncodeToString(pad))
		records[i] = r
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := store.EncodeRows(records); err != nil {
			b.Fatal(err)
		}
	}
}
