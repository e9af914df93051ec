package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/store"
)

// The store is the registry's second-level cache: a source put is got back
// whole, the first one stored for an id stays, and an unknown id is not found.
func TestSchemaCacheRoundTrips(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	src := schema.Source{ID: 7, Format: schema.FormatAvro, Text: `{"type":"string"}`, Subject: "orders-value",
		References: []schema.Reference{{Name: "com.acme.Money", Subject: "money", Version: 2, Format: schema.FormatAvro, Text: `{"type":"fixed","name":"Money","size":8}`}}}
	if _, found, err := s.GetSchema(ctx, 7); err != nil || found {
		t.Fatalf("GetSchema before Put = %v, %v; want not found", found, err)
	}
	if err := s.PutSchema(ctx, src); err != nil {
		t.Fatal(err)
	}
	other := src
	other.Text = `{"type":"long"}`
	if err := s.PutSchema(ctx, other); err != nil {
		t.Fatal(err)
	}
	got, found, err := s.GetSchema(ctx, 7)
	if err != nil || !found {
		t.Fatalf("GetSchema = %v, %v", found, err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(src)
	if string(a) != string(b) {
		t.Errorf("GetSchema = %s\nwant %s", a, b)
	}
}

// A record decoded at ingest is stored with its decoded payload (searched
// by path and value) and schema; a pending one is found, and once decoded
// is no longer pending and is found by its decoded fields.
func TestDecodedRecordsAreStoredAndSearched(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	ref := &dlq.SchemaRef{RegistryID: 3, Type: "AVRO", Subject: "orders-value"}
	decoded := newRecord(1, "orders")
	decoded.Value = []byte{0, 0, 0, 0, 3, 2, 'x'}
	decoded.ValueSchema, decoded.Payload = ref, json.RawMessage(`{"customer":"c-42","total":12345678901234567890}`)
	decoded.KeySchema, decoded.KeyPayload = &dlq.SchemaRef{RegistryID: 4, Type: "PROTOBUF", Message: "acme.Key"}, json.RawMessage(`{"id":"k-1"}`)
	pending := newRecord(2, "orders")
	pending.Value, pending.DecodePending = []byte{0, 0, 0, 0, 9, 2, 'y'}, true
	failed := newRecord(3, "orders")
	failed.Value, failed.DecodeError = []byte{0, 0, 0, 0, 99}, "unknown schema id 99"
	if _, err := s.InsertRecords(ctx, []dlq.Record{decoded, pending, failed}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, decoded.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ValueSchema == nil || *got.ValueSchema != *ref || string(got.Payload) != `{"total": 12345678901234567890, "customer": "c-42"}` ||
		got.KeySchema == nil || got.KeySchema.Message != "acme.Key" || string(got.KeyPayload) != `{"id": "k-1"}` || got.DecodePending {
		t.Errorf("decoded record = schema %+v payload %s key %+v %s pending %v", got.ValueSchema, got.Payload, got.KeySchema, got.KeyPayload, got.DecodePending)
	}
	if got, _ := s.Get(ctx, failed.ID); got.DecodeError != "unknown schema id 99" || got.Payload != nil {
		t.Errorf("failed record = %q %s", got.DecodeError, got.Payload)
	}
	find := func(path, value string) []string {
		t.Helper()
		page, err := s.List(ctx, &store.ListParams{Filter: filter.Filter{Path: []string{path}, Value: value}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range page.Records {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if ids := find("customer", "c-42"); len(ids) != 1 || ids[0] != decoded.ID {
		t.Errorf("path customer = c-42 finds %v, want the decoded record", ids)
	}

	todo, err := s.PendingDecodes(ctx, "", 10)
	if err != nil || len(todo) != 1 || todo[0].ID != pending.ID || string(todo[0].Value) != string(pending.Value) {
		t.Fatalf("PendingDecodes = %+v, %v", todo, err)
	}
	if err := s.SetDecoded(ctx, []store.Decoding{{ID: pending.ID, ValueSchema: &dlq.SchemaRef{RegistryID: 9, Type: "JSON"},
		Payload: json.RawMessage(`{"customer":"c-43","note":"nul \u0000"}`)}}); err != nil {
		t.Fatal(err)
	}
	if todo, err := s.PendingDecodes(ctx, "", 10); err != nil || len(todo) != 0 {
		t.Fatalf("PendingDecodes after SetDecoded = %+v, %v", todo, err)
	}
	got, err = s.Get(ctx, pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	// jsonb cannot hold a NUL: decoded all the same, the payload omitted with the reason.
	if got.ValueSchema == nil || got.ValueSchema.RegistryID != 9 || got.Payload != nil || got.PayloadOmitted == "" {
		t.Errorf("after SetDecoded = schema %+v payload %s omitted %q", got.ValueSchema, got.Payload, got.PayloadOmitted)
	}
	if err := s.SetDecoded(ctx, []store.Decoding{{ID: decoded.ID, DecodeError: "late"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, decoded.ID); got.DecodeError != "" {
		t.Errorf("SetDecoded changed a record that was not pending: %q", got.DecodeError)
	}
}
