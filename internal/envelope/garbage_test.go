package envelope

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

var knownFormats = map[dlq.Format]bool{
	dlq.FormatRedrive: true, dlq.FormatSpring: true, dlq.FormatConnect: true, dlq.FormatStreams: true,
	dlq.FormatShareGroup: true, dlq.FormatWatermill: true, dlq.FormatJSON: true, dlq.FormatUnparseable: true,
}

// checkInvariants asserts what Decode promises for any input: a known format,
// the DLQ coordinates and (unless JSON-wrapped) the key and value untouched,
// and only storable values.
func checkInvariants(t testing.TB, rec *kgo.Record, f dlq.Failure) {
	t.Helper()
	if !knownFormats[f.Format] {
		t.Fatalf("Format = %q", f.Format)
	}
	if f.DLQ != (dlq.Coord{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp}) {
		t.Fatalf("DLQ = %+v, record at %s/%d/%d", f.DLQ, rec.Topic, rec.Partition, rec.Offset)
	}
	if f.Format != dlq.FormatJSON {
		if !sameBytes(f.Key, rec.Key) || !sameBytes(f.Value, rec.Value) {
			t.Fatalf("%s: key/value changed: %q/%q from %q/%q", f.Format, f.Key, f.Value, rec.Key, rec.Value)
		}
	}
	if f.Format == dlq.FormatUnparseable {
		if f.Source.Topic != "" || f.Error.Type != dlq.ErrorTypeUnparseable || len(f.Headers) != len(rec.Headers) {
			t.Fatalf("unparseable: topic %q type %q headers %d of %d", f.Source.Topic, f.Error.Type, len(f.Headers), len(rec.Headers))
		}
	} else {
		if f.Source.Topic == "" {
			t.Fatalf("%s: empty source topic", f.Format)
		}
		for _, h := range f.Headers {
			if strings.HasPrefix(h.Key, HeaderPrefix) {
				t.Fatalf("%s: envelope header %q left in Headers", f.Format, h.Key)
			}
		}
	}
	for what, s := range map[string]string{
		"Source.Topic": f.Source.Topic, "Source.Group": f.Source.Group, "Type": f.Type,
		"Error.Type": f.Error.Type, "RecordID": f.RecordID,
	} {
		checkText(t, what, s, maxNameBytes)
	}
	checkText(t, "Error.Message", f.Error.Message, maxTextBytes)
	total := 0
	for _, l := range f.Error.Backtrace {
		checkText(t, "Error.Backtrace", l, maxTextBytes)
		total += len(l) + 1
	}
	if total > maxTextBytes+1 {
		t.Fatalf("backtrace has %d bytes", total)
	}
	if f.Error.Type == "" || !f.Error.Code.Valid() || f.Error.Attempt < 1 || f.Attempt < 0 {
		t.Fatalf("error entry %+v", f.Error)
	}
	if f.Source.Partition < -1 || f.Source.Offset < -1 {
		t.Fatalf("source %+v", f.Source)
	}
	for what, ts := range map[string]time.Time{"Source.Timestamp": f.Source.Timestamp, "Error.OccurredAt": f.Error.OccurredAt} {
		if !ts.IsZero() && !validTime(ts) {
			t.Fatalf("%s = %v", what, ts)
		}
	}
	for what, raw := range map[string]json.RawMessage{"Error.Details": f.Error.Details, "Retry": f.Retry} {
		if raw == nil {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil || bytes.Contains(raw, []byte(`\u0000`)) {
			t.Fatalf("%s = %s is not a storable JSON object (%v)", what, raw, err)
		}
	}
	if _, err := json.Marshal(f.Error); err != nil {
		t.Fatalf("error entry does not marshal: %v", err)
	}
}

func checkText(t testing.TB, what, s string, max int) {
	t.Helper()
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 || len(s) > max {
		t.Fatalf("%s is not storable text (%d bytes): %q", what, len(s), truncate(s, 200))
	}
}

func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

func TestDecodeGarbage(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	badUTF8 := "caf\xc3\x28 \xff\xfe\x00nul"
	tests := []struct {
		name    string
		key     []byte
		value   []byte
		headers []kgo.RecordHeader
		check   func(t *testing.T, f dlq.Failure)
	}{
		{
			name:    "huge native headers are capped",
			value:   []byte("v"),
			headers: hdr(HeaderSourceTopic, "orders", HeaderErrorType, huge, HeaderErrorMessage, huge, HeaderErrorBacktrace, huge, HeaderErrorDetails, `{"a":"`+huge+`"}`, HeaderType, huge),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if f.Format != dlq.FormatRedrive || len(f.Error.Type) > maxNameBytes || len(f.Error.Message) > maxTextBytes {
					t.Fatalf("format %q topic %d bytes message %d bytes", f.Format, len(f.Source.Topic), len(f.Error.Message))
				}
				if !strings.HasSuffix(f.Error.Message, truncatedMark) {
					t.Fatalf("truncated message not marked")
				}
				if !bytes.Contains(f.Error.Details, []byte(DetailRawDetails)) {
					t.Fatalf("oversized details should be kept as raw text, got %.80s", f.Error.Details)
				}
			},
		},
		{
			name:    "huge spring stacktrace",
			headers: hdr("kafka_dlt-original-topic", "orders", "kafka_dlt-exception-stacktrace", strings.Repeat("\tat a.b.C.d(C.java:1)\n", 50000)),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if f.Format != dlq.FormatSpring || len(f.Error.Backtrace) == 0 {
					t.Fatalf("format %q, %d backtrace lines", f.Format, len(f.Error.Backtrace))
				}
			},
		},
		{
			name:    "invalid utf-8 and NUL everywhere",
			key:     []byte(badUTF8),
			value:   []byte(badUTF8),
			headers: hdr(HeaderSourceTopic, badUTF8, HeaderSourceGroup, badUTF8, HeaderErrorType, badUTF8, HeaderErrorMessage, badUTF8, HeaderErrorBacktrace, badUTF8, "type", badUTF8),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				// A source topic that is no topic name is not stored mangled:
				// the record is kept raw, and the message says why.
				if f.Format != dlq.FormatUnparseable || f.Source.Topic != "" || f.Error.Type != dlq.ErrorTypeUnparseable ||
					!strings.Contains(f.Error.Message, "source topic") || !strings.Contains(f.Error.Message, "may only contain") {
					t.Fatalf("got format %s, topic %q, error %+v", f.Format, f.Source.Topic, f.Error)
				}
			},
		},
		{
			name:    "a source topic longer than Kafka allows is kept raw",
			value:   []byte("v"),
			headers: hdr(HeaderSourceTopic, huge),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if f.Format != dlq.FormatUnparseable || len(f.Error.Message) > maxTextBytes+300 {
					t.Fatalf("format %q, message %d bytes", f.Format, len(f.Error.Message))
				}
			},
		},
		{
			name:    "NUL escapes in JSON details and retry",
			headers: hdr(HeaderSourceTopic, "t", HeaderErrorDetails, `{"a\u0000":"b\u0000c","n":12345678901234567890}`, HeaderRetry, `{"x":"\u0000"}`),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if !jsonEqual(f.Error.Details, []byte(`{"a":"bc","n":12345678901234567890}`)) || !jsonEqual(f.Retry, []byte(`{"x":""}`)) {
					t.Fatalf("details %s retry %s", f.Error.Details, f.Retry)
				}
				if !bytes.Contains(f.Error.Details, []byte("12345678901234567890")) {
					t.Fatalf("big number lost precision: %s", f.Error.Details)
				}
			},
		},
		{
			name:    "spring truncated and oversized binary numbers",
			headers: hdr("kafka_dlt-original-topic", "t", "kafka_dlt-original-partition", "\x00\x00\x01", "kafka_dlt-original-offset", "\xff\xff\xff\xff\xff\xff\xff\xff", "kafka_dlt-original-timestamp", "\x7f\xff\xff\xff\xff\xff\xff\xff"),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if f.Source.Partition != -1 || f.Source.Offset != -1 || !f.Source.Timestamp.IsZero() {
					t.Fatalf("source = %+v", f.Source)
				}
			},
		},
		{
			name:    "spring negative partition",
			headers: hdr("kafka_dlt-original-topic", "t", "kafka_dlt-original-partition", be32(-7), "kafka_dlt-original-offset", be32(12)),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if f.Source.Partition != -1 || f.Source.Offset != 12 {
					t.Fatalf("source = %+v", f.Source)
				}
			},
		},
		{
			name:  "json-looking garbage: truncated",
			value: []byte(`{"original_topic":"orders","event":{"id":`),
			check: wantFormat(dlq.FormatUnparseable),
		},
		{
			name:  "json-looking garbage: wrong types",
			value: []byte(`{"original_topic":5,"event":[],"error":{}}`),
			check: wantFormat(dlq.FormatUnparseable),
		},
		{
			name:  "json-looking garbage: deep nesting",
			value: []byte(`{"original_topic":"t","event":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`),
			check: wantFormat(dlq.FormatUnparseable),
		},
		{
			name:  "json-looking garbage: queue_name without original_job",
			value: []byte(`{"queue_name":"q","error":"x"}`),
			check: wantFormat(dlq.FormatUnparseable),
		},
		{
			name:  "json with odd field types still decodes",
			value: []byte(`{"original_topic":"t","event":"x","error":42,"error_type":["a"],"failed_at":-5,"original_partition":1e99,"original_offset":"abc","stack_trace":{"k":1}}`),
			check: func(t *testing.T, f dlq.Failure) {
				t.Helper()
				if f.Format != dlq.FormatJSON || f.Error.Message != "42" || f.Error.Type != ErrorTypeUnknown || f.Source.Partition != -1 || f.Source.Offset != -1 {
					t.Fatalf("got %+v", f)
				}
			},
		},
		{
			name:  "empty record",
			check: wantFormat(dlq.FormatUnparseable),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := dlqRecord(tt.key, tt.value, tt.headers)
			f := Decode(rec)
			checkInvariants(t, rec, f)
			tt.check(t, f)
		})
	}
}

func wantFormat(want dlq.Format) func(*testing.T, dlq.Failure) {
	return func(t *testing.T, f dlq.Failure) {
		t.Helper()
		if f.Format != want {
			t.Fatalf("Format = %q, want %q", f.Format, want)
		}
	}
}

// TestDecodeRandom throws random bytes, mixed with real header names, at Decode.
func TestDecodeRandom(t *testing.T) {
	t.Parallel()
	names := []string{
		HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderSourceTimestamp, HeaderErrorType,
		HeaderErrorCode, HeaderErrorDetails, HeaderFailedAt, HeaderRetry, HeaderID, HeaderAttempt,
		springTopic, springPartition, springOffset, springTimestamp, springExceptionFQCN, springCauseFQCN,
		connectTopic, connectPartition, streamsTopic, streamsException, shareTopic, shareDeliveryCount,
		watermillTopic, "type", "ce_type", "random",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randBytes := func(max int) []byte {
		if rng.IntN(8) == 0 {
			return nil
		}
		b := make([]byte, rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	for i := 0; i < 5000; i++ {
		var hs []kgo.RecordHeader
		for n := rng.IntN(8); n > 0; n-- {
			hs = append(hs, kgo.RecordHeader{Key: names[rng.IntN(len(names))], Value: randBytes(40)})
		}
		value := randBytes(64)
		if rng.IntN(4) == 0 {
			value = []byte(`{"original_topic":"t","error":` + string(randBytes(20)) + `}`)
		}
		rec := &kgo.Record{
			Topic: "dlq", Partition: int32(rng.IntN(10)), Offset: rng.Int64N(1 << 40),
			Timestamp: time.UnixMilli(rng.Int64N(1<<45) - 1<<40), Key: randBytes(16), Value: value, Headers: hs,
		}
		checkInvariants(t, rec, Decode(rec))
	}
}
