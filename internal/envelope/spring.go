package envelope

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// Spring Kafka DeadLetterPublishingRecoverer headers (KafkaHeaders.DLT_*).
// Text values are UTF-8; partition is a 4-byte big-endian int, offset and
// timestamp (Unix ms) 8-byte big-endian longs.
const (
	springPrefix             = "kafka_dlt-"
	springTopic              = "kafka_dlt-original-topic"
	springPartition          = "kafka_dlt-original-partition"
	springOffset             = "kafka_dlt-original-offset"
	springTimestamp          = "kafka_dlt-original-timestamp"
	springTimestampType      = "kafka_dlt-original-timestamp-type"
	springGroup              = "kafka_dlt-original-consumer-group"
	springExceptionFQCN      = "kafka_dlt-exception-fqcn"
	springCauseFQCN          = "kafka_dlt-exception-cause-fqcn"
	springExceptionMessage   = "kafka_dlt-exception-message"
	springExceptionTrace     = "kafka_dlt-exception-stacktrace"
	springKeyExceptionFQCN   = "kafka_dlt-key-exception-fqcn"
	springKeyExceptionMsg    = "kafka_dlt-key-exception-message"
	springKeyExceptionTrace  = "kafka_dlt-key-exception-stacktrace"
	springRetryTopicPrefix   = "retry_topic-" // non-blocking retry topics' bookkeeping
	springListenerWrapperFQN = "ListenerExecutionFailedException"
)

// decodeSpring reads a Spring Kafka dead-letter topic record. It needs
// kafka_dlt-original-topic. Numbers of the wrong length are read as decimal
// text when they parse, else left unknown.
//
// Error.Type is the exception class, except that Spring's listener wrapper
// (ListenerExecutionFailedException) gives way to its cause class. Key
// deserialization failures (kafka_dlt-key-exception-*) are used when there is
// no value exception. Details keeps exception_fqcn, cause_fqcn and
// timestamp_type. Spring's own kafka_dlt-* and retry_topic-* headers are
// removed from Headers.
func decodeSpring(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	topic := h.name(springTopic)
	if topic == "" {
		return false
	}
	f.Source = dlq.Source{Topic: topic, Partition: -1, Offset: -1, Group: h.name(springGroup)}
	if n, ok := binaryInt(h.get(springPartition)); ok && n >= 0 && n <= 1<<31-1 {
		f.Source.Partition = int32(n)
	}
	if n, ok := binaryInt(h.get(springOffset)); ok && n >= 0 {
		f.Source.Offset = n
	}
	if n, ok := binaryInt(h.get(springTimestamp)); ok {
		if t, ok := millis(n); ok {
			f.Source.Timestamp = t
		}
	}

	fqcn, msg, trace := springExceptionFQCN, springExceptionMessage, springExceptionTrace
	if !h.has(fqcn) && !h.has(msg) && h.has(springKeyExceptionFQCN) {
		fqcn, msg, trace = springKeyExceptionFQCN, springKeyExceptionMsg, springKeyExceptionTrace
	}
	exception, cause := h.name(fqcn), h.name(springCauseFQCN)
	typ := exception
	if cause != "" && (exception == "" || strings.HasSuffix(exception, springListenerWrapperFQN)) {
		typ = cause
	}
	e := &f.Error
	setError(e, typ, h.text(msg), h.text(trace))
	e.Details = details(
		"exception_fqcn", exception,
		"cause_fqcn", cause,
		"timestamp_type", h.name(springTimestampType),
	)
	f.Headers = copyHeaders(rec.Headers, withoutPrefixes(springPrefix, springRetryTopicPrefix))
	return true
}
