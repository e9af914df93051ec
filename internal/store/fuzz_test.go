package store_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// maxMessageBytes is the broker's default max.message.bytes: no record a
// DLQ topic holds is larger, key, value and headers together.
const maxMessageBytes = 1 << 20

// Grown fields of FuzzInsert: which part of the record the fuzzer's size
// goes to.
const (
	growKey = iota
	growValue
	growNested       // the value becomes JSON nested size levels deep
	growNestedObject // the same with objects
	growHeaders      // size headers
	growHeaderKey
	growType
	growErrorType
	growMessage
	growDetails // error details nested size levels deep
	growQueue
	growFields
)

// FuzzInsert stores records of every size and shape a DLQ topic can hold
// (up to the broker's default 1 MiB message size: binary keys, values and
// headers, invalid UTF-8, NULs, deep JSON, huge numbers, many and long
// headers, long types, error types, messages and details) and checks that
// every one is stored, with key, value and headers
// byte for byte, and that storing it again is a duplicate, not an error:
// no input can stop ingest.
func FuzzInsert(f *testing.F) {
	pool := pgtest.New(f)
	s := store.New(pool)
	var offset atomic.Int64
	f.Add([]byte("k"), []byte(`{"id":1}`), "traceparent", []byte("00-abc"), "order.created", "db.down", "boom", []byte(`{"a":1}`), uint32(0), uint8(growKey))
	f.Add([]byte("k"), []byte("1"), "h", []byte{0}, "t", "e", "m", []byte(nil), uint32(3000), uint8(growKey))
	f.Add([]byte{0xff}, []byte("1"), "h", []byte{0}, "t", "e", "m", []byte(nil), uint32(maxMessageBytes-64), uint8(growKey))
	f.Add([]byte("k"), []byte("1"), "h", []byte{0}, "t", "e", "m", []byte(nil), uint32(20000), uint8(growNested))
	f.Add([]byte("k"), []byte("1"), "h", []byte{0}, "t", "e", "m", []byte(nil), uint32(5000), uint8(growNestedObject))
	f.Add([]byte("k"), []byte(`{"n":1e400}`), "h", []byte{0}, "t", "e", "m", []byte(nil), uint32(0), uint8(growValue))
	f.Add([]byte("k"), []byte(`{"n":1e999999}`), "h", []byte{0}, "t", "e", "m", []byte(`{"n":-1e999999}`), uint32(0), uint8(growValue))
	f.Add([]byte("k"), []byte(`{"s":"\u0000"}`), "\x00", []byte{0}, "t\x00", "e\xff", "m\x00", []byte(`{"s":"\u0000"}`), uint32(0), uint8(growValue))
	f.Add([]byte("k"), []byte(`["\ud800"]`), "\xff", []byte{0xff}, "t", "e", "m", []byte(`{"s":"\udc00"}`), uint32(0), uint8(growValue))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "e", "m", []byte(nil), uint32(60000), uint8(growHeaders))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "e", "m", []byte(nil), uint32(500000), uint8(growHeaderKey))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "e", "m", []byte(nil), uint32(100000), uint8(growType))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "é", "m", []byte(nil), uint32(100000), uint8(growErrorType))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "e", "m", []byte(nil), uint32(900000), uint8(growMessage))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "e", "m", []byte(nil), uint32(30000), uint8(growDetails))
	f.Add([]byte("k"), []byte("v"), "h", []byte("v"), "t", "e", "m", []byte(nil), uint32(100000), uint8(growQueue))
	f.Fuzz(func(t *testing.T, key, value []byte, headerKey string, headerValue []byte, typ, errType, message string, details []byte,
		size uint32, shape uint8) {
		r := newRecord(offset.Add(1), "orders")
		r.Key, r.Value, r.Type = key, value, typ
		r.Headers = []dlq.Header{{Key: headerKey, Value: headerValue}}
		r.Errors[0].Type, r.Errors[0].Message, r.Errors[0].Details = errType, message, details
		n := int(size % maxMessageBytes)
		grow(&r, shape%growFields, n, randomText(max(n, 1)))
		res, err := s.InsertRecords(context.Background(), []dlq.Record{r})
		if err != nil || res.N != 1 {
			t.Fatalf("stored %d: %v", res.N, err)
		}
		got, err := s.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Key, r.Key) || (got.Key == nil) != (r.Key == nil) {
			t.Fatalf("key not kept byte for byte: %d bytes, want %d", len(got.Key), len(r.Key))
		}
		if !bytes.Equal(got.Value, r.Value) || (got.Value == nil) != (r.Value == nil) {
			t.Fatalf("value not kept byte for byte: %d bytes, want %d", len(got.Value), len(r.Value))
		}
		if len(got.Headers) != len(r.Headers) {
			t.Fatalf("%d headers, want %d", len(got.Headers), len(r.Headers))
		}
		for i, h := range r.Headers {
			if g := got.Headers[i]; g.Key != h.Key || !bytes.Equal(g.Value, h.Value) {
				t.Fatalf("header %d = %q=%q, want %q=%q", i, cutText(g.Key), g.Value, cutText(h.Key), h.Value)
			}
		}
		// Consumed again: a duplicate.
		if res, err := s.InsertRecords(context.Background(), []dlq.Record{r}); err != nil || res.N != 0 {
			t.Fatalf("stored again: %d, %v; want a duplicate", res.N, err)
		}
	})
}

// grow makes one part of r n bytes (or levels, or headers) large; random is
// n bytes of incompressible text, so that Postgres cannot shrink it into an
// index entry.
func grow(r *dlq.Record, field uint8, n int, random string) {
	switch field {
	case growKey:
		r.Key = append(r.Key, random[:n]...)
	case growValue:
		r.Value = append(r.Value, random[:n]...)
	case growNested:
		r.Value = nested(n/2, false)
	case growNestedObject:
		r.Value = nested(n/6, true)
	case growHeaders:
		r.Headers = make([]dlq.Header, n/16+1)
		for i := range r.Headers {
			r.Headers[i] = dlq.Header{Key: random[i%len(random) : i%len(random)+1], Value: []byte{byte(i)}}
		}
	case growHeaderKey:
		r.Headers[0].Key += random[:n]
	case growType:
		r.Type += random[:n]
	case growErrorType:
		r.Errors[0].Type += random[:n]
	case growMessage:
		r.Errors[0].Message += random[:n]
	case growDetails:
		r.Errors[0].Details = []byte(`{"d":` + string(nested(n/2, false)) + `}`)
	case growQueue:
		r.Queue += strings.ToUpper(random[:n])
	}
}
