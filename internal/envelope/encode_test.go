package envelope

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// sourceRecord is a record as the failing consumer saw it.
func sourceRecord(hs []kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{
		Topic: "orders", Partition: 3, Offset: 1042, Timestamp: origTime,
		Key: []byte("order-17"), Value: []byte{0x00, 0x02, 'a', 0xff}, Headers: hs,
	}
}

// asRead turns a produced envelope into the record a DLQ consumer reads.
func asRead(env *kgo.Record) *kgo.Record {
	r := *env
	r.Partition, r.Offset, r.Timestamp = 1, 500, dlqTime
	return &r
}

func TestEncodeHeaders(t *testing.T) {
	t.Parallel()
	src := sourceRecord(hdr("traceparent", "00-a", "type", "order.created"))
	failedAt := time.Date(2026, 2, 13, 10, 4, 59, 987654321, time.FixedZone("CET", 3600))
	env := Encode(src, FailureInfo{
		DLQTopic:  "dead_letter_queue",
		Group:     "billing",
		Type:      "order.created",
		ErrorType: "db.connection_refused",
		Message:   "connection refused",
		Code:      dlq.CodeDiscard,
		Backtrace: []string{"main.handle (billing.go:42)", "main.loop (main.go:7)"},
		Details:   json.RawMessage(`{"host":"db1"}`),
		Retry:     json.RawMessage(`{"max_attempts":3}`),
		FailedAt:  failedAt,
	})
	if env.Topic != "dead_letter_queue" || &env.Key[0] != &src.Key[0] || &env.Value[0] != &src.Value[0] {
		t.Fatalf("envelope topic %q, key and value must be the source's", env.Topic)
	}
	if !env.Timestamp.IsZero() {
		t.Errorf("Timestamp = %v, want zero for the producer to stamp", env.Timestamp)
	}
	want := hdr(
		"traceparent", "00-a",
		"type", "order.created",
		HeaderSourceTopic, "orders",
		HeaderSourcePartition, "3",
		HeaderSourceOffset, "1042",
		HeaderSourceTimestamp, "2026-02-13T10:00:00.123Z",
		HeaderSourceGroup, "billing",
		HeaderErrorType, "db.connection_refused",
		HeaderErrorMessage, "connection refused",
		HeaderErrorCode, "DISCARD",
		HeaderErrorBacktrace, "main.handle (billing.go:42)\nmain.loop (main.go:7)",
		HeaderErrorDetails, `{"host":"db1"}`,
		HeaderFailedAt, "2026-02-13T09:04:59.987Z",
		HeaderType, "order.created",
		HeaderRetry, `{"max_attempts":3}`,
	)
	if !reflect.DeepEqual(env.Headers, want) {
		t.Errorf("headers\n got: %q\nwant: %q", env.Headers, want)
	}
}

func TestEncodeReplacesRedriveHeaders(t *testing.T) {
	t.Parallel()
	// A record that already went through Redrive: envelope headers from an
	// earlier hop, plus the redelivery headers.
	src := sourceRecord(hdr(
		HeaderID, "stale-id", "a", "1",
		HeaderSourceTopic, "elsewhere", HeaderErrorType, "old.error", HeaderFailedAt, "2020-01-01T00:00:00.000Z",
		HeaderID, testID, HeaderAttempt, "1", HeaderAttempt, "2",
		HeaderRedeliveredAt, "2026-02-13T09:00:00.000Z", "b", "2",
	))
	env := Encode(src, FailureInfo{DLQTopic: "dlq", ErrorType: "new.error"})

	counts := map[string]int{}
	for _, h := range env.Headers {
		counts[h.Key]++
	}
	for key, n := range counts {
		if n != 1 {
			t.Errorf("header %q appears %d times, want once", key, n)
		}
	}
	if counts[HeaderRedeliveredAt] != 0 {
		t.Errorf("redrive.redelivered_at must not be carried into the envelope")
	}
	f := Decode(asRead(env))
	if f.RecordID != testID || f.Attempt != 2 || f.Error.Attempt != 2 {
		t.Errorf("RecordID %q Attempt %d/%d, want %s 2/2", f.RecordID, f.Attempt, f.Error.Attempt, testID)
	}
	if f.Source.Topic != "orders" || f.Error.Type != "new.error" {
		t.Errorf("source %q type %q: old envelope values leaked", f.Source.Topic, f.Error.Type)
	}
	if want := headerList("a", "1", "b", "2"); !reflect.DeepEqual(f.Headers, want) {
		t.Errorf("Headers = %v, want %v", f.Headers, want)
	}

	// Going around again keeps the headers bounded.
	again := Encode(asRead(env), FailureInfo{DLQTopic: "dlq", ErrorType: "new.error"})
	if len(again.Headers) != len(env.Headers) {
		t.Errorf("second hop has %d headers, first had %d", len(again.Headers), len(env.Headers))
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	longTrace := make([]string, 200)
	for i := range longTrace {
		longTrace[i] = "github.com/acme/billing.(*Charger).Charge (charger.go:" + strings.Repeat("9", 3) + ")"
	}
	tests := []struct {
		name string
		src  *kgo.Record
		info FailureInfo
	}{
		{
			name: "full",
			src:  sourceRecord(hdr("traceparent", "00-a", "ce_type", "com.example")),
			info: FailureInfo{
				DLQTopic: "dead_letter_queue", Group: "billing", Type: "order.created",
				ErrorType: "payment.card_declined", Message: "card declined: insufficient funds",
				Code: dlq.CodeDeadLetter, Backtrace: []string{"a", "b"},
				Details:  json.RawMessage(`{"decline_code":"insufficient_funds","amount":1299}`),
				Retry:    json.RawMessage(`{"max_attempts":10}`),
				FailedAt: time.Date(2026, 2, 13, 10, 5, 0, 0, time.UTC),
			},
		},
		{
			name: "minimal with nil key and empty value",
			src:  &kgo.Record{Topic: "t", Partition: 0, Offset: 0, Value: []byte{}},
			info: FailureInfo{DLQTopic: "dlq", FailedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		},
		{
			name: "long backtrace and message are capped",
			src:  sourceRecord(nil),
			info: FailureInfo{
				DLQTopic: "dlq", ErrorType: "x", Message: strings.Repeat("m", MaxMessageBytes+100),
				Backtrace: longTrace, FailedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			},
		},
		{
			name: "invalid details and code",
			src:  sourceRecord(nil),
			info: FailureInfo{
				DLQTopic: "dlq", Code: "MAYBE", Details: json.RawMessage(`nope`), Retry: json.RawMessage(`"x"`),
				FailedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := Encode(tt.src, tt.info)
			got := Decode(asRead(env))

			if got.Format != dlq.FormatRedrive {
				t.Fatalf("Format = %q", got.Format)
			}
			wantSource := dlq.Source{
				Topic: tt.src.Topic, Partition: tt.src.Partition, Offset: tt.src.Offset,
				Timestamp: orZero(tt.src.Timestamp.Truncate(time.Millisecond).UTC()), Group: tt.info.Group,
			}
			if !reflect.DeepEqual(got.Source, wantSource) {
				t.Errorf("Source = %+v, want %+v", got.Source, wantSource)
			}
			if string(got.Key) != string(tt.src.Key) || (got.Key == nil) != (tt.src.Key == nil) {
				t.Errorf("Key = %q, want %q", got.Key, tt.src.Key)
			}
			if string(got.Value) != string(tt.src.Value) || (got.Value == nil) != (tt.src.Value == nil) {
				t.Errorf("Value = %q, want %q", got.Value, tt.src.Value)
			}
			var wantHeaders []dlq.Header
			for _, h := range tt.src.Headers {
				wantHeaders = append(wantHeaders, dlq.Header{Key: h.Key, Value: h.Value})
			}
			if !reflect.DeepEqual(got.Headers, wantHeaders) {
				t.Errorf("Headers = %v, want %v", got.Headers, wantHeaders)
			}
			wantType := tt.info.ErrorType
			if wantType == "" {
				wantType = ErrorTypeUnknown
			}
			if got.Error.Type != wantType {
				t.Errorf("Error.Type = %q, want %q", got.Error.Type, wantType)
			}
			wantCode := tt.info.Code
			if !wantCode.Valid() {
				wantCode = dlq.CodeRetry
			}
			if got.Error.Code != wantCode {
				t.Errorf("Error.Code = %q, want %q", got.Error.Code, wantCode)
			}
			if !got.Error.OccurredAt.Equal(tt.info.FailedAt) {
				t.Errorf("OccurredAt = %v, want %v", got.Error.OccurredAt, tt.info.FailedAt)
			}
			if len(tt.info.Message) <= MaxMessageBytes && got.Error.Message != tt.info.Message {
				t.Errorf("Message = %q, want %q", got.Error.Message, tt.info.Message)
			}
			if len(got.Error.Message) > MaxMessageBytes {
				t.Errorf("Message has %d bytes, cap is %d", len(got.Error.Message), MaxMessageBytes)
			}
			if bt := strings.Join(got.Error.Backtrace, "\n"); len(bt) > MaxBacktraceBytes {
				t.Errorf("backtrace has %d bytes, cap is %d", len(bt), MaxBacktraceBytes)
			} else if len(strings.Join(tt.info.Backtrace, "\n")) <= MaxBacktraceBytes &&
				!reflect.DeepEqual(got.Error.Backtrace, nilIfEmpty(tt.info.Backtrace)) {
				t.Errorf("Backtrace = %q, want %q", got.Error.Backtrace, tt.info.Backtrace)
			}
			if tt.info.Type != "" && got.Type != tt.info.Type {
				t.Errorf("Type = %q, want %q", got.Type, tt.info.Type)
			}
			if obj, ok := jsonObject(tt.info.Details); ok && !jsonEqual(got.Error.Details, obj) {
				t.Errorf("Details = %s, want %s", got.Error.Details, tt.info.Details)
			}
			if obj, ok := jsonObject(tt.info.Retry); ok != (got.Retry != nil) || (ok && !jsonEqual(got.Retry, obj)) {
				t.Errorf("Retry = %s, want %s", got.Retry, tt.info.Retry)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestEncodeCapsBacktraceOnLineBoundary(t *testing.T) {
	t.Parallel()
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = strings.Repeat("x", 99)
	}
	env := Encode(sourceRecord(nil), FailureInfo{DLQTopic: "dlq", Backtrace: lines})
	var bt string
	for _, h := range env.Headers {
		if h.Key == HeaderErrorBacktrace {
			bt = string(h.Value)
		}
	}
	if len(bt) > MaxBacktraceBytes {
		t.Fatalf("backtrace has %d bytes, cap is %d", len(bt), MaxBacktraceBytes)
	}
	got := strings.Split(bt, "\n")
	if got[len(got)-1] != truncatedMark {
		t.Fatalf("last line %q, want the truncation mark", got[len(got)-1])
	}
	for _, l := range got[:len(got)-1] {
		if l != lines[0] {
			t.Fatalf("line %q was cut mid-line", l)
		}
	}

	// One enormous line is cut inside the line.
	env = Encode(sourceRecord(nil), FailureInfo{DLQTopic: "dlq", Backtrace: []string{strings.Repeat("é", 5000)}})
	for _, h := range env.Headers {
		if h.Key == HeaderErrorBacktrace && (len(h.Value) > MaxBacktraceBytes || !strings.HasSuffix(string(h.Value), truncatedMark)) {
			t.Fatalf("single long line not capped: %d bytes", len(h.Value))
		}
	}
}

func TestEncodeDefaults(t *testing.T) {
	t.Parallel()
	before := testdate.Now().Add(-time.Second)
	src := &kgo.Record{Topic: "t", Partition: 1, Offset: 2}
	env := Encode(src, FailureInfo{DLQTopic: "dlq"})
	got := map[string]string{}
	for _, h := range env.Headers {
		got[h.Key] = string(h.Value)
	}
	for _, absent := range []string{HeaderSourceTimestamp, HeaderSourceGroup, HeaderErrorType, HeaderErrorMessage,
		HeaderErrorBacktrace, HeaderErrorDetails, HeaderType, HeaderRetry, HeaderID, HeaderAttempt} {
		if v, ok := got[absent]; ok {
			t.Errorf("header %s = %q, want it absent", absent, v)
		}
	}
	if got[HeaderErrorCode] != "RETRY" {
		t.Errorf("code = %q, want RETRY", got[HeaderErrorCode])
	}
	at, err := time.Parse(time.RFC3339, got[HeaderFailedAt])
	if err != nil || at.Before(before) || at.After(testdate.Now().Add(time.Second)) {
		t.Errorf("failed_at = %q (%v), want about now", got[HeaderFailedAt], err)
	}
}
