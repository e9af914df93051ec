package envelope

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// Apache Kafka's own dead-letter queues: Kafka Connect sink connectors
// (errors.deadletterqueue.context.headers.enable), Kafka Streams (KIP-1034,
// errors.dead.letter.queue.topic.name) and share groups (KIP-1191). All three
// write their context headers as UTF-8 text.

// Kafka Connect DLQ context headers.
const (
	connectPrefix         = "__connect.errors."
	connectTopic          = "__connect.errors.topic"
	connectPartition      = "__connect.errors.partition"
	connectOffset         = "__connect.errors.offset"
	connectConnector      = "__connect.errors.connector.name"
	connectTask           = "__connect.errors.task.id"
	connectStage          = "__connect.errors.stage"
	connectClass          = "__connect.errors.class.name"
	connectExceptionClass = "__connect.errors.exception.class.name"
	connectExceptionMsg   = "__connect.errors.exception.message"
	connectExceptionTrace = "__connect.errors.exception.stacktrace"
)

// decodeConnect reads a Kafka Connect DLQ record. It needs
// __connect.errors.topic. Error.Type is the exception class; Details keeps
// connector, task, stage and the class of the failing stage (converter,
// transformation or task). Source.Group stays empty: Connect does not say which
// consumer group its sink task used.
func decodeConnect(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	src, ok := h.textSource(connectTopic, connectPartition, connectOffset)
	if !ok {
		return false
	}
	f.Source = src
	e := &f.Error
	setError(e, h.name(connectExceptionClass), h.text(connectExceptionMsg), h.text(connectExceptionTrace))
	e.Details = details(
		"connector", h.name(connectConnector),
		"task_id", h.name(connectTask),
		"stage", h.name(connectStage),
		"class", h.name(connectClass),
	)
	f.Headers = copyHeaders(rec.Headers, withoutPrefixes(connectPrefix))
	return true
}

// Kafka Streams DLQ headers (KIP-1034, ExceptionHandlerUtils). The exception
// header holds Java's Throwable.toString(): "class: message" or "class".
const (
	streamsPrefix    = "__streams.errors."
	streamsTopic     = "__streams.errors.topic"
	streamsPartition = "__streams.errors.partition"
	streamsOffset    = "__streams.errors.offset"
	streamsException = "__streams.errors.exception"
	streamsMessage   = "__streams.errors.message"
	streamsTrace     = "__streams.errors.stacktrace"
	streamsNode      = "__streams.errors.processor.node.id"
	streamsTask      = "__streams.errors.task.id"
)

// decodeStreams reads a Kafka Streams DLQ record. It needs
// __streams.errors.topic. Error.Type is the exception class from the
// exception header. Streams stamps the DLQ record with the original record's
// timestamp, so that is Source.Timestamp too.
func decodeStreams(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	src, ok := h.textSource(streamsTopic, streamsPartition, streamsOffset)
	if !ok {
		return false
	}
	f.Source = src
	f.Source.Timestamp = orZero(rec.Timestamp)
	e := &f.Error
	class, rest := splitThrowable(h.text(streamsException))
	message := h.text(streamsMessage)
	if message == "" {
		message = rest
	}
	setError(e, class, message, h.text(streamsTrace))
	e.Details = details(
		"processor_node_id", h.name(streamsNode),
		"task_id", h.name(streamsTask),
	)
	f.Headers = copyHeaders(rec.Headers, withoutPrefixes(streamsPrefix))
	return true
}

// splitThrowable splits Java's Throwable.toString() into the class name and
// the message. A first part that is not a plausible class name (it has spaces)
// yields no class.
func splitThrowable(s string) (class, message string) {
	s = strings.TrimSpace(s)
	class, message, _ = strings.Cut(s, ": ")
	class = strings.TrimSpace(class)
	if class == "" || strings.ContainsAny(class, " \t\n") || len(class) > maxNameBytes {
		return "", s
	}
	return class, message
}

// Share-group DLQ headers (KIP-1191). The broker writes them; the message is
// one of two fixed texts naming why the record was dead-lettered.
const (
	sharePrefix        = "__dlq.errors."
	shareTopic         = "__dlq.errors.topic"
	sharePartition     = "__dlq.errors.partition"
	shareOffset        = "__dlq.errors.offset"
	shareGroup         = "__dlq.errors.group"
	shareDeliveryCount = "__dlq.errors.delivery.count"
	shareMessage       = "__dlq.errors.message"
)

// Error types given to share-group DLQ records, from the broker's message.
const (
	ErrorTypeShareRejected              = "kafka.share_group.rejected"
	ErrorTypeShareDeliveryCountExceeded = "kafka.share_group.delivery_count_exceeded"
)

// decodeShareGroup reads a share-group DLQ record. It needs
// __dlq.errors.topic. The broker's two reasons become the error types
// ErrorTypeShareRejected and ErrorTypeShareDeliveryCountExceeded; Details
// keeps delivery_count.
func decodeShareGroup(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	src, ok := h.textSource(shareTopic, sharePartition, shareOffset)
	if !ok {
		return false
	}
	f.Source = src
	f.Source.Group = h.name(shareGroup)
	e := &f.Error
	e.Message = h.text(shareMessage)
	lower := strings.ToLower(e.Message)
	switch {
	case strings.Contains(lower, "rejected"):
		e.Type = ErrorTypeShareRejected
	case strings.Contains(lower, "delivery count"):
		e.Type = ErrorTypeShareDeliveryCountExceeded
	}
	if n, ok := parseInt(h.get(shareDeliveryCount), 32); ok && n >= 0 {
		e.Details = addDetail(nil, "delivery_count", n)
	}
	f.Headers = copyHeaders(rec.Headers, withoutPrefixes(sharePrefix))
	return true
}
