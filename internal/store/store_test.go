package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func setup(t *testing.T) *store.Store {
	t.Helper()
	t.Parallel()
	return store.New(pgtest.New(t))
}

func newRecord(offset int64, queue string) dlq.Record {
	now := testdate.Now().UTC().Truncate(time.Microsecond)
	next := now.Add(time.Second)
	return dlq.Record{
		ID: dlq.NewID(testdate.Now()), Queue: queue, Type: "order.created",
		State: dlq.StateRetryable, Attempt: 1, MaxAttempts: 3,
		Source: dlq.Source{Topic: queue, Partition: 2, Offset: 40 + offset, Timestamp: now, Group: "billing"},
		DLQ:    dlq.Coord{Topic: "dead_letter_queue", Partition: 0, Offset: offset},
		Format: dlq.FormatRedrive,
		Key:    []byte(fmt.Sprintf("k%d", offset)), Value: []byte(`{"id":1}`),
		Headers:   []dlq.Header{{Key: "traceparent", Value: []byte("00-abc")}, {Key: "bin", Value: []byte{0, 0xff}}},
		Errors:    []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Message: "bad\x00byte", Code: dlq.CodeRetry, OccurredAt: now}},
		CreatedAt: now, UpdatedAt: now, NextRetryAt: &next,
	}
}

func TestInsertRecordsIsIdempotentOnDLQCoordinates(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	first := []dlq.Record{newRecord(1, "orders"), newRecord(2, "orders")}
	res, err := s.InsertRecords(ctx, first)
	if err != nil || res.N != 2 || !res.New(0) || !res.New(1) {
		t.Fatalf("first insert: %+v err=%v", res, err)
	}
	// The same DLQ coordinates again (fresh ids, as a re-consumed batch would
	// get), mixed with one new record: only the new one is stored.
	again := []dlq.Record{newRecord(1, "orders"), newRecord(2, "orders"), newRecord(3, "orders")}
	res, err = s.InsertRecords(ctx, again)
	if err != nil || res.N != 1 || res.New(0) || res.New(1) || !res.New(2) {
		t.Fatalf("second insert: %+v err=%v, want only the third inserted", res, err)
	}
	total, err := s.Count(ctx, &filter.Filter{})
	if err != nil || total != 3 {
		t.Fatalf("count = %d, %v; want 3", total, err)
	}
}

func TestGetRoundTripsRecord(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	want := newRecord(7, "orders")
	if _, err := s.InsertRecords(ctx, []dlq.Record{want}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Queue != "orders" || got.Source.Partition != 2 || got.Source.Offset != 47 || got.Source.Group != "billing" ||
		!got.Source.Timestamp.Equal(want.Source.Timestamp) || got.DLQ != want.DLQ || string(got.Key) != "k7" ||
		string(got.Value) != `{"id":1}` || got.State != dlq.StateRetryable || !got.NextRetryAt.Equal(*want.NextRetryAt) {
		t.Fatalf("round trip mismatch:\n got %+v\nwant %+v", got, want)
	}
	if len(got.Headers) != 2 || string(got.Headers[1].Value) != "\x00\xff" {
		t.Fatalf("binary header not preserved: %+v", got.Headers)
	}
	if len(got.Errors) != 1 || got.Errors[0].Message != "bad\uFFFDbyte" {
		t.Fatalf("errors = %+v; want NUL replaced", got.Errors)
	}
	if _, err := s.Get(ctx, dlq.NewID(testdate.Now())); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing record: err = %v, want ErrNotFound", err)
	}
}

func TestListFiltersAndPaginates(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	var recs []dlq.Record
	for i := range 5 {
		queue := "orders"
		if i%2 == 1 {
			queue = "payments"
		}
		recs = append(recs, newRecord(int64(i), queue))
	}
	if _, err := s.InsertRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	page, err := s.List(ctx, &store.ListParams{Filter: filter.Filter{Queue: "orders"}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 3 || len(page.Records) != 2 || !page.HasMore || page.Records[0].ID != recs[4].ID {
		t.Fatalf("page 1 = total %d, %d records, more %v", page.Total, len(page.Records), page.HasMore)
	}
	page, err = s.List(ctx, &store.ListParams{Filter: filter.Filter{Queue: "orders"}, Limit: 2, BeforeID: page.Records[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.HasMore || page.Records[0].ID != recs[0].ID {
		t.Fatalf("page 2 = %d records, more %v", len(page.Records), page.HasMore)
	}
}

// JSON that Go accepts but jsonb rejects must not block ingest: the record is
// stored, its value byte for byte, with the JSON kept as text.
func TestJSONThatJSONBRejectsIsStoredAsText(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	good := newRecord(1, "orders")
	huge := newRecord(2, "orders")
	huge.Value = []byte(`{"amount":1e999999}`)
	surrogate := newRecord(3, "orders")
	surrogate.Errors[0].Details = []byte(`{"why":"\ud800"}`)
	res, err := s.InsertRecords(ctx, []dlq.Record{good, huge, surrogate})
	if err != nil || res.N != 3 {
		t.Fatalf("inserted %d: %v", res.N, err)
	}
	got, err := s.Get(ctx, huge.ID)
	if err != nil || string(got.Value) != `{"amount":1e999999}` {
		t.Fatalf("value not kept byte for byte: %q %v", got.Value, err)
	}
	got, err = s.Get(ctx, surrogate.ID)
	if err != nil || !strings.Contains(string(got.Errors[0].Details), `raw_details`) {
		t.Fatalf("details not kept as text: %s %v", got.Errors[0].Details, err)
	}

	// The same for a repeat failure whose details jsonb rejects.
	_, err = s.UpdateLocked(ctx, []string{good.ID}, func(recs map[string]*dlq.Record) ([]*dlq.Record, error) {
		r := recs[good.ID]
		r.Errors = append(r.Errors, dlq.ErrorEntry{Attempt: 2, Type: "x", Details: []byte(`{"n":1e999999}`), OccurredAt: testdate.Now()})
		return []*dlq.Record{r}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, good.ID); len(got.Errors) != 2 {
		t.Fatalf("repeat failure not stored: %+v", got.Errors)
	}
}
