package envelope

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
)

// Size limits of the native envelope. They keep a failure's headers small
// next to Kafka's default 1 MiB record limit, so that a huge error can never
// make its own dead-lettering impossible.
const (
	// MaxBacktraceBytes caps redrive.error.backtrace (docs/client.md, Envelope headers).
	MaxBacktraceBytes = 4 << 10
	// MaxMessageBytes caps redrive.error.message.
	MaxMessageBytes = 16 << 10
)

// TimeLayout is the RFC 3339 form, with milliseconds, of the envelope's
// timestamps (redrive.source.timestamp, redrive.failed_at). Times are UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FailureInfo is what Encode adds to a failed record: the context only the
// failing consumer knows.
type FailureInfo struct {
	// DLQTopic is the topic the envelope is produced to.
	DLQTopic string
	// Group is the consumer group that failed the record; optional.
	Group string
	// Type is the job/event type (redrive.type); optional.
	Type string
	// ErrorType is the dot-namespaced error type. Empty writes no header and
	// decodes as ErrorTypeUnknown.
	ErrorType string
	// Message is the human-readable error message, capped at MaxMessageBytes.
	Message string
	// Code is the handler's verdict; empty or unknown is written as RETRY.
	Code dlq.Code
	// Backtrace is the stack trace, one line per element, capped at
	// MaxBacktraceBytes (whole lines are kept where possible).
	Backtrace []string
	// Details is an optional JSON object. Anything else is written as
	// {"raw_details": "<text>"} so that nothing is lost.
	Details json.RawMessage
	// Retry is an optional JSON OJS RetryPolicy for this record. A value that
	// is not a JSON object is not written.
	Retry json.RawMessage
	// FailedAt is when the handler failed; zero means now.
	FailedAt time.Time
}

// Encode builds the native failure envelope for src (docs/client.md, Envelope headers): a record
// for f.DLQTopic with src's key and value byte for byte (the slices are shared,
// not copied), src's headers, and the redrive.* envelope headers.
//
// Any redrive.* header src already carries is replaced, never appended, so
// headers stay bounded through any number of hops — except redrive.id and
// redrive.attempt, which pass through (the last value of each) so that the
// failure of a record Redrive redelivered joins its existing DLQ record.
// The envelope record's timestamp is left zero for the producing client to
// stamp: franz-go counts its RecordDeliveryTimeout from a record's timestamp.
func Encode(src *kgo.Record, f FailureInfo) *kgo.Record {
	failedAt := f.FailedAt
	if failedAt.IsZero() {
		failedAt = clock.Wall.Now() // the real time (a test's moved one)
	}
	failedAt = failedAt.UTC()

	hs := make([]kgo.RecordHeader, 0, len(src.Headers)+12)
	var id, attempt *kgo.RecordHeader
	for i := range src.Headers {
		kv := src.Headers[i]
		switch {
		case kv.Key == HeaderID:
			id = &src.Headers[i]
		case kv.Key == HeaderAttempt:
			attempt = &src.Headers[i]
		case strings.HasPrefix(kv.Key, HeaderPrefix):
		default:
			hs = append(hs, kv)
		}
	}
	if id != nil {
		hs = append(hs, *id)
		if attempt != nil {
			hs = append(hs, *attempt)
		}
	}

	add := func(key, value string) {
		hs = append(hs, kgo.RecordHeader{Key: key, Value: []byte(value)})
	}
	addName := func(key, value string) {
		if v := cleanName([]byte(value)); v != "" {
			add(key, v)
		}
	}
	add(HeaderSourceTopic, src.Topic)
	add(HeaderSourcePartition, strconv.FormatInt(int64(src.Partition), 10))
	add(HeaderSourceOffset, strconv.FormatInt(src.Offset, 10))
	if !src.Timestamp.IsZero() {
		add(HeaderSourceTimestamp, src.Timestamp.UTC().Format(TimeLayout))
	}
	addName(HeaderSourceGroup, f.Group)
	addName(HeaderErrorType, f.ErrorType)
	if msg := cleanText([]byte(f.Message), MaxMessageBytes); msg != "" {
		add(HeaderErrorMessage, msg)
	}
	code := f.Code
	if !code.Valid() {
		code = dlq.CodeRetry
	}
	add(HeaderErrorCode, string(code))
	if bt := capLines(f.Backtrace, MaxBacktraceBytes); bt != "" {
		add(HeaderErrorBacktrace, bt)
	}
	if len(strings.TrimSpace(string(f.Details))) > 0 {
		obj, ok := jsonObject(f.Details)
		if !ok {
			obj = rawText(DetailRawDetails, f.Details)
		}
		add(HeaderErrorDetails, string(obj))
	}
	add(HeaderFailedAt, failedAt.Format(TimeLayout))
	addName(HeaderType, f.Type)
	if obj, ok := jsonObject(f.Retry); ok {
		add(HeaderRetry, string(obj))
	}

	return &kgo.Record{
		Topic:   f.DLQTopic,
		Key:     src.Key,
		Value:   src.Value,
		Headers: hs,
	}
}

// capLines joins lines with newlines, cut to at most max bytes; when it must
// cut, it cuts after a whole line where it can and marks the cut.
func capLines(lines []string, max int) string {
	clean := make([]string, 0, len(lines))
	for _, l := range lines {
		clean = append(clean, cleanText([]byte(strings.TrimRight(l, "\r\n")), max))
	}
	s := strings.TrimRight(strings.Join(clean, "\n"), "\n")
	if len(s) <= max {
		return s
	}
	limit := max - len(truncatedMark) - 1
	if i := strings.LastIndexByte(s[:limit], '\n'); i > 0 {
		return s[:i] + "\n" + truncatedMark
	}
	return truncate(s, max)
}
