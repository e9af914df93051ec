// Package envelope is Redrive's wire format: it encodes the native failure
// envelope (docs/client.md, Envelope headers) and decodes every DLQ record format Redrive
// understands (§2.2) into a dlq.Failure.
//
// Decoding never fails, never panics and never drops: a record no decoder
// understands comes back as dlq.FormatUnparseable with its raw key, value and
// headers. Everything Decode returns is storable as-is (valid UTF-8 without
// NUL, bounded lengths, plausible timestamps, JSON objects that JSONB
// accepts), so a hostile or corrupt DLQ record can never block ingest.
//
// The package must never talk to Kafka or Postgres: it only converts records.
package envelope

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// HeaderFlood marks a record the client library's flood guard dead-lettered
// while it was deciding whether its failures are one outage (the value is
// the failures' fingerprint). Unlike the other redrive.* headers it is kept
// with the record's headers, so that the API shows it.
const HeaderFlood = "redrive.flood"

// Native envelope header names (docs/client.md, Envelope headers).
const (
	HeaderPrefix          = "redrive."
	HeaderSourceTopic     = "redrive.source.topic"
	HeaderSourcePartition = "redrive.source.partition"
	HeaderSourceOffset    = "redrive.source.offset"
	HeaderSourceTimestamp = "redrive.source.timestamp"
	HeaderSourceGroup     = "redrive.source.group"
	HeaderErrorType       = "redrive.error.type"
	HeaderErrorMessage    = "redrive.error.message"
	HeaderErrorCode       = "redrive.error.code"
	HeaderErrorBacktrace  = "redrive.error.backtrace"
	HeaderErrorDetails    = "redrive.error.details"
	HeaderFailedAt        = "redrive.failed_at"
	HeaderType            = "redrive.type"
	HeaderRetry           = "redrive.retry"
	HeaderID              = "redrive.id"
	HeaderAttempt         = "redrive.attempt"
	HeaderRedeliveredAt   = "redrive.redelivered_at"
	// HeaderTargetGroup names the one consumer group a redelivery is for
	// (docs/redelivery.md, Targeting): the client library hands the record
	// to the handler in that group only and skips it in every other.
	HeaderTargetGroup = "redrive.target.group"
	// HeaderAck marks a completion acknowledgement (value AckCompleted) that
	// the client library sends to the DLQ topic when a redelivered record succeeds.
	HeaderAck = "redrive.ack"
	// HeaderErrors carries a record's error history (JSON) on archive copies.
	HeaderErrors = "redrive.errors"
)

// AckCompleted is the value of HeaderAck on a completion acknowledgement.
const AckCompleted = "completed"

// ErrorTypeUnknown is the error type of a failure whose format carries none
// (Watermill, most JSON wrappers, a native envelope without redrive.error.type).
const ErrorTypeUnknown = "unknown"

// UnparseableMessage is the error message of a record no decoder understands.
const UnparseableMessage = "no decoder understood this DLQ record; it is kept raw"

// Keys Decode adds to Error.Details when it had to repair a value.
const (
	// DetailRawCode holds a redrive.error.code that was not a known code; the
	// failure is decoded with dlq.CodeRetry.
	DetailRawCode = "raw_code"
	// DetailRawDetails holds a redrive.error.details that was not a JSON object.
	DetailRawDetails = "raw_details"
)

// decoders are tried in order; the first that recognises the record wins. The
// native envelope comes first because Redrive's own client writes it; the
// JSON wrappers come last because they look at the value, which is arbitrary.
var decoders = []struct {
	format dlq.Format
	decode func(h headers, rec *kgo.Record, f *dlq.Failure) bool
}{
	{dlq.FormatRedrive, decodeNative},
	{dlq.FormatSpring, decodeSpring},
	{dlq.FormatConnect, decodeConnect},
	{dlq.FormatStreams, decodeStreams},
	{dlq.FormatShareGroup, decodeShareGroup},
	{dlq.FormatWatermill, decodeWatermill},
	{dlq.FormatJSON, decodeJSON},
}

// Decode reads a DLQ record in any supported format. It never fails: a record
// no decoder understands is returned as dlq.FormatUnparseable, with error type
// dlq.ErrorTypeUnparseable, an empty Source.Topic (ingest files it under the
// DLQ topic itself) and all its headers.
//
// For every recognised format:
//   - Key and Value are the original record's byte for byte (a nil key stays
//     nil), except for JSON-wrapped envelopes, whose Value is the wrapped
//     original payload.
//   - Headers are the record's headers without the envelope's own: the
//     format's headers and every redrive.* header, so that a redelivery gets
//     back exactly the original headers.
//   - Source.Partition and Source.Offset are -1 when unknown or invalid; an
//     invalid timestamp is left zero.
//   - Error.Code is dlq.CodeRetry unless a native envelope says otherwise; an
//     unknown code decodes as RETRY with the raw value in Details[DetailRawCode].
//   - Error.Type is ErrorTypeUnknown when the format carries none.
//   - Error.OccurredAt is the failure time when the format carries one, else
//     the DLQ record's timestamp (Spring and Streams set that to the original
//     record's timestamp).
//   - Type (the job/event type) is redrive.type, else a "type" or "ce_type"
//     header, else what a JSON wrapper says.
//
// RecordID and Attempt come from redrive.id and redrive.attempt in any format
// (a record Redrive redelivered may be dead-lettered by any tool), and only
// when redrive.id is a valid UUID. Error.Attempt is redrive.attempt (the
// delivery that failed) when present, else 1: the first failed consumption.
func Decode(rec *kgo.Record) dlq.Failure {
	h := indexHeaders(rec.Headers)
	f := dlq.Failure{
		DLQ:    dlq.Coord{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp},
		Source: dlq.Source{Partition: -1, Offset: -1},
		Key:    rec.Key,
		Value:  rec.Value,
		Error: dlq.ErrorEntry{
			Attempt:    1,
			Type:       ErrorTypeUnknown,
			Code:       dlq.CodeRetry,
			OccurredAt: orZero(rec.Timestamp),
		},
	}
	decodeRedelivery(h, &f)
	f.Type = recordType(h)
	if f.RecordID != "" && string(h.get(HeaderAck)) == AckCompleted {
		f.Completed, f.Format = true, dlq.FormatRedrive
		f.Headers = copyHeaders(rec.Headers, withoutPrefixes())
		return f
	}

	message := UnparseableMessage
	for _, d := range decoders {
		if !d.decode(h, rec, &f) {
			continue
		}
		// A source topic that is no legal topic name (invalid UTF-8, a
		// space) has nowhere to go back to and would be stored mangled:
		// keep the record raw, and say why.
		if problem := dlq.TopicNameProblem(f.Source.Topic); f.Source.Topic != "" && problem != "" {
			message = fmt.Sprintf("the %s record's source topic %q %s; it is kept raw", d.format, f.Source.Topic, problem)
			f.Error = dlq.ErrorEntry{Attempt: 1, Code: dlq.CodeRetry, OccurredAt: orZero(rec.Timestamp)}
			break
		}
		f.Format = d.format
		return f
	}

	f.Format = dlq.FormatUnparseable
	f.Source = dlq.Source{Partition: -1, Offset: -1}
	f.Error.Type = dlq.ErrorTypeUnparseable
	f.Error.Message = message
	if f.RecordID == "" {
		// A new record kept for an operator, never retried on its own: its
		// code says so. (A repeat failure of a record Redrive redelivered
		// keeps RETRY: the record's own policy decides.)
		f.Error.Code = dlq.CodeDeadLetter
	}
	f.Headers = copyHeaders(rec.Headers, func(string) bool { return false })
	return f
}

// headers looks a record's headers up by key; the last value of a repeated
// key wins, as with Java's Headers.lastHeader. A record has a dozen headers
// or so, scanned in place; only a record with more is indexed in a map, so
// that a producer's thousands of headers cost one pass, not one per lookup.
type headers struct {
	list  []kgo.RecordHeader
	byKey map[string][]byte // set when list is longer than scanHeaders
}

// scanHeaders is the most headers looked up by scanning: about as fast as a
// map's lookups, without building one for every record.
const scanHeaders = 16

func indexHeaders(hs []kgo.RecordHeader) headers {
	if len(hs) <= scanHeaders {
		return headers{list: hs}
	}
	m := make(map[string][]byte, len(hs))
	for _, kv := range hs {
		m[kv.Key] = kv.Value
	}
	return headers{byKey: m}
}

// lookup returns the value of key and whether the record has it.
func (h headers) lookup(key string) ([]byte, bool) {
	if h.byKey != nil {
		v, ok := h.byKey[key]
		return v, ok
	}
	for i := len(h.list) - 1; i >= 0; i-- {
		if h.list[i].Key == key {
			return h.list[i].Value, true
		}
	}
	return nil, false
}

// get returns the value of key (nil when absent).
func (h headers) get(key string) []byte { v, _ := h.lookup(key); return v }

func (h headers) has(key string) bool { _, ok := h.lookup(key); return ok }

// text returns a header as clean, capped text ("" when absent).
func (h headers) text(key string) string { return cleanText(h.get(key), maxTextBytes) }

// name returns a header as a clean identifier ("" when absent).
func (h headers) name(key string) string { return cleanName(h.get(key)) }

// textSource reads the source topic, partition and offset a format writes as
// text under the given keys. ok is false when the topic is absent or empty:
// the record is not of that format.
func (h headers) textSource(topic, partition, offset string) (src dlq.Source, ok bool) {
	t := h.name(topic)
	if t == "" {
		return dlq.Source{}, false
	}
	return dlq.Source{Topic: t, Partition: textPartition(h.get(partition)), Offset: textOffset(h.get(offset))}, true
}

// setError sets e's Type (unless typ is empty: it stays as it was), Message
// and Backtrace (trace, one entry a line).
func setError(e *dlq.ErrorEntry, typ, message, trace string) {
	if typ != "" {
		e.Type = typ
	}
	e.Message = message
	e.Backtrace = splitLines(trace)
}

// copyHeaders returns the headers not dropped by drop, in order. Header values
// alias the record's.
func copyHeaders(hs []kgo.RecordHeader, drop func(key string) bool) []dlq.Header {
	var out []dlq.Header
	for _, kv := range hs {
		if !drop(kv.Key) {
			out = append(out, dlq.Header{Key: kv.Key, Value: kv.Value})
		}
	}
	return out
}

// withoutPrefixes drops redrive.* headers and headers with any of prefixes.
func withoutPrefixes(prefixes ...string) func(string) bool {
	return func(key string) bool {
		if key == HeaderFlood {
			return false // kept: the record shows it was dead-lettered while a flood was building
		}
		if strings.HasPrefix(key, HeaderPrefix) {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(key, p) {
				return true
			}
		}
		return false
	}
}

// decodeRedelivery reads redrive.id and redrive.attempt, present when the
// failed record was one Redrive redelivered.
func decodeRedelivery(h headers, f *dlq.Failure) {
	id, err := uuid.ParseBytes(trimSpace(h.get(HeaderID)))
	if err != nil || len(h.get(HeaderID)) > 64 {
		return
	}
	f.RecordID = id.String()
	if n, ok := parseInt(h.get(HeaderAttempt), 32); ok && n >= 1 {
		f.Attempt = int(n)
		f.Error.Attempt = int(n)
	}
}

func trimSpace(b []byte) []byte { return []byte(strings.TrimSpace(string(b))) }

// recordType is the job/event type: redrive.type, else a "type" or "ce_type"
// (CloudEvents Kafka binding) header.
func recordType(h headers) string {
	for _, key := range []string{HeaderType, "type", "ce_type"} {
		if t := h.name(key); t != "" {
			return t
		}
	}
	return ""
}
