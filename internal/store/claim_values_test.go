package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A claim hands over each record's key and value byte for byte: a NULL key
// stays nil and an empty one empty (the first one claimed too), a value larger than the claim's shared
// blocks and the small ones around it come back whole, and appending to one
// does not write over the next.
func TestAClaimCarriesKeysAndValuesExactly(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	due := testdate.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	keys := [][]byte{{}, []byte("k1"), nil, []byte("k3")}
	values := [][]byte{[]byte(`{"n":1}`), bytes.Repeat([]byte("v"), 300<<10), {0xff, 0x00}, []byte("tail")}
	var recs []dlq.Record
	want := map[string]int{}
	for i := range keys {
		r := newRecord(int64(i), "orders")
		r.Key, r.Value, r.NextRetryAt = keys[i], values[i], &due
		recs = append(recs, r)
		want[r.ID] = i
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: due.Add(time.Hour), Limit: 10, Owner: "test", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != len(keys) {
		t.Fatalf("claimed %d records, want %d", len(c.Records), len(keys))
	}
	for _, r := range c.Records {
		_ = append(r.Key, "overwritten"...)
		_ = append(r.Value, "overwritten"...)
	}
	for _, r := range c.Records {
		i := want[r.ID]
		if (r.Key == nil) != (keys[i] == nil) || !bytes.Equal(r.Key, keys[i]) || !bytes.Equal(r.Value, values[i]) {
			t.Errorf("record %d: key %q (nil %v), value of %d bytes; want key %q (nil %v), value of %d bytes",
				i, r.Key, r.Key == nil, len(r.Value), keys[i], keys[i] == nil, len(values[i]))
		}
	}
}
