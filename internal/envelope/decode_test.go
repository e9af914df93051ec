package envelope

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

const testID = "0194d1a2-7b3c-7def-8a12-3456789abcde"

var (
	dlqTime  = time.Date(2026, 2, 13, 10, 5, 0, 0, time.UTC)
	origTime = time.Date(2026, 2, 13, 10, 0, 0, 123e6, time.UTC)
)

// hdr builds headers from key, value pairs of strings.
func hdr(kv ...string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

func be32(n int32) string { return string(binary.BigEndian.AppendUint32(nil, uint32(n))) }
func be64(n int64) string { return string(binary.BigEndian.AppendUint64(nil, uint64(n))) }

// dlqRecord is a record as read from the DLQ topic.
func dlqRecord(key, value []byte, hs []kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{
		Topic: "dead_letter_queue", Partition: 2, Offset: 77,
		Timestamp: dlqTime, Key: key, Value: value, Headers: hs,
	}
}

func headerList(kv ...string) []dlq.Header {
	var out []dlq.Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, dlq.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

func TestDecodeFormats(t *testing.T) {
	t.Parallel()

	springTrace := "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed\n" +
		"\tat org.springframework.kafka.listener.KafkaMessageListenerContainer.decorateException(KafkaMessageListenerContainer.java:2931)\n" +
		"Caused by: java.lang.IllegalStateException: no stock for sku-9\n" +
		"\tat com.example.Billing.handle(Billing.java:42)\n"

	tests := []struct {
		name    string
		key     []byte
		value   []byte
		headers []kgo.RecordHeader
		want    dlq.Failure
	}{
		{
			name:  "native",
			key:   []byte("order-17"),
			value: []byte(`{"id":17}`),
			headers: hdr(
				"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"type", "ignored.because.redrive.type.wins",
				HeaderSourceTopic, "orders",
				HeaderSourcePartition, "3",
				HeaderSourceOffset, "1042",
				HeaderSourceTimestamp, "2026-02-13T10:00:00.123Z",
				HeaderSourceGroup, "billing",
				HeaderErrorType, "db.connection_refused",
				HeaderErrorMessage, "dial tcp 10.0.0.5:5432: connect: connection refused",
				HeaderErrorCode, "RETRY",
				HeaderErrorBacktrace, "main.handle (billing.go:42)\nmain.loop (main.go:7)\n",
				HeaderErrorDetails, `{"host":"10.0.0.5"}`,
				HeaderFailedAt, "2026-02-13T10:04:59.500Z",
				HeaderType, "order.created",
				HeaderRetry, `{"max_attempts":3}`,
			),
			want: dlq.Failure{
				Format: dlq.FormatRedrive,
				Source: dlq.Source{Topic: "orders", Partition: 3, Offset: 1042, Timestamp: origTime, Group: "billing"},
				Type:   "order.created",
				Key:    []byte("order-17"), Value: []byte(`{"id":17}`),
				Headers: headerList(
					"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					"type", "ignored.because.redrive.type.wins",
				),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "db.connection_refused",
					Message:    "dial tcp 10.0.0.5:5432: connect: connection refused",
					Code:       dlq.CodeRetry,
					Backtrace:  []string{"main.handle (billing.go:42)", "main.loop (main.go:7)"},
					Details:    json.RawMessage(`{"host":"10.0.0.5"}`),
					OccurredAt: time.Date(2026, 2, 13, 10, 4, 59, 500e6, time.UTC),
				},
				Retry: json.RawMessage(`{"max_attempts":3}`),
			},
		},
		{
			name: "native repeat failure of a redelivered record",
			key:  nil, value: []byte("v"),
			headers: hdr(
				HeaderSourceTopic, "orders", HeaderSourcePartition, "0", HeaderSourceOffset, "9",
				HeaderErrorType, "x.y", HeaderErrorCode, "dead_letter",
				HeaderID, testID, HeaderAttempt, "3",
				HeaderRedeliveredAt, "2026-02-13T10:00:00.000Z",
			),
			want: dlq.Failure{
				Format:   dlq.FormatRedrive,
				Source:   dlq.Source{Topic: "orders", Partition: 0, Offset: 9},
				Value:    []byte("v"),
				RecordID: testID, Attempt: 3,
				Error: dlq.ErrorEntry{Attempt: 3, Type: "x.y", Code: dlq.CodeDeadLetter, OccurredAt: dlqTime},
			},
		},
		{
			name:  "native with invalid numbers, code and details",
			value: []byte("v"),
			headers: hdr(
				HeaderSourceTopic, "orders", HeaderSourcePartition, "three", HeaderSourceOffset, "-5",
				HeaderSourceTimestamp, "yesterday", HeaderFailedAt, "soon",
				HeaderErrorCode, "EXPLODE", HeaderErrorDetails, "not json",
				HeaderRetry, `[1,2]`, HeaderID, "not-a-uuid", HeaderAttempt, "2",
			),
			want: dlq.Failure{
				Format: dlq.FormatRedrive,
				Source: dlq.Source{Topic: "orders", Partition: -1, Offset: -1},
				Value:  []byte("v"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: ErrorTypeUnknown, Code: dlq.CodeRetry, OccurredAt: dlqTime,
					Details: json.RawMessage(`{"raw_code":"EXPLODE","raw_details":"not json"}`),
				},
			},
		},
		{
			name:  "spring with binary numbers and wrapped cause",
			key:   []byte("k1"),
			value: []byte{0x00, 0x01, 0xfe, 0xff}, // binary payload (e.g. Avro)
			headers: hdr(
				"__TypeId__", "com.example.OrderCreated",
				"kafka_dlt-exception-fqcn", "org.springframework.kafka.listener.ListenerExecutionFailedException",
				"kafka_dlt-exception-cause-fqcn", "java.lang.IllegalStateException",
				"kafka_dlt-exception-message", "Listener method threw exception; no stock for sku-9",
				"kafka_dlt-exception-stacktrace", springTrace,
				"kafka_dlt-original-topic", "orders",
				"kafka_dlt-original-partition", be32(5),
				"kafka_dlt-original-offset", be64(1<<33+7),
				"kafka_dlt-original-timestamp", be64(origTime.UnixMilli()),
				"kafka_dlt-original-timestamp-type", "CreateTime",
				"kafka_dlt-original-consumer-group", "inventory",
				"retry_topic-attempts", be32(3),
			),
			want: dlq.Failure{
				Format: dlq.FormatSpring,
				Source: dlq.Source{Topic: "orders", Partition: 5, Offset: 1<<33 + 7, Timestamp: origTime, Group: "inventory"},
				Key:    []byte("k1"), Value: []byte{0x00, 0x01, 0xfe, 0xff},
				Headers: headerList("__TypeId__", "com.example.OrderCreated"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "java.lang.IllegalStateException", Code: dlq.CodeRetry,
					Message:    "Listener method threw exception; no stock for sku-9",
					Backtrace:  splitLines(springTrace),
					OccurredAt: dlqTime,
					Details: json.RawMessage(`{"cause_fqcn":"java.lang.IllegalStateException",` +
						`"exception_fqcn":"org.springframework.kafka.listener.ListenerExecutionFailedException",` +
						`"timestamp_type":"CreateTime"}`),
				},
			},
		},
		{
			name:  "spring with wrong-length numbers",
			value: []byte("v"),
			headers: hdr(
				"kafka_dlt-original-topic", "orders",
				"kafka_dlt-original-partition", "\x00\x05", // truncated int
				"kafka_dlt-original-offset", "42", // text instead of a long
				"kafka_dlt-original-timestamp", be64(-1),
				"kafka_dlt-exception-fqcn", "org.apache.kafka.common.errors.SerializationException",
			),
			want: dlq.Failure{
				Format: dlq.FormatSpring,
				Source: dlq.Source{Topic: "orders", Partition: -1, Offset: 42},
				Value:  []byte("v"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "org.apache.kafka.common.errors.SerializationException", Code: dlq.CodeRetry,
					OccurredAt: dlqTime,
					Details:    json.RawMessage(`{"exception_fqcn":"org.apache.kafka.common.errors.SerializationException"}`),
				},
			},
		},
		{
			name:  "spring key deserialization failure",
			value: []byte("v"),
			headers: hdr(
				"kafka_dlt-original-topic", "orders",
				"kafka_dlt-key-exception-fqcn", "org.springframework.kafka.support.serializer.DeserializationException",
				"kafka_dlt-key-exception-message", "failed to deserialize key",
			),
			want: dlq.Failure{
				Format: dlq.FormatSpring,
				Source: dlq.Source{Topic: "orders", Partition: -1, Offset: -1},
				Value:  []byte("v"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "org.springframework.kafka.support.serializer.DeserializationException",
					Code: dlq.CodeRetry, Message: "failed to deserialize key", OccurredAt: dlqTime,
					Details: json.RawMessage(`{"exception_fqcn":"org.springframework.kafka.support.serializer.DeserializationException"}`),
				},
			},
		},
		{
			name:  "connect",
			key:   []byte(`{"id":1}`),
			value: []byte(`{"broken`),
			headers: hdr(
				"__connect.errors.topic", "pg.public.customers",
				"__connect.errors.partition", "1",
				"__connect.errors.offset", "5012",
				"__connect.errors.connector.name", "es-sink",
				"__connect.errors.task.id", "0",
				"__connect.errors.stage", "VALUE_CONVERTER",
				"__connect.errors.class.name", "org.apache.kafka.connect.json.JsonConverter",
				"__connect.errors.exception.class.name", "org.apache.kafka.connect.errors.DataException",
				"__connect.errors.exception.message", "Converting byte[] to Kafka Connect data failed due to serialization error",
				"__connect.errors.exception.stacktrace", "org.apache.kafka.connect.errors.DataException: ...\n\tat org.apache.kafka.connect.json.JsonConverter.toConnectData(JsonConverter.java:324)",
			),
			want: dlq.Failure{
				Format: dlq.FormatConnect,
				Source: dlq.Source{Topic: "pg.public.customers", Partition: 1, Offset: 5012},
				Key:    []byte(`{"id":1}`), Value: []byte(`{"broken`),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "org.apache.kafka.connect.errors.DataException", Code: dlq.CodeRetry,
					Message: "Converting byte[] to Kafka Connect data failed due to serialization error",
					Backtrace: []string{
						"org.apache.kafka.connect.errors.DataException: ...",
						"\tat org.apache.kafka.connect.json.JsonConverter.toConnectData(JsonConverter.java:324)",
					},
					OccurredAt: dlqTime,
					Details: json.RawMessage(`{"class":"org.apache.kafka.connect.json.JsonConverter",` +
						`"connector":"es-sink","stage":"VALUE_CONVERTER","task_id":"0"}`),
				},
			},
		},
		{
			name:  "streams",
			key:   []byte("user-1"),
			value: []byte("click"),
			headers: hdr(
				"ce_type", "com.example.click",
				"__streams.errors.exception", "org.apache.kafka.common.errors.SerializationException: Size of data received is not 8",
				"__streams.errors.message", "Size of data received is not 8",
				"__streams.errors.stacktrace", "org.apache.kafka.common.errors.SerializationException: Size of data received is not 8\n\tat ...",
				"__streams.errors.topic", "clicks",
				"__streams.errors.partition", "4",
				"__streams.errors.offset", "99",
			),
			want: dlq.Failure{
				Format: dlq.FormatStreams,
				Source: dlq.Source{Topic: "clicks", Partition: 4, Offset: 99, Timestamp: dlqTime},
				Type:   "com.example.click",
				Key:    []byte("user-1"), Value: []byte("click"),
				Headers: headerList("ce_type", "com.example.click"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "org.apache.kafka.common.errors.SerializationException", Code: dlq.CodeRetry,
					Message:    "Size of data received is not 8",
					Backtrace:  []string{"org.apache.kafka.common.errors.SerializationException: Size of data received is not 8", "\tat ..."},
					OccurredAt: dlqTime,
				},
			},
		},
		{
			name:  "streams without message header",
			value: []byte("v"),
			headers: hdr(
				"__streams.errors.exception", "java.lang.NullPointerException",
				"__streams.errors.topic", "clicks",
			),
			want: dlq.Failure{
				Format: dlq.FormatStreams,
				Source: dlq.Source{Topic: "clicks", Partition: -1, Offset: -1, Timestamp: dlqTime},
				Value:  []byte("v"),
				Error:  dlq.ErrorEntry{Attempt: 1, Type: "java.lang.NullPointerException", Code: dlq.CodeRetry, OccurredAt: dlqTime},
			},
		},
		{
			name:  "share group",
			key:   []byte("key"),
			value: []byte("body"),
			headers: hdr(
				"__dlq.errors.topic", "codely.mooc.course.created",
				"__dlq.errors.partition", "2",
				"__dlq.errors.offset", "41",
				"__dlq.errors.group", "courses-counter",
				"__dlq.errors.delivery.count", "5",
				"__dlq.errors.message", "Offset delivery count exceeded the threshold.",
			),
			want: dlq.Failure{
				Format: dlq.FormatShareGroup,
				Source: dlq.Source{Topic: "codely.mooc.course.created", Partition: 2, Offset: 41, Group: "courses-counter"},
				Key:    []byte("key"), Value: []byte("body"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: ErrorTypeShareDeliveryCountExceeded, Code: dlq.CodeRetry,
					Message: "Offset delivery count exceeded the threshold.", OccurredAt: dlqTime,
					Details: json.RawMessage(`{"delivery_count":5}`),
				},
			},
		},
		{
			name:  "share group rejected",
			value: []byte("body"),
			headers: hdr(
				"__dlq.errors.topic", "jobs", "__dlq.errors.partition", "0", "__dlq.errors.offset", "1",
				"__dlq.errors.group", "workers", "__dlq.errors.message", "Offset rejected by client.",
			),
			want: dlq.Failure{
				Format: dlq.FormatShareGroup,
				Source: dlq.Source{Topic: "jobs", Partition: 0, Offset: 1, Group: "workers"},
				Value:  []byte("body"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: ErrorTypeShareRejected, Code: dlq.CodeRetry,
					Message: "Offset rejected by client.", OccurredAt: dlqTime,
				},
			},
		},
		{
			name:  "watermill",
			key:   []byte("k"),
			value: []byte(`{"amount":10}`),
			headers: hdr(
				"_watermill_message_uuid", "5d3e1b9a-1111-4c2d-9f00-0123456789ab",
				"topic_poisoned", "payments",
				"handler_poisoned", "charge_handler",
				"subscriber_poisoned", "kafka",
				"reason_poisoned", "card declined",
			),
			want: dlq.Failure{
				Format: dlq.FormatWatermill,
				Source: dlq.Source{Topic: "payments", Partition: -1, Offset: -1},
				Key:    []byte("k"), Value: []byte(`{"amount":10}`),
				Headers: headerList("_watermill_message_uuid", "5d3e1b9a-1111-4c2d-9f00-0123456789ab"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: ErrorTypeUnknown, Code: dlq.CodeRetry, Message: "card declined",
					OccurredAt: dlqTime,
					Details:    json.RawMessage(`{"handler":"charge_handler","subscriber":"kafka"}`),
				},
			},
		},
		{
			name: "json original_topic style",
			key:  []byte("evt-1"),
			value: []byte(`{"event":{"event_id":"evt-1","event_type":"execution_requested","n":1},` +
				`"original_topic":"execution-events","error":"pod quota exceeded","retry_count":3,` +
				`"failed_at":"2026-02-13T10:04:00+00:00","status":"pending","producer_id":"worker-1"}`),
			headers: hdr("content-type", "application/json"),
			want: dlq.Failure{
				Format:  dlq.FormatJSON,
				Source:  dlq.Source{Topic: "execution-events", Partition: -1, Offset: -1},
				Type:    "execution_requested",
				Key:     []byte("evt-1"),
				Value:   []byte(`{"event_id":"evt-1","event_type":"execution_requested","n":1}`),
				Headers: headerList("content-type", "application/json"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: ErrorTypeUnknown, Code: dlq.CodeRetry, Message: "pod quota exceeded",
					OccurredAt: time.Date(2026, 2, 13, 10, 4, 0, 0, time.UTC),
					Details:    json.RawMessage(`{"producer_id":"worker-1","retry_count":3,"status":"pending"}`),
				},
			},
		},
		{
			name: "json original_job style",
			value: []byte(`{"original_job":{"camera_id":"front_door","file_path":"/export/a.jpg"},` +
				`"error":"Connection refused: YOLO26 service unavailable","attempt_count":3,` +
				`"first_failed_at":"2024-01-15T10:30:01.000000","last_failed_at":"2024-01-15T10:30:15.000000",` +
				`"queue_name":"detection_queue","error_type":"ConnectionRefusedError",` +
				`"stack_trace":"Traceback (most recent call last):\n  File \"x.py\", line 1","http_status":null,` +
				`"retry_delays":[1.0,2.1,4.3],"context":{"detection_queue_depth":15}}`),
			want: dlq.Failure{
				Format: dlq.FormatJSON,
				Source: dlq.Source{Topic: "detection_queue", Partition: -1, Offset: -1},
				Value:  []byte(`{"camera_id":"front_door","file_path":"/export/a.jpg"}`),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "ConnectionRefusedError", Code: dlq.CodeRetry,
					Message:    "Connection refused: YOLO26 service unavailable",
					Backtrace:  []string{"Traceback (most recent call last):", `  File "x.py", line 1`},
					OccurredAt: time.Date(2024, 1, 15, 10, 30, 15, 0, time.UTC),
					Details: json.RawMessage(`{"attempt_count":3,"context":{"detection_queue_depth":15},` +
						`"first_failed_at":"2024-01-15T10:30:01.000000","http_status":null,"retry_delays":[1.0,2.1,4.3]}`),
				},
			},
		},
		{
			name: "json with string payload, error object and coordinates",
			value: []byte(`{"originalTopic":"audit","originalPartition":"7","originalOffset":12,` +
				`"originalMessage":"plain text payload","error":{"type":"ValidationError","message":"bad field",` +
				`"stack":["at a","at b"]},"dlqTimestamp":1771000000000}`),
			want: dlq.Failure{
				Format: dlq.FormatJSON,
				Source: dlq.Source{Topic: "audit", Partition: 7, Offset: 12},
				Value:  []byte("plain text payload"),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: "ValidationError", Code: dlq.CodeRetry, Message: "bad field",
					Backtrace:  []string{"at a", "at b"},
					OccurredAt: time.UnixMilli(1771000000000).UTC(),
				},
			},
		},
		{
			name:  "json null payload is a tombstone",
			value: []byte(`{"original_topic":"t","payload":null,"error":"x"}`),
			want: dlq.Failure{
				Format: dlq.FormatJSON,
				Source: dlq.Source{Topic: "t", Partition: -1, Offset: -1},
				Error:  dlq.ErrorEntry{Attempt: 1, Type: ErrorTypeUnknown, Code: dlq.CodeRetry, Message: "x", OccurredAt: dlqTime},
			},
		},
		{
			name:    "unparseable keeps everything raw",
			key:     []byte{0xff},
			value:   []byte("just a payload"),
			headers: hdr("traceparent", "00-x", HeaderID, testID, HeaderAttempt, "2", HeaderErrorType, "orphan"),
			want: dlq.Failure{
				Format:   dlq.FormatUnparseable,
				Source:   dlq.Source{Partition: -1, Offset: -1},
				Key:      []byte{0xff},
				Value:    []byte("just a payload"),
				Headers:  headerList("traceparent", "00-x", HeaderID, testID, HeaderAttempt, "2", HeaderErrorType, "orphan"),
				RecordID: testID, Attempt: 2,
				Error: dlq.ErrorEntry{
					Attempt: 2, Type: dlq.ErrorTypeUnparseable, Code: dlq.CodeRetry,
					Message: UnparseableMessage, OccurredAt: dlqTime,
				},
			},
		},
		{
			name:  "json that is an ordinary payload is unparseable",
			value: []byte(`{"topic":"orders","message":"hello"}`),
			want: dlq.Failure{
				Format: dlq.FormatUnparseable,
				Source: dlq.Source{Partition: -1, Offset: -1},
				Value:  []byte(`{"topic":"orders","message":"hello"}`),
				Error: dlq.ErrorEntry{
					Attempt: 1, Type: dlq.ErrorTypeUnparseable, Code: dlq.CodeDeadLetter,
					Message: UnparseableMessage, OccurredAt: dlqTime,
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := dlqRecord(tt.key, tt.value, tt.headers)
			got := Decode(rec)
			want := tt.want
			want.DLQ = dlq.Coord{Topic: "dead_letter_queue", Partition: 2, Offset: 77, Timestamp: dlqTime}
			assertFailure(t, got, want)
		})
	}
}

// assertFailure compares failures field by field, JSON by meaning.
func assertFailure(t *testing.T, got, want dlq.Failure) {
	t.Helper()
	if !jsonEqual(got.Error.Details, want.Error.Details) {
		t.Errorf("Error.Details = %s, want %s", got.Error.Details, want.Error.Details)
	}
	if !jsonEqual(got.Retry, want.Retry) {
		t.Errorf("Retry = %s, want %s", got.Retry, want.Retry)
	}
	got.Error.Details, want.Error.Details, got.Retry, want.Retry = nil, nil, nil, nil
	if (got.Key == nil) != (want.Key == nil) {
		t.Errorf("Key nil = %v, want nil = %v", got.Key == nil, want.Key == nil)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode mismatch\n got: %+v\nwant: %+v", got, want)
	}
}

func jsonEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func TestDecodeNativeWithoutTopicFallsThrough(t *testing.T) {
	t.Parallel()
	rec := dlqRecord(nil, []byte("v"), hdr(HeaderErrorType, "x.y", HeaderSourcePartition, "1"))
	f := Decode(rec)
	if f.Format != dlq.FormatUnparseable || f.Source.Topic != "" || len(f.Headers) != 2 {
		t.Fatalf("got format %q topic %q headers %d, want unparseable with raw headers", f.Format, f.Source.Topic, len(f.Headers))
	}
}

func TestDecodeSpringCarryingRedeliveryHeaders(t *testing.T) {
	t.Parallel()
	// A record Redrive redelivered, then dead-lettered by Spring: it must join
	// its existing record, and Redrive's headers must not leak into Headers.
	rec := dlqRecord([]byte("k"), []byte("v"), hdr(
		"traceparent", "00-a",
		HeaderID, strings.ToUpper(testID), HeaderAttempt, "4", HeaderRedeliveredAt, "2026-02-13T10:00:00.000Z",
		"kafka_dlt-original-topic", "orders",
		"kafka_dlt-exception-fqcn", "java.lang.RuntimeException",
	))
	f := Decode(rec)
	if f.Format != dlq.FormatSpring || f.RecordID != testID || f.Attempt != 4 || f.Error.Attempt != 4 {
		t.Fatalf("got format %q id %q attempt %d/%d", f.Format, f.RecordID, f.Attempt, f.Error.Attempt)
	}
	if want := headerList("traceparent", "00-a"); !reflect.DeepEqual(f.Headers, want) {
		t.Fatalf("Headers = %v, want %v", f.Headers, want)
	}
}

func TestDecodeRepeatedHeaderLastWins(t *testing.T) {
	t.Parallel()
	repeated := []string{
		HeaderSourceTopic, "old", HeaderSourceTopic, "new",
		HeaderErrorType, "a", HeaderErrorType, "b",
	}
	// A few headers are scanned; many are indexed in a map first: the last
	// value wins either way.
	many := append([]string{}, repeated...)
	for i := range 2 * scanHeaders {
		many = append(many, fmt.Sprintf("x-%d", i), "v")
	}
	many = append(many, HeaderSourceTopic, "newest")
	for _, tc := range []struct {
		name      string
		headers   []string
		wantTopic string
	}{
		{"a few headers", repeated, "new"},
		{"many headers", many, "newest"},
	} {
		f := Decode(dlqRecord(nil, nil, hdr(tc.headers...)))
		if f.Source.Topic != tc.wantTopic || f.Error.Type != "b" {
			t.Fatalf("%s: got topic %q type %q, want %q and %q", tc.name, f.Source.Topic, f.Error.Type, tc.wantTopic, "b")
		}
		if f.Value != nil {
			t.Fatalf("%s: nil value became %q", tc.name, f.Value)
		}
	}
}

func TestDecodeRecordTypeFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		headers []kgo.RecordHeader
		want    string
	}{
		{hdr(HeaderSourceTopic, "t", "type", "order.created", "ce_type", "ce"), "order.created"},
		{hdr(HeaderSourceTopic, "t", "ce_type", "com.example.ce"), "com.example.ce"},
		{hdr(HeaderSourceTopic, "t", HeaderType, "x", "type", "y"), "x"},
		{hdr(HeaderSourceTopic, "t"), ""},
	}
	for _, tt := range tests {
		if got := Decode(dlqRecord(nil, nil, tt.headers)).Type; got != tt.want {
			t.Errorf("Type = %q, want %q (headers %v)", got, tt.want, tt.headers)
		}
	}
}
