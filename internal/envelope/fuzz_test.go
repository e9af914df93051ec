package envelope

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers travel through the fuzzer as one blob: entries separated by 0x1e,
// key and value separated by the first 0x1f.
const (
	fuzzEntrySep = 0x1e
	fuzzKVSep    = 0x1f
)

func fuzzHeaders(blob []byte) []kgo.RecordHeader {
	if len(blob) == 0 {
		return nil
	}
	var hs []kgo.RecordHeader
	for _, entry := range bytes.Split(blob, []byte{fuzzEntrySep}) {
		k, v, _ := bytes.Cut(entry, []byte{fuzzKVSep})
		hs = append(hs, kgo.RecordHeader{Key: string(k), Value: v})
	}
	return hs
}

func fuzzBlob(hs []kgo.RecordHeader) []byte {
	var b []byte
	for i, h := range hs {
		if i > 0 {
			b = append(b, fuzzEntrySep)
		}
		b = append(b, h.Key...)
		b = append(b, fuzzKVSep)
		b = append(b, h.Value...)
	}
	return b
}

// FuzzDecode checks that Decode never panics and keeps its promises (see
// checkInvariants) whatever the key, value, headers and timestamp.
func FuzzDecode(f *testing.F) {
	seeds := [][]kgo.RecordHeader{
		nil,
		Encode(sourceRecord(hdr("traceparent", "00-a")), FailureInfo{
			DLQTopic: "dlq", Group: "g", ErrorType: "a.b", Message: "m", Code: "FAIL",
			Backtrace: []string{"x", "y"}, Details: []byte(`{"k":1}`), Retry: []byte(`{"max_attempts":2}`),
		}).Headers,
		hdr(HeaderSourceTopic, "t", HeaderID, testID, HeaderAttempt, "2", HeaderSourceTimestamp, "2026-01-01T00:00:00Z"),
		hdr("kafka_dlt-original-topic", "orders", "kafka_dlt-original-partition", be32(5), "kafka_dlt-original-offset", be64(9),
			"kafka_dlt-original-timestamp", be64(1771000000000), "kafka_dlt-exception-fqcn", "java.lang.X",
			"kafka_dlt-exception-cause-fqcn", "java.lang.Y", "kafka_dlt-exception-stacktrace", "a\nb"),
		hdr("__connect.errors.topic", "t", "__connect.errors.partition", "1", "__connect.errors.offset", "2",
			"__connect.errors.exception.class.name", "E", "__connect.errors.connector.name", "c"),
		hdr("__streams.errors.topic", "t", "__streams.errors.exception", "a.B: msg", "__streams.errors.offset", "3"),
		hdr("__dlq.errors.topic", "t", "__dlq.errors.group", "g", "__dlq.errors.delivery.count", "5", "__dlq.errors.message", "Offset rejected by client."),
		hdr("topic_poisoned", "t", "reason_poisoned", "r", "handler_poisoned", "h"),
		hdr("type", "x", "ce_type", "y"),
	}
	values := [][]byte{
		nil,
		[]byte(`{"id":1}`),
		[]byte(`{"original_topic":"t","event":{"event_type":"x"},"error":"e","retry_count":1,"failed_at":"2026-01-01T00:00:00"}`),
		[]byte(`{"queue_name":"q","original_job":"s","error":{"type":"T","message":"m","stack":["a"]},"attempt_count":3}`),
		{0x00, 0xff, '{'},
	}
	for i, hs := range seeds {
		f.Add([]byte("key"), values[i%len(values)], fuzzBlob(hs), int64(1771000000000), false)
	}
	f.Add([]byte(nil), []byte(nil), []byte(nil), int64(-1), true)

	f.Fuzz(func(t *testing.T, key, value, headerBlob []byte, tsMillis int64, nilKey bool) {
		if nilKey {
			key = nil
		}
		rec := &kgo.Record{
			Topic: "dlq", Partition: 4, Offset: 99, Timestamp: time.UnixMilli(tsMillis),
			Key: key, Value: value, Headers: fuzzHeaders(headerBlob),
		}
		checkInvariants(t, rec, Decode(rec))
	})
}
