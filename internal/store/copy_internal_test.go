package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// pgxRow is a row of a binary COPY stream as pgx encodes vals, the values
// of columns of types oids: the bytes binaryRow must give.
func pgxRow(t *testing.T, types *pgtype.Map, vals []any, oids []uint32, columns []string) []byte {
	t.Helper()
	if len(vals) != len(columns) {
		t.Fatalf("%d values for %d columns", len(vals), len(columns))
	}
	row := binary.BigEndian.AppendUint16(nil, uint16(len(vals)))
	for j, v := range vals {
		enc, err := types.Encode(oids[j], pgtype.BinaryFormatCode, v, []byte{}) // not nil: nil says NULL
		if err != nil {
			t.Fatalf("column %s: Map.Encode(%#v): %v", columns[j], v, err)
		}
		if enc == nil {
			row = binary.BigEndian.AppendUint32(row, math.MaxUint32)
			continue
		}
		row = append(binary.BigEndian.AppendUint32(row, uint32(len(enc))), enc...)
	}
	return row
}

// The COPY path writes a record's rows itself (binaryRow) instead of
// through pgtype.Map.Encode, and the INSERT path collects the same rows as
// pgx arguments (argRow): every value of every row, NULLs included, must
// come out as the bytes Map.Encode gives the argument, for the column's
// type.
func TestBinaryRowsAreWhatPgxEncodes(t *testing.T) {
	t.Parallel()
	types := pgtype.NewMap()
	check := func(what string, write func(rowWriter), oids []uint32, columns []string) {
		t.Helper()
		var args argRow
		write(&args)
		want := pgxRow(t, types, args.vals, oids, columns)
		var w binaryRow
		w.begin([]byte("prefix"), columns)
		write(&w)
		got, err := w.end()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%s: binaryRow = %v\nMap.Encode = %v", what, got[len("prefix"):], want)
		}
	}
	now := time.Date(2026, 11, 26, 10, 11, 12, 123456789, time.FixedZone("x", 3600))
	before := time.Date(1969, 7, 20, 20, 17, 40, 999999, time.UTC) // before 1970 and 2000: truncation of negative offsets
	next, until := now.Add(time.Minute), now.Add(time.Hour)
	records := []dlq.Record{
		{ // as ingest stores a fresh failure
			ID: dlq.NewID(testdate.Now()), Queue: "orders", Type: "order.created", State: dlq.StateRetryable,
			Attempt: 1, MaxAttempts: 3, Fingerprint: "fp",
			Source: dlq.Source{Topic: "orders", Partition: 2, Offset: 40, Timestamp: now, Group: "billing"},
			DLQ:    dlq.Coord{Topic: "dead_letter_queue", Partition: 1, Offset: math.MaxInt64, Timestamp: before},
			Format: dlq.FormatRedrive, Key: []byte("k"), Value: []byte(`{"id":1}`),
			Headers: []dlq.Header{{Key: "traceparent", Value: []byte("00-abc")}, {Key: "bin\x00", Value: []byte{0, 0xff}}},
			Errors: []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Message: "bad\x00byte", Code: dlq.CodeRetry, OccurredAt: now,
				Backtrace: []string{"main.f()", "bad\xffframe"}, Details: json.RawMessage(`{"n":1e999999}`)}},
			Retry: []byte(`{"max_attempts":3}`), Meta: []byte(`{"a":"b"}`),
			CreatedAt: now, UpdatedAt: now, EnqueuedAt: &now, NextRetryAt: &next,
			ValueSchema: &dlq.SchemaRef{RegistryID: 7, Type: "AVRO", Subject: "orders-value"}, Payload: []byte(`{"id":1}`),
			KeySchema: &dlq.SchemaRef{RegistryID: 8}, KeyPayload: []byte(`"k"`), DecodeError: "value: oops", DecodePending: true,
		},
		{ // nothing known: zero times, no key, value or history, a discarded record
			ID: dlq.NewID(testdate.Now()), Queue: "q", State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard,
			Attempt: math.MaxInt32, MaxAttempts: -1, DLQ: dlq.Coord{Topic: "dlq", Partition: -1, Offset: -1},
			Format: dlq.FormatUnparseable, DiscardedAt: &until, CompletedAt: &before,
		},
		{ // a value that is not JSON, a completed record
			ID: dlq.NewID(testdate.Now()), Queue: "q", State: dlq.StateCompleted, Value: []byte("not json \xff"),
			Key: []byte{}, CreatedAt: before, UpdatedAt: before, CompletedAt: &now, Format: dlq.FormatSpring,
		},
	}
	for _, mode := range []jsonMode{asJSONUnchecked, asJSON, asText, asMinimal} {
		for i := range records {
			r := &records[i]
			id, err := recordID(r)
			if err != nil {
				t.Fatal(err)
			}
			check("data", func(w rowWriter) {
				if err := writeDataRow(w, r, id, mode, "why"); err != nil {
					t.Fatal(err)
				}
			}, dataOIDs, dataColumns)
			check("lifecycle", func(w rowWriter) { writeLifecycleRow(w, r, id, mode) }, lifecycleOIDs, lifecycleColumns)
			check("coord", func(w rowWriter) { writeCoordRow(w, r, id) }, coordOIDs, coordColumns)
		}
	}
	if got := records[0].Errors[0].Backtrace[1]; got != "bad\xffframe" {
		t.Errorf("writing a row changed the record's backtrace to %q", got)
	}
	// The edges: ints at int4's and int8's, NULLs of every type.
	check("edge", func(w rowWriter) {
		w.int4(math.MinInt32)
		w.int4(math.MaxInt32)
		w.int8(math.MinInt64)
		w.int8(math.MaxInt64)
		w.uuid(pgtype.UUID{})
		w.bytea(nil)
		w.bytea([]byte{})
		w.jsonb(nil)
		w.boolean(false)
		w.null()
	}, []uint32{pgtype.Int4OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.UUIDOID, pgtype.ByteaOID,
		pgtype.ByteaOID, pgtype.JSONBOID, pgtype.BoolOID, pgtype.TextOID},
		[]string{"min int4", "max int4", "min int8", "max int8", "null uuid", "nil bytea", "empty bytea", "nil jsonb", "false", "null"})

	// An int beyond int4 fails the row, naming its column, as pgx refuses it.
	var w binaryRow
	w.begin(nil, []string{"attempt"})
	w.int4(math.MaxInt32 + 1)
	if _, err := w.end(); err == nil || !strings.Contains(err.Error(), "attempt") {
		t.Errorf("an int beyond int4: %v; want an error naming the column", err)
	}
	if _, err := types.Encode(pgtype.Int4OID, pgtype.BinaryFormatCode, math.MaxInt32+1, nil); err == nil {
		t.Error("pgx encodes an int beyond int4")
	}
	// A row short of a value, or with one too many, fails.
	for _, n := range []int{1, 3} {
		w.begin(nil, []string{"a", "b"})
		for range n {
			w.null()
		}
		if _, err := w.end(); err == nil {
			t.Errorf("a row of 2 columns given %d values was encoded", n)
		}
	}
}

// The headers column is written by hand: it must be the JSON json.Marshal
// gives of the storedHeaders (the same jsonb once Postgres parses it), and
// read back as the headers it was made of, whatever bytes their keys and
// values hold.
func TestEncodeHeadersIsTheMarshalledJSON(t *testing.T) {
	t.Parallel()
	for _, hs := range [][]dlq.Header{
		nil,
		{{Key: "traceparent", Value: []byte("00-abc")}},
		{{Key: "bin\x00", Value: []byte{0, 0xff}}, {Key: "\xff\xfe", Value: nil}, {Key: "", Value: []byte{}}},
		{{Key: `q"uo\te<>&` + "\n\r\t\x01\u2028", Value: []byte(`{"json":"in a header"}` + "\x7f\u00e9\U0001F600")}},
	} {
		got := appendHeaders([]byte("prefix"), hs)[len("prefix"):]
		stored := make([]storedHeader, len(hs))
		for i, h := range hs {
			v, enc := EncodeBytes(h.Value)
			stored[i] = storedHeader{Key: h.Key, Value: v, Encoding: enc}
			if clean(h.Key) != h.Key {
				stored[i].Key, stored[i].KeyEncoding = EncodeBytes([]byte(h.Key))
			}
		}
		want, _ := json.Marshal(stored)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%q is not JSON: %v", got, err)
		}
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("appendHeaders = %s, json.Marshal = %s", got, want)
		}
		back, err := decodeHeaders(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(back) != len(hs) {
			t.Fatalf("read back %d headers of %d", len(back), len(hs))
		}
		for i := range hs {
			if back[i].Key != hs[i].Key || !bytes.Equal(back[i].Value, hs[i].Value) {
				t.Errorf("header %d read back as %q=%q, want %q=%q", i, back[i].Key, back[i].Value, hs[i].Key, hs[i].Value)
			}
		}
	}
}

// A table's COPY stream, encoded row by row as pgconn reads it in pieces,
// is exactly the stream one slice would hold: rows smaller and larger than
// a read, of all records or of some; a huge row's buffer is not kept; and
// a record that does not encode ends the stream with an error naming it.
func TestRowReadersStreamWhatOneSliceHolds(t *testing.T) {
	t.Parallel()
	record := func(i, size int) dlq.Record {
		now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
		return dlq.Record{ID: dlq.NewID(testdate.Now()), Queue: "orders", State: dlq.StateRetryable, Attempt: 1,
			DLQ: dlq.Coord{Topic: "dlq", Offset: int64(i)}, Format: dlq.FormatRedrive, Key: []byte("k"),
			Value: bytes.Repeat([]byte{byte('a' + i%26)}, size), CreatedAt: now, UpdatedAt: now, NextRetryAt: &now}
	}
	// What one slice holds: each table's stream, pgx's encoding of the
	// values the INSERT path gives.
	whole := func(t *testing.T, records []dlq.Record) map[copyTable][]byte {
		t.Helper()
		types := pgtype.NewMap()
		data, lifecycle, coord := bytes.Clone(copyHeader), bytes.Clone(copyHeader), bytes.Clone(copyHeader)
		for i := range records {
			vals, err := rowValues(&records[i], asJSONUnchecked, "")
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, pgxRow(t, types, vals, dataOIDs, dataColumns)...)
			lifecycle = append(lifecycle, pgxRow(t, types, lifecycleValues(&records[i], vals[0].(pgtype.UUID), asJSONUnchecked), lifecycleOIDs, lifecycleColumns)...)
			coord = append(coord, pgxRow(t, types, coordValues(vals), coordOIDs, coordColumns)...)
		}
		end := []byte{0xFF, 0xFF}
		return map[copyTable][]byte{dataTable: append(data, end...), lifecycleTable: append(lifecycle, end...), coordTable: append(coord, end...)}
	}
	read := func(r io.Reader) ([]byte, error) {
		var out []byte
		buf := make([]byte, 65531) // pgconn reads a COPY in pieces of 64 KiB less its header
		for {
			n, err := r.Read(buf)
			out = append(out, buf[:n]...)
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
		}
	}
	check := func(t *testing.T, records []dlq.Record, idx []int) {
		t.Helper()
		picked := records
		if idx != nil {
			picked = nil
			for _, i := range idx {
				picked = append(picked, records[i])
			}
		}
		want := whole(t, picked)
		for _, table := range []copyTable{coordTable, lifecycleTable, dataTable} {
			got, err := read(newRowReader(newEncoder(), records, idx, table, asJSONUnchecked))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want[table]) {
				t.Fatalf("table %d: %d bytes streamed, want the %d of one slice", table, len(got), len(want[table]))
			}
		}
	}

	// Rows smaller and larger than a read, one of exactly a read.
	big := []dlq.Record{record(0, 10), record(1, 65531-3), record(2, 3*65531+7), record(3, 65531), record(4, 1000)}
	check(t, big, nil)
	check(t, big, []int{4, 1, 2})
	var ordinary []dlq.Record
	for i := range 300 {
		ordinary = append(ordinary, record(i, 1000+i%7))
	}
	check(t, ordinary, nil)
	check(t, nil, nil)

	// A row of more than keepRow leaves no buffer that size behind.
	r := newRowReader(newEncoder(), []dlq.Record{record(7, 2*keepRow), record(8, 10)}, nil, dataTable, asJSONUnchecked)
	if _, err := read(r); err != nil {
		t.Fatal(err)
	}
	if cap(r.buf) > keepRow {
		t.Fatalf("the reader keeps a buffer of %d bytes; want at most %d", cap(r.buf), keepRow)
	}

	bad := []dlq.Record{record(0, 10), record(1, 10)}
	bad[1].ID = "not-a-uuid"
	if _, err := read(newRowReader(newEncoder(), bad, nil, dataTable, asJSONUnchecked)); err == nil || !strings.Contains(err.Error(), "not-a-uuid") {
		t.Fatalf("streaming a record whose id is no UUID: %v; want an error naming it", err)
	}
}
