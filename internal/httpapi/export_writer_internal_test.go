package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/records"
)

// marshalExportLine is an export's line as exports wrote it before lines
// were streamed: exportLine, with the key, value and payloads as the record
// shows them, encoded whole by an encoder that leaves HTML unescaped, the
// value's text escaped by json.Marshal.
func marshalExportLine(t *testing.T, r *dlq.Record, masked bool) []byte {
	t.Helper()
	out := toRecordJSON(r, true)
	head, middle, tail := toExportParts(r, out)
	head.Masked = masked
	l := exportLine{exportHead: head, Key: out.Key, KeyEncoding: out.KeyEncoding, exportMiddle: middle, exportTail: tail}
	l.Value, l.ValueEncoding = json.RawMessage("null"), nil
	if out.Value != nil {
		var c bytes.Buffer
		if *out.ValueEncoding == records.EncodingUTF8 && json.Valid([]byte(*out.Value)) &&
			json.Compact(&c, []byte(*out.Value)) == nil && c.String() == *out.Value {
			e := encodingJSON
			l.Value, l.ValueEncoding = json.RawMessage(*out.Value), &e
		} else {
			l.Value, _ = json.Marshal(*out.Value)
			l.ValueEncoding = out.ValueEncoding
		}
	}
	if r.ValueSchema != nil {
		l.Payload = out.Payload
	}
	if r.KeySchema != nil {
		l.KeyPayload = out.KeyPayload
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The lines the export streams, the key, value and payloads written as
// they are encoded, are byte for byte the lines it wrote when it encoded
// each whole: text values of every escape (quotes, backslashes, control
// characters, <, > and &, U+2028), compact and indented JSON, binary and
// empty values, null keys and tombstones, schema-decoded payloads as jsonb
// gives them back (with spaces), binary header keys; and random bytes.
func TestExportWriterWritesWhatMarshalWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 2, 13, 10, 0, 0, 123456000, time.UTC)
	base := dlq.Record{ID: "01a216b3-20bc-7b00-bef0-53ac0fddf976", Queue: "orders", Type: "order<v1>&", State: dlq.StateDiscarded,
		Exhaustion: dlq.ExhaustionDeadLetter, Attempt: 2, MaxAttempts: 5, Format: dlq.FormatRedrive,
		Source:  dlq.Source{Topic: "orders", Partition: 1, Offset: 7, Timestamp: at, Group: "g"},
		DLQ:     dlq.Coord{Topic: "dead_letter_queue", Offset: 9, Timestamp: at},
		Headers: []dlq.Header{{Key: "tenant<&>", Value: []byte("a\u2028b")}, {Key: "bin\xff\x00", Value: []byte{0, 1, 0xfe}}},
		Errors: []dlq.ErrorEntry{{Attempt: 2, Type: "db.timeout", Message: "<boom> & \"quoted\"", Code: dlq.CodeRetry,
			Backtrace: []string{"at x.go:1"}, Details: json.RawMessage(`{"sql": "SELECT 1"}`), OccurredAt: at}},
		Retry: json.RawMessage(`{"max_attempts": 5}`), Meta: json.RawMessage(`{"note": "<m>"}`), Fingerprint: "796cd7c7f5f0a245",
		CreatedAt: at, UpdatedAt: at, DiscardedAt: &at}
	values := [][]byte{
		nil, {}, []byte(`{"sku":"A-1","n":12345678901234567890.5,"s":"<b>&\u2028\"\\"}`),
		[]byte("{\n  \"indented\": [1, 2.50]\n}\n"), []byte(`"a JSON string"`), []byte(`42`),
		[]byte("text: \"q\" \\ \b\f\n\r\t\x01\x1f\x7f <tag> & \u2028\u2029 é 😀"),
		{0, 1, 2, 0xff, 0xfe, '\n'}, []byte("\xff not UTF-8"), []byte("nul\x00inside"), []byte(" {} "), []byte(`{"a" :1}`),
	}
	keys := [][]byte{nil, {}, []byte("key <&> \"q\" \u2028"), {0xde, 0xad}, []byte("é\t")}
	var recs []dlq.Record
	for i, v := range values {
		r := base
		r.Value, r.Key = v, keys[i%len(keys)]
		recs = append(recs, r)
	}
	schema := base
	schema.Value = []byte{0, 0, 0, 0, 42, 2, 'h', 'i'}
	schema.ValueSchema = &dlq.SchemaRef{RegistryID: 42, Type: "AVRO", Subject: "orders-value"}
	schema.Payload = json.RawMessage(`{"name": "h i", "q": "a \" b", "list": [1, 2, {"x": null}], "esc": "\\\\ "}`)
	schema.KeySchema = &dlq.SchemaRef{RegistryID: 7, Type: "JSON"}
	schema.KeyPayload = json.RawMessage(`[ "k" , 1 ]`)
	recs = append(recs, schema)
	rng := rand.New(rand.NewPCG(44, 4))
	alphabet := []byte("ab\"\\<>&{}[]:, \n\t\x00\x01\x7f\xe2\x80\xa8\xc3\xa9\xff")
	for range 500 {
		r := base
		r.Value = make([]byte, rng.IntN(40))
		for i := range r.Value {
			r.Value[i] = alphabet[rng.IntN(len(alphabet))]
		}
		r.Key = r.Value[:len(r.Value)/2]
		recs = append(recs, r)
	}
	for i := range recs {
		r := &recs[i]
		want := marshalExportLine(t, r, i%2 == 0)
		var got bytes.Buffer
		w := newExportWriter(&got)
		if err := w.line(r, i%2 == 0, true); err != nil {
			t.Fatal(err)
		}
		if err := w.bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("record %d (value %q, key %q):\n got %s\nwant %s", i, r.Value, r.Key, got.Bytes(), want)
		}
	}

	// A payload that is not JSON writes nothing of its line.
	bad := schema
	bad.Payload = json.RawMessage(`{"cut":`)
	var got bytes.Buffer
	w := newExportWriter(&got)
	var encErr *exportEncodeError
	if err := w.line(&bad, false, true); !errors.As(err, &encErr) {
		t.Fatalf("a payload that is not JSON: %v, want an exportEncodeError", err)
	}
	if w.bw.Flush(); got.Len() != 0 {
		t.Errorf("a line that could not be encoded wrote %q", got.Bytes())
	}
}
