package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/store"
)

// A preview listing reads only prefixes of a record's producer-sized parts,
// cut in Postgres, with the sizes of the whole; small records read whole.
func TestListPreviewsCutsInPostgres(t *testing.T) {
	s := setup(t)
	ctx := context.Background()

	big := newRecord(1, "orders")
	big.Key = bytes.Repeat([]byte("k"), 2000)
	big.Value = append([]byte(`{"blob":"`), append(bytes.Repeat([]byte("é"), 300_000), `"}`...)...)
	big.Headers = nil
	for i := range 30 {
		v := []byte(strings.Repeat("v", 10*i))
		if i == 3 {
			v = bytes.Repeat([]byte{0xff, 0}, 1000) // binary: stored as base64
		}
		big.Headers = append(big.Headers, dlq.Header{Key: fmt.Sprintf("h%02d", i) + strings.Repeat("K", 200*(i%2)), Value: v})
	}
	details, _ := json.Marshal(map[string]string{"body": strings.Repeat("d", 5000)})
	bt := make([]string, 100)
	for i := range bt {
		bt[i] = fmt.Sprintf("at frame%d ", i) + strings.Repeat("f", 300)
	}
	big.Errors = []dlq.ErrorEntry{big.Errors[0], {Attempt: 2, Type: "db.down", Message: strings.Repeat("m", 70_000), Code: dlq.CodeRetry,
		Backtrace: bt, Details: details, OccurredAt: big.Errors[0].OccurredAt}}
	big.Meta = json.RawMessage(`{"note":"` + strings.Repeat("n", 3000) + `"}`)

	small := newRecord(2, "orders")
	small.Value = nil // a tombstone
	small.Key = nil
	if _, err := s.InsertRecords(ctx, []dlq.Record{big, small}); err != nil {
		t.Fatal(err)
	}

	page, err := s.ListPreviews(ctx, &store.ListParams{Filter: filter.Filter{Queue: "orders"}, Limit: 10})
	if err != nil || len(page.Records) != 2 || page.Total != 2 {
		t.Fatalf("ListPreviews = %+v, %v", page, err)
	}
	sp, bp := page.Records[0], page.Records[1] // newest first
	if sp.Record.ID != small.ID || bp.Record.ID != big.ID {
		t.Fatalf("order: %s %s", sp.Record.ID, bp.Record.ID)
	}
	if sp.KeySize != -1 || sp.ValueSize != -1 || sp.Record.Key != nil || sp.Record.Value != nil || sp.ErrorCut || sp.MetaCut ||
		sp.HeaderCount != 2 || len(sp.Record.Headers) != 2 || !bytes.Equal(sp.Record.Headers[1].Value, []byte{0, 0xff}) ||
		sp.ErrorCount != 1 || len(sp.Record.Errors) != 1 || sp.Record.Errors[0].Message != "bad\uFFFDbyte" {
		t.Errorf("small record's preview is not the whole record: %+v", sp)
	}

	r := bp.Record
	if bp.KeySize != 2000 || !bytes.Equal(r.Key, big.Key[:store.PreviewKeyBytes]) {
		t.Errorf("key: size %d, %d bytes read", bp.KeySize, len(r.Key))
	}
	if bp.ValueSize != len(big.Value) || !bytes.Equal(r.Value, big.Value[:store.PreviewValueBytes]) {
		t.Errorf("value: size %d (want %d), %d bytes read", bp.ValueSize, len(big.Value), len(r.Value))
	}
	if bp.HeaderCount != 30 || len(r.Headers) != store.PreviewHeaders || len(bp.HeaderSizes) != store.PreviewHeaders {
		t.Fatalf("headers: %d of %d read, %d sizes", len(r.Headers), bp.HeaderCount, len(bp.HeaderSizes))
	}
	for i, h := range r.Headers {
		whole := big.Headers[i]
		if bp.HeaderSizes[i].Key != len(whole.Key) || bp.HeaderSizes[i].Value != len(whole.Value) {
			t.Errorf("header %d: sizes %+v, want %d/%d", i, bp.HeaderSizes[i], len(whole.Key), len(whole.Value))
		}
		if !strings.HasPrefix(whole.Key, h.Key) || len(h.Key) > store.PreviewHeaderKeyBytes*4 || !bytes.HasPrefix(whole.Value, h.Value) ||
			len(h.Value) < min(len(whole.Value), store.PreviewHeaderValueBytes) || len(h.Value) > store.PreviewHeaderValueBytes*4 {
			t.Errorf("header %d: %d/%d bytes read of %d/%d", i, len(h.Key), len(h.Value), len(whole.Key), len(whole.Value))
		}
	}
	if bp.ErrorCount != 2 || len(r.Errors) != 1 || !bp.ErrorCut {
		t.Fatalf("errors: %d of %d read, cut %t", len(r.Errors), bp.ErrorCount, bp.ErrorCut)
	}
	e := r.Errors[0]
	if e.Attempt != 2 || e.Type != "db.down" || len(e.Message) != store.PreviewMessageBytes || len(e.Backtrace) != store.PreviewBacktraceLines ||
		len(e.Backtrace[9]) != store.PreviewBacktraceLineBytes || !strings.HasPrefix(e.Backtrace[9], "at frame9 ") || string(e.Details) != "{}" {
		t.Errorf("latest error read as %d-byte message, %d lines, details %s", len(e.Message), len(e.Backtrace), e.Details)
	}
	if !bp.MetaCut || string(r.Meta) != "{}" || bp.RetryCut {
		t.Errorf("meta: cut %t, %s; retry cut %t", bp.MetaCut, r.Meta, bp.RetryCut)
	}

	// List still reads whole records.
	full, err := s.List(ctx, &store.ListParams{Filter: filter.Filter{Queue: "orders"}, Limit: 10})
	if err != nil || !bytes.Equal(full.Records[1].Value, big.Value) || len(full.Records[1].Headers) != 30 {
		t.Errorf("List: %v", err)
	}
}
