package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/ingest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

const (
	orderAvro = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
		{"name":"customer","type":"string"},
		{"name":"total","type":"long"},
		{"name":"note","type":["null","string"],"default":null}]}`
	orderProto = `syntax = "proto3";
package acme;
message Order { string customer = 1; int64 total = 2; }
`
	orderJSONSchema = `{"type":"object","properties":{"customer":{"type":"string"},"total":{"type":"integer"}},"required":["customer"]}`
	keyAvro         = `{"type":"record","name":"Key","namespace":"com.acme","fields":[{"name":"id","type":"string"}]}`
)

// fixtures registers the three schemas and encodes values with writers of
// their own (hamba/avro, Google's protowire, encoding/json) behind
// franz-go's wire header.
type fixtures struct {
	reg                   *srtest.Registry
	avroID, protoID, json int
	keyID                 int
	avro, key             avro.Schema
}

func newFixtures(t *testing.T) *fixtures {
	t.Helper()
	f := &fixtures{reg: srtest.New(t)}
	f.avroID = f.reg.Register("orders-avro-value", "AVRO", orderAvro)
	f.protoID = f.reg.Register("orders-proto-value", "PROTOBUF", orderProto)
	f.json = f.reg.Register("orders-json-value", "JSON", orderJSONSchema)
	f.keyID = f.reg.Register("orders-avro-key", "AVRO", keyAvro)
	f.avro, f.key = avro.MustParse(orderAvro), avro.MustParse(keyAvro)
	return f
}

func (f *fixtures) avroValue(t *testing.T, customer string, total int64) []byte {
	t.Helper()
	body, err := avro.Marshal(f.avro, map[string]any{"customer": customer, "total": total, "note": nil})
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	out, _ := h.AppendEncode(nil, f.avroID, nil)
	return append(out, body...)
}

func (f *fixtures) avroKey(t *testing.T, id string) []byte {
	t.Helper()
	body, err := avro.Marshal(f.key, map[string]any{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	out, _ := h.AppendEncode(nil, f.keyID, nil)
	return append(out, body...)
}

func (f *fixtures) protoValue(customer string, total int64) []byte {
	var h sr.ConfluentHeader
	out, _ := h.AppendEncode(nil, f.protoID, []int{0})
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendString(out, customer)
	out = protowire.AppendTag(out, 2, protowire.VarintType)
	return protowire.AppendVarint(out, uint64(total))
}

func (f *fixtures) jsonValue(customer string, total int64) []byte {
	var h sr.ConfluentHeader
	out, _ := h.AppendEncode(nil, f.json, nil)
	b, _ := json.Marshal(map[string]any{"customer": customer, "total": total})
	return append(out, b...)
}

func (f *fixtures) registry(t *testing.T, st *store.Store) *schema.Registry {
	t.Helper()
	r, err := schema.New(schema.Config{URLs: []string{f.reg.URL()}, HTTPClient: f.reg.Client(), Timeout: 2 * time.Second}, st)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startDecoder runs a background decoder until the test ends.
func startDecoder(t *testing.T, st *store.Store, reg *schema.Registry) *maintenance.SchemaDecoder {
	t.Helper()
	d := maintenance.NewSchemaDecoder(maintenance.SchemaDecoderConfig{Store: st, Registry: reg,
		Interval: 50 * time.Millisecond, Backoff: service.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond}})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })
	return d
}

func findByPath(t *testing.T, st *store.Store, path, value string) []dlq.Record {
	t.Helper()
	page, err := st.List(context.Background(), &store.ListParams{Filter: filter.Filter{Path: strings.Split(path, "."), Value: value}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Records
}

// Avro, Protobuf and JSON Schema values (and an Avro key) ingested through
// Kafka are stored decoded: the payload is their natural JSON, found by
// path and value, with how each was decoded; the bytes stay as they were.
// The first of each schema waits for the background decoder; once it is
// fetched, ingest decodes the rest itself.
func TestSchemaRegistryRecordsAreStoredDecoded(t *testing.T) {
	b := setup(t)
	f := newFixtures(t)
	reg := f.registry(t, b.store)
	dec := startDecoder(t, b.store, reg)
	startWith(t, b, b.store, "g", func(c *ingest.Config) { c.Schemas, c.DecodePending = reg, dec.Nudge })

	produce := func(round int) {
		kafkatest.Produce(t, b.cl,
			dlqRecord("orders", f.avroKey(t, fmt.Sprintf("k-%d", round)), f.avroValue(t, fmt.Sprintf("avro-%d", round), 9007199254740993)),
			dlqRecord("orders", nil, f.protoValue(fmt.Sprintf("proto-%d", round), -1234567890123456789)),
			dlqRecord("orders", nil, f.jsonValue(fmt.Sprintf("json-%d", round), 42)),
			dlqRecord("orders", nil, append([]byte{0, 0, 0, 0x30, 0x39}, "unknown id"...)),
		)
	}
	noneLeft := func() bool {
		todo, err := b.store.PendingDecodes(context.Background(), "", 10)
		return err == nil && len(todo) == 0
	}
	produce(1)
	waitForCount(t, b.store, 4)
	eventually.True(t, "every record decoded", noneLeft)
	// Schemas are held now: the next round is decoded by ingest itself (but
	// the unknown id, which the decoder asks the registry about again).
	produce(2)
	waitForCount(t, b.store, 8)
	eventually.True(t, "every record decoded", noneLeft)

	for _, tc := range []struct {
		path, value, typ, subject, message string
		id                                 int
		payload                            string
	}{
		{"customer", "avro-2", "AVRO", "orders-avro-value", "", f.avroID, `{"note": null, "total": 9007199254740993, "customer": "avro-2"}`},
		{"customer", "proto-1", "PROTOBUF", "orders-proto-value", "acme.Order", f.protoID, `{"total": -1234567890123456789, "customer": "proto-1"}`},
		{"customer", "json-2", "JSON", "orders-json-value", "", f.json, `{"total": 42, "customer": "json-2"}`},
	} {
		got := findByPath(t, b.store, tc.path, tc.value)
		if len(got) != 1 {
			t.Errorf("%s = %s finds %d records, want 1", tc.path, tc.value, len(got))
			continue
		}
		r, err := b.store.Get(context.Background(), got[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		want := dlq.SchemaRef{RegistryID: tc.id, Type: tc.typ, Subject: tc.subject, Message: tc.message}
		if r.ValueSchema == nil || *r.ValueSchema != want || string(r.Payload) != tc.payload || r.DecodeError != "" || r.DecodePending {
			t.Errorf("%s: schema %+v payload %s error %q pending %v; want %+v %s", tc.value, r.ValueSchema, r.Payload, r.DecodeError, r.DecodePending, want, tc.payload)
		}
		if r.Value[0] != 0 {
			t.Errorf("%s: value not kept as received", tc.value)
		}
		if tc.typ == "AVRO" && (r.KeySchema == nil || r.KeySchema.RegistryID != f.keyID || string(r.KeyPayload) != `{"id": "k-2"}`) {
			t.Errorf("%s: key schema %+v key payload %s", tc.value, r.KeySchema, r.KeyPayload)
		}
	}
	// The 64-bit integer kept every digit: search by it.
	if got := findByPath(t, b.store, "total", "-1234567890123456789"); len(got) != 2 {
		t.Errorf("total = -1234567890123456789 finds %d records, want 2", len(got))
	}
	// An id the registry does not know: kept raw, and says why.
	page, err := b.store.List(context.Background(), &store.ListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for _, r := range page.Records {
		if r.ValueSchema == nil {
			if !strings.Contains(r.DecodeError, "value:") || !strings.Contains(r.DecodeError, "unknown schema id") || r.DecodePending {
				t.Errorf("record at offset %d: decode error %q, pending %v", r.DLQ.Offset, r.DecodeError, r.DecodePending)
			}
			unknown++
		}
	}
	if unknown != 2 {
		t.Errorf("%d records not decoded, want the 2 of the unknown id", unknown)
	}
}

// A registry that is down while records arrive pauses nothing and loses
// nothing: every record is stored at once, raw and pending; once the
// registry is back every one is decoded.
func TestRegistryOutageDuringIngestPausesNothingAndEndsDecoded(t *testing.T) {
	b := setup(t)
	f := newFixtures(t)
	f.reg.SetDown(true)
	reg := f.registry(t, b.store)
	dec := startDecoder(t, b.store, reg)
	s := startWith(t, b, b.store, "g", func(c *ingest.Config) { c.Schemas, c.DecodePending = reg, dec.Nudge })
	stopWatch := watchReady(s.in, s.metrics.IngestPaused)
	const n = 300
	var recs []*kgo.Record
	for i := range n {
		switch i % 3 {
		case 0:
			recs = append(recs, dlqRecord("orders", nil, f.avroValue(t, fmt.Sprintf("c-%d", i), int64(i))))
		case 1:
			recs = append(recs, dlqRecord("orders", nil, f.protoValue(fmt.Sprintf("c-%d", i), int64(i))))
		default:
			recs = append(recs, dlqRecord("orders", nil, f.jsonValue(fmt.Sprintf("c-%d", i), int64(i))))
		}
	}
	kafkatest.Produce(t, b.cl, recs...)
	waitForCount(t, b.store, n)
	if stopWatch() {
		t.Error("ingest paused while the registry was down")
	}
	todo, err := b.store.PendingDecodes(context.Background(), "", 1000)
	if err != nil || len(todo) != n {
		t.Fatalf("%d records pending while the registry is down (%v), want %d", len(todo), err, n)
	}
	f.reg.SetDown(false)
	eventually.True(t, "every record decoded once the registry is back", func() bool {
		todo, err := b.store.PendingDecodes(context.Background(), "", 1000)
		return err == nil && len(todo) == 0
	})
	for i := range n {
		if got := findByPath(t, b.store, "customer", fmt.Sprintf("c-%d", i)); len(got) != 1 {
			t.Fatalf("customer c-%d: %d records found decoded, want 1", i, len(got))
		}
	}
	waitForCount(t, b.store, n)
}

// Schemas fetched once survive a registry outage across a restart: a new
// process (a new Registry, nothing in memory) decodes with Postgres's
// schema cache while the registry is down.
func TestKnownSchemasDecodeAcrossARestartWithTheRegistryDown(t *testing.T) {
	b := setup(t)
	f := newFixtures(t)
	first := f.registry(t, b.store)
	if _, err := first.Fetch(context.Background(), f.avroID); err != nil {
		t.Fatal(err)
	}
	f.reg.SetDown(true)
	reg := f.registry(t, b.store) // the restarted process
	dec := startDecoder(t, b.store, reg)
	startWith(t, b, b.store, "g", func(c *ingest.Config) { c.Schemas, c.DecodePending = reg, dec.Nudge })
	kafkatest.Produce(t, b.cl, dlqRecord("orders", nil, f.avroValue(t, "after-restart", 1)))
	waitForCount(t, b.store, 1)
	eventually.True(t, "the record decoded with the cached schema", func() bool {
		return len(findByPath(t, b.store, "customer", "after-restart")) == 1
	})
}

// A restarted process warms its memory with Postgres's schema cache in the
// background (the decoder's start), so that with the registry down a new
// record of a known schema is decoded by ingest itself, never left pending.
func TestRestartedProcessDecodesKnownSchemasAtIngestWithTheRegistryDown(t *testing.T) {
	b := setup(t)
	f := newFixtures(t)
	first := f.registry(t, b.store)
	for _, id := range []int{f.avroID, f.keyID} {
		if _, err := first.Fetch(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	f.reg.SetDown(true)
	asked := f.reg.Requests()
	reg := f.registry(t, b.store) // the restarted process: nothing in memory
	if _, ok := reg.Cached(f.avroID); ok {
		t.Fatal("a new registry holds a schema before warming")
	}
	dec := startDecoder(t, b.store, reg)
	eventually.True(t, "the cached schemas loaded into memory", func() bool {
		_, v := reg.Cached(f.avroID)
		_, k := reg.Cached(f.keyID)
		return v && k
	})
	s := startWith(t, b, b.store, "g", func(c *ingest.Config) { c.Schemas, c.DecodePending = reg, dec.Nudge })
	kafkatest.Produce(t, b.cl, dlqRecord("orders", f.avroKey(t, "k-1"), f.avroValue(t, "after-restart", 1)))
	waitForCount(t, b.store, 1)
	decoded := s.metrics.Schema.Decodes.WithLabelValues("AVRO", "decoded")
	eventually.True(t, "value and key decoded at ingest", func() bool { return counterValue(decoded) == 2 })
	if n := counterValue(s.metrics.Schema.Decodes.WithLabelValues("unknown", "pending")); n != 0 {
		t.Errorf("%v values or keys left pending at ingest, want 0", n)
	}
	got := findByPath(t, b.store, "customer", "after-restart")
	if len(got) != 1 {
		t.Fatalf("%d records found decoded, want 1", len(got))
	}
	r, err := b.store.Get(context.Background(), got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.DecodePending || r.ValueSchema == nil || r.ValueSchema.RegistryID != f.avroID || r.KeySchema == nil || string(r.KeyPayload) != `{"id": "k-1"}` {
		t.Errorf("record: pending %v, value schema %+v, key schema %+v, key payload %s", r.DecodePending, r.ValueSchema, r.KeySchema, r.KeyPayload)
	}
	// Warming never asks the registry (only the down answers of nothing).
	if n := f.reg.Requests() - asked; n != 0 {
		t.Errorf("%d registry requests while it was down, want 0", n)
	}
}

// Warming is bounded: it loads the most recently stored schemas first, up
// to the limit; the others are fetched from Postgres when a record needs
// them.
func TestWarmLoadsTheMostRecentSchemasUpToTheLimit(t *testing.T) {
	b := setup(t)
	f := newFixtures(t)
	first := f.registry(t, b.store)
	for _, id := range []int{f.avroID, f.protoID} { // proto stored last
		if _, err := first.Fetch(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	reg := f.registry(t, b.store)
	n, err := reg.Warm(context.Background(), 1)
	if err != nil || n != 1 {
		t.Fatalf("warm: %d schemas, %v; want 1", n, err)
	}
	if _, ok := reg.Cached(f.protoID); !ok {
		t.Error("the most recently stored schema not loaded")
	}
	if _, ok := reg.Cached(f.avroID); ok {
		t.Error("an older schema loaded beyond the limit")
	}
	if n, err := reg.Warm(context.Background(), 10); err != nil || n != 1 {
		t.Errorf("warm again: %d schemas added, %v; want the 1 not held yet", n, err)
	}
}
