package store_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// nested is a JSON value nested depth levels deep: [[[…1…]]] or {"a":{"a":…1…}}.
func nested(depth int, object bool) []byte {
	open, close := "[", "]"
	if object {
		open, close = `{"a":`, "}"
	}
	return []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
}

// hostileCase is a record shape Postgres refuses, or once refused, as it is.
type hostileCase struct {
	name string
	mod  func(r *dlq.Record)
	// omitted is a substring of the reason the payload is omitted; "" when
	// the record keeps a payload or its value is not JSON.
	omitted string
}

// hostileCases are the records of issue 17 that halted ingest, and their
// relatives.
func hostileCases() []hostileCase {
	mib := 1 << 20
	return []hostileCase{
		{name: "3000-byte key", mod: func(r *dlq.Record) { r.Key = bytes.Repeat([]byte("k"), 3000) }},
		{name: "1 MiB binary key", mod: func(r *dlq.Record) { r.Key = bytes.Repeat([]byte{0, 0xff, 'k'}, mib/3) }},
		{name: "40 KB value nested 20,000 deep", mod: func(r *dlq.Record) { r.Value = nested(20000, false) },
			omitted: "nested more than 1000 levels deep"},
		{name: "objects nested 5,000 deep", mod: func(r *dlq.Record) { r.Value = nested(5000, true) },
			omitted: "nested more than 1000 levels deep"},
		{name: "objects nested 100,000 deep", mod: func(r *dlq.Record) { r.Value = nested(100000, true) },
			omitted: "nested more than 1000 levels deep"},
		{name: "nesting at the limit", mod: func(r *dlq.Record) { r.Value = nested(store.MaxJSONDepth, false) }},
		{name: "brackets in strings are no nesting", mod: func(r *dlq.Record) {
			r.Value = []byte(`{"s":"` + strings.Repeat(`[{\"`, 2000) + `"}`)
		}},
		{name: "1e400", mod: func(r *dlq.Record) { r.Value = []byte(`{"n":1e400}`) }},
		{name: "number beyond numeric", mod: func(r *dlq.Record) { r.Value = []byte(`{"n":1e999999}`) },
			omitted: "value overflows numeric format (SQLSTATE 22003)"},
		{name: "scalar beyond numeric", mod: func(r *dlq.Record) { r.Value = []byte(`-1e131072`) },
			omitted: "value overflows numeric format"},
		{name: `\u0000`, mod: func(r *dlq.Record) { r.Value = []byte(`{"s":"\u0000"}`) }, omitted: `NUL character \u0000`},
		{name: "lone surrogate", mod: func(r *dlq.Record) { r.Value = []byte(`{"s":"\ud800"}`) },
			omitted: "Postgres refused it as jsonb"},
		{name: "lone surrogate deep in an array", mod: func(r *dlq.Record) {
			r.Value = []byte(`[` + strings.Repeat(`"ok",`, 1000) + `["\udc00"]]`)
		}, omitted: "Unicode low surrogate must follow a high surrogate"},
		{name: "binary value with NULs", mod: func(r *dlq.Record) { r.Value = []byte("{\x00\xff\xfe}") }},
		{name: "null key, empty value", mod: func(r *dlq.Record) { r.Key, r.Value = nil, []byte{} }},
		{name: "lone surrogate in error details", mod: func(r *dlq.Record) {
			r.Errors[0].Details = []byte(`{"why":"\ud800"}`)
		}},
		{name: "error details nested 20,000 deep", mod: func(r *dlq.Record) {
			r.Errors[0].Details = []byte(`{"a":` + string(nested(20000, false)) + `}`)
		}},
		{name: "header keys of any bytes", mod: func(r *dlq.Record) {
			r.Headers = []dlq.Header{{Key: "\xff\xfe", Value: []byte("v")}, {Key: "a\x00b", Value: nil},
				{Key: strings.Repeat("h", 100000), Value: bytes.Repeat([]byte{0}, 1000)}}
		}},
		{name: "30,000 headers", mod: func(r *dlq.Record) {
			r.Headers = make([]dlq.Header, 30000)
			for i := range r.Headers {
				r.Headers[i] = dlq.Header{Key: fmt.Sprint(i), Value: []byte{byte(i)}}
			}
		}},
		// Decoding caps these (dlq.MaxNameBytes); at the store boundary the
		// minimal form bounds them.
		{name: "1 MiB type", mod: func(r *dlq.Record) { r.Type = strings.Repeat("t", mib) }, omitted: "minimal form"},
		{name: "1 MiB error type", mod: func(r *dlq.Record) { r.Errors[0].Type = strings.Repeat("é", mib/2) }, omitted: "minimal form"},
		{name: "1 MiB queue", mod: func(r *dlq.Record) { r.Queue = strings.Repeat("q", mib) }, omitted: "minimal form"},
		{name: "incompressible 10 KB type", mod: func(r *dlq.Record) { r.Type = randomText(10000) }, omitted: "minimal form"},
		{name: "1 MiB group and message", mod: func(r *dlq.Record) {
			r.Source.Group = strings.Repeat("g", mib)
			r.Errors[0].Message = strings.Repeat("m", mib)
		}},
	}
}

// Every record of issue 17 is stored, among good ones, with its key, value and
// headers byte for byte; a JSON value jsonb cannot take has no payload and
// says why. Before, each failed its batch for good.
func TestHostileRecordsAreStored(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	cases := hostileCases()
	offset := int64(0)
	{
		var batch []dlq.Record
		for _, c := range cases {
			offset++
			good := newRecord(offset, "orders")
			offset++
			bad := newRecord(offset, "orders")
			c.mod(&bad)
			batch = append(batch, good, bad)
		}
		res, err := s.InsertRecords(ctx, batch)
		if err != nil || res.N != len(batch) {
			t.Fatalf("stored %d of %d: %v", res.N, len(batch), err)
		}
		for i := range batch {
			want := &batch[i]
			c := cases[i/2]
			wantOmitted := ""
			if i%2 == 1 {
				wantOmitted = c.omitted
			}
			checkStored(t, pool, s, want, wantOmitted, fmt.Sprintf("%s (record %d)", c.name, i))
		}
		// The same batch again (a re-consumed batch): every record is a
		// duplicate, none is stored twice, nothing fails.
		res, err = s.InsertRecords(ctx, batch)
		if err != nil || res.N != 0 {
			t.Fatalf("batch again stored %d: %v; want every record a duplicate", res.N, err)
		}
	}
	if n, err := s.Count(ctx, &filter.Filter{}); err != nil || n != 2*int64(len(cases)) {
		t.Fatalf("count = %d, %v; want %d", n, err, 2*len(cases))
	}
}

// checkStored reads back a stored record and compares what must be kept
// byte for byte; omitted is a substring of the expected PayloadOmitted.
func checkStored(t *testing.T, pool *pgxpool.Pool, s *store.Store, want *dlq.Record, omitted, what string) {
	t.Helper()
	got, err := s.Get(context.Background(), want.ID)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) {
		t.Errorf("%s: key not kept byte for byte (%d bytes, want %d)", what, len(got.Key), len(want.Key))
	}
	if !bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) {
		t.Errorf("%s: value not kept byte for byte (%d bytes, want %d)", what, len(got.Value), len(want.Value))
	}
	if len(got.Headers) != len(want.Headers) {
		t.Errorf("%s: %d headers, want %d", what, len(got.Headers), len(want.Headers))
	} else {
		for j, h := range want.Headers {
			if g := got.Headers[j]; g.Key != h.Key || !bytes.Equal(g.Value, h.Value) {
				t.Errorf("%s: header %d = %q=%q, want %q=%q", what, j, cutText(g.Key), g.Value, cutText(h.Key), h.Value)
				break
			}
		}
	}
	var hasPayload bool
	if err := pool.QueryRow(context.Background(), `SELECT payload IS NOT NULL FROM redrive_record WHERE id = $1`, want.ID).Scan(&hasPayload); err != nil {
		t.Fatal(err)
	}
	switch {
	case omitted == "" && got.PayloadOmitted != "":
		t.Errorf("%s: payload omitted: %s", what, got.PayloadOmitted)
	case omitted != "" && !strings.Contains(got.PayloadOmitted, omitted):
		t.Errorf("%s: payload omitted %q, want it to say %q", what, got.PayloadOmitted, omitted)
	case omitted != "" && hasPayload:
		t.Errorf("%s: has a payload and says it has none", what)
	}
}

// randomText is n bytes of random letters and digits.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func cutText(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// A record whose fields are within bounds keeps them; the minimal form
// bounds indexed identifiers only when Postgres refused the record as it was.
func TestMinimalFormBoundsIdentifiers(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	r := newRecord(1, "orders")
	// Random, so that Postgres cannot compress them into an index entry.
	r.Type, r.Errors[0].Type = randomText(10000), "é"+randomText(10000)
	r.Value = []byte(`{"n":1}`)
	res, err := s.InsertRecords(ctx, []dlq.Record{r})
	if err != nil || res.N != 1 {
		t.Fatalf("InsertRecords = %+v, %v", res, err)
	}
	got, err := s.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Type) != 255 || len(got.LastError().Type) != 255 || got.Queue != "orders" {
		t.Errorf("type %d bytes, error type %d bytes, queue %q; want 255, 255, orders",
			len(got.Type), len(got.LastError().Type), got.Queue)
	}
	if !strings.Contains(got.PayloadOmitted, "minimal form") || !strings.Contains(got.PayloadOmitted, "SQLSTATE 54000") {
		t.Errorf("payload omitted = %q; want the minimal form and Postgres's reason", got.PayloadOmitted)
	}
	if reason := res.Degraded(0); !strings.Contains(reason, "minimal form") {
		t.Errorf("Degraded(0) = %q", reason)
	}
	// Searchable by what it was stored as.
	if n, err := s.Count(ctx, &filter.Filter{Type: got.Type, ErrorType: got.LastError().Type}); err != nil || n != 1 {
		t.Errorf("count by bounded type = %d, %v", n, err)
	}
}

// A list's previews read hostile records as a get does: a header key that is
// not UTF-8 byte for byte with its size, and why a payload is omitted.
func TestPreviewsOfHostileRecords(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	r := newRecord(1, "orders")
	r.Headers = []dlq.Header{{Key: "\xff\x00k", Value: []byte("v")}, {Key: "plain", Value: []byte("v")}}
	r.Value = nested(20000, false)
	if _, err := s.InsertRecords(ctx, []dlq.Record{r}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListPreviews(ctx, &store.ListParams{Limit: 10})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("ListPreviews = %v", err)
	}
	p := page.Records[0]
	if h := p.Record.Headers; len(h) != 2 || h[0].Key != "\xff\x00k" || h[1].Key != "plain" {
		t.Errorf("headers = %q", h)
	}
	if len(p.HeaderSizes) != 2 || p.HeaderSizes[0].Key != 3 {
		t.Errorf("header sizes = %+v; want the first key's 3 bytes", p.HeaderSizes)
	}
	if !strings.Contains(p.Record.PayloadOmitted, "nested more than") {
		t.Errorf("payload omitted = %q", p.Record.PayloadOmitted)
	}
}
