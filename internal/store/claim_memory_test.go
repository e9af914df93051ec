package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// A released claim's memory carries the next claim's records, which come
// whole: the blocks of keys and values and the record slices are reused.
func TestAReleasedClaimsMemoryCarriesTheNextClaimExactly(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	due := testdate.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	// 400 records of 2 KiB: two blocks a claim of 200.
	var recs []dlq.Record
	values := map[string][]byte{}
	for i := range 400 {
		r := newRecord(int64(i), "orders")
		r.Key = fmt.Appendf(nil, "key-%d", i)
		r.Value = bytes.Repeat([]byte{byte('a' + i%26)}, 2048)
		r.NextRetryAt = &due
		recs = append(recs, r)
		values[r.ID] = r.Value
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	claim := func() *store.Claim {
		t.Helper()
		c, err := s.ClaimDue(ctx, &store.ClaimParams{Queue: "orders", Now: due.Add(time.Hour), Limit: 200, Owner: "test", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Records) != 200 {
			t.Fatalf("claimed %d records, want 200", len(c.Records))
		}
		return c
	}
	first := claim()
	seen := map[string]bool{}
	for _, r := range first.Records {
		seen[r.ID] = true
	}
	first.Release()
	if first.Records != nil {
		t.Fatal("a released claim still hands out its records")
	}
	blocks, slices := store.KeptClaimMemory(s)
	if blocks < 2 || slices != 1 {
		t.Fatalf("the store kept %d blocks and %d record slices of the released claim, want at least 2 and 1", blocks, slices)
	}

	second := claim()
	if b, sl := store.KeptClaimMemory(s); b >= blocks || sl != 0 {
		t.Fatalf("the next claim left %d of %d kept blocks and %d of 1 record slices unused", b, blocks, sl)
	}
	for _, r := range second.Records {
		if seen[r.ID] {
			t.Fatalf("record %s claimed twice", r.ID)
		}
		if want := values[r.ID]; !bytes.Equal(r.Value, want) {
			t.Fatalf("record %s: value of %d bytes starting %q, want %d bytes of %q", r.ID, len(r.Value), r.Value[:min(len(r.Value), 8)], len(want), want[:1])
		}
	}
	second.Release()
	second.Release() // a second release gives nothing back twice
	if _, sl := store.KeptClaimMemory(s); sl != 1 {
		t.Fatalf("the store keeps %d record slices after the same claim was released twice, want 1", sl)
	}
}
