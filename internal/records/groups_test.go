package records_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/testdate"
)

// bigRecords stores n retryable records of queue orders, oldest first, two
// in three with a value of size bytes (a JSON object), every third small
// ({"n":i}), and returns their ids.
func (b *bundle) bigRecords(t *testing.T, n, size int) []string {
	t.Helper()
	at := testdate.Now().UTC().Add(-time.Hour)
	ids := make([]string, n)
	for i := range n {
		value := fmt.Appendf(nil, `{"n":%d}`, i)
		if i%3 != 1 {
			value = fmt.Appendf(nil, `{"n":%d,"blob":"%s"}`, i, bytes.Repeat([]byte{'a' + byte(i%26)}, size))
		}
		ids[i] = dlq.NewID(testdate.Now())
		next := at.Add(time.Hour)
		r := dlq.Record{ID: ids[i], Queue: "orders", Type: "order.created", State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 5,
			Format: dlq.FormatRedrive, Source: dlq.Source{Topic: "orders"}, DLQ: dlq.Coord{Topic: ownTopic, Offset: offsets.Add(1)},
			Key: fmt.Appendf(nil, "k%d", i), Value: value, NextRetryAt: &next,
			Errors: []dlq.ErrorEntry{{Attempt: 1, Type: "db.timeout", Message: "boom", Code: dlq.CodeRetry, OccurredAt: at}},
			Retry:  json.RawMessage(`{"max_attempts":5}`), Meta: json.RawMessage(`{}`), CreatedAt: at, UpdatedAt: at}
		// One at a time: the test holds no more than the reads it checks.
		if _, err := b.st.InsertRecords(context.Background(), []dlq.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// An export reads records in groups bounded by bytes, not pages of 200
// records of any size: each group's keys and values add up to at most
// GroupBytes (a record larger than that comes alone), every record comes
// once, oldest first, and a record deleted after its size was read is left
// out without an error. A patch's dry run reads the same way and evaluates
// every record.
func TestExportAndPatchDryRunReadGroupsBoundedByBytes(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	const size = 900_000
	ids := b.bigRecords(t, 24, size)
	huge := dlq.NewID(testdate.Now()) // one record larger than a group
	r, err := b.st.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	r.ID, r.DLQ.Offset, r.Value = huge, offsets.Add(1), fmt.Appendf(nil, `"%s"`, bytes.Repeat([]byte{'z'}, records.GroupBytes+1))
	if _, err := b.st.InsertRecords(ctx, []dlq.Record{*r}); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, huge)

	rd := b.rec.Export(&filter.Filter{Queue: "orders"}, filter.Scope{})
	var got []string
	groups := 0
	for {
		group, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if group == nil {
			break
		}
		groups++
		held := 0
		for _, r := range group {
			got = append(got, r.ID)
			held += len(r.Key) + len(r.Value)
		}
		if held > records.GroupBytes && len(group) > 1 {
			t.Fatalf("group %d holds %d records of %d bytes, over %d", groups, len(group), held, records.GroupBytes)
		}
		if groups == 1 {
			// Deleted after the page was sized, before its group is read.
			if err := b.rec.Delete(ctx, ids[20]); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := append(append([]string{}, ids[:20]...), ids[21:]...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("export read %d records %v, want %d %v", len(got), got, len(want), want)
	}
	// 16 big records of 0.9 MB come four at a time at most, the huge one
	// alone.
	if groups < 16/4+1 {
		t.Errorf("%d groups, want at least %d", groups, 16/4+1)
	}

	// A payload search reads its matches the same way.
	rd = b.rec.Export(&filter.Filter{Queue: "orders", Path: []string{"n"}, Value: "4"}, filter.Scope{})
	if group, err := rd.Next(ctx); err != nil || len(group) != 1 || group[0].ID != ids[4] {
		t.Fatalf("export of path n = 4: %d records, %v; want record 4", len(group), err)
	}
	if group, err := rd.Next(ctx); err != nil || group != nil {
		t.Fatalf("export of path n = 4 goes on: %d records, %v", len(group), err)
	}

	// A dry run of a patch over the same records evaluates each.
	patch, err := records.ParsePatch([]byte(`[{"op":"add","path":"/patched","value":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.rec.Bulk(ctx, &records.BulkParams{Kind: records.TaskRetry, Filter: filter.Filter{Queue: "orders"}, Patch: patch})
	if err != nil {
		t.Fatal(err)
	}
	// The huge value is a JSON string: the patch cannot add to it.
	if p := res.Patch; p == nil || p.Evaluated != int64(len(want)) || p.Applies != int64(len(want)-1) || p.Fails != 1 || len(p.Samples) != records.MaxPatchSamples {
		t.Fatalf("dry run: %+v, want %d evaluated, one failing", p, len(want))
	}
}
