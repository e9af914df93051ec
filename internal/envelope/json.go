package envelope

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// JSON-wrapped envelopes: the DLQ record's value is a JSON object that wraps
// the original payload with failure context. Two families are common:
//
//	{"original_topic": "orders", "event": {...}, "error": "...", "retry_count": 3, "failed_at": "..."}
//	{"queue_name": "detection_queue", "original_job": {...}, "error": "...", "error_type": "ConnectionRefusedError",
//	 "stack_trace": "...", "attempt_count": 3, "first_failed_at": "...", "last_failed_at": "..."}
//
// Field names vary between producers, so each concept has a list of accepted
// names, tried in order.
var (
	jsonTopicKeys = []string{"original_topic", "originalTopic", "queue_name"}
	// jsonPayloadKeys name the wrapped original; "message" is last because
	// some wrappers use it for the error.
	jsonPayloadKeys = []string{
		"original_job", "original_message", "originalMessage", "original_payload",
		"original_value", "originalValue", "original_event", "event", "payload",
		"value", "raw_record", "message",
	}
	jsonKeyKeys       = []string{"original_key", "originalKey"}
	jsonErrorKeys     = []string{"error", "error_message", "errorMessage", "failure_reason", "error_reason", "finalError", "last_error", "reason"}
	jsonErrorTypeKeys = []string{"error_type", "errorType", "error_class", "errorClass", "exception_type", "exception"}
	jsonStackKeys     = []string{"stack_trace", "stacktrace", "stackTrace", "traceback", "backtrace"}
	jsonFailedAtKeys  = []string{"failed_at", "last_failed_at", "failedAt", "error_timestamp", "dead_letter_at", "dlqTimestamp", "timestamp"}
	jsonPartitionKeys = []string{"original_partition", "originalPartition"}
	jsonOffsetKeys    = []string{"original_offset", "originalOffset"}
	jsonGroupKeys     = []string{"consumer_group", "consumerGroup", "group_id"}
	jsonTypeKeys      = []string{"event_type", "eventType", "job_type", "type"}
)

// maxJSONDetailValue is the largest wrapper field copied into Details.
const maxJSONDetailValue = 8 << 10

// decodeJSON reads a JSON-wrapped envelope. It needs a JSON object value with
// an original topic (original_topic, originalTopic, or queue_name next to an
// original_job) and either a wrapped payload or an error. Value becomes the
// wrapped payload: a JSON string's text, null's nil, any other JSON value's
// raw bytes; without a payload field Value stays the whole wrapper. A string
// original_key (or originalKey) replaces the record's key.
//
// Error.Type comes from error_type and friends (ErrorTypeUnknown without);
// Error.OccurredAt from failed_at and friends. Every other field of the
// wrapper (retry_count, attempt_count, first_failed_at, context, ...) is kept
// in Details; counts are not taken as Redrive attempts.
func decodeJSON(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	v := bytes.TrimSpace(rec.Value)
	if len(v) < 2 || v[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return false
	}
	used := map[string]bool{}
	take := func(keys []string) (string, json.RawMessage) {
		for _, k := range keys {
			if raw, ok := m[k]; ok && !isNull(raw) {
				used[k] = true
				return k, raw
			}
		}
		return "", nil
	}

	topicKey, topicRaw := take(jsonTopicKeys)
	topic := jsonName(topicRaw)
	if _, job := m["original_job"]; topic == "" || (topicKey == "queue_name" && !job) {
		return false
	}
	payloadKey, payload := "", json.RawMessage(nil)
	for _, k := range jsonPayloadKeys {
		if raw, ok := m[k]; ok {
			payloadKey, payload = k, raw
			used[k] = true
			break
		}
	}
	errKey, errRaw := take(jsonErrorKeys)
	if payloadKey == "" && errKey == "" {
		return false
	}

	f.Source = dlq.Source{Topic: topic, Partition: -1, Offset: -1}
	if _, raw := take(jsonPartitionKeys); raw != nil {
		if n, ok := jsonInt(raw); ok && n >= 0 && n <= 1<<31-1 {
			f.Source.Partition = int32(n)
		}
	}
	if _, raw := take(jsonOffsetKeys); raw != nil {
		if n, ok := jsonInt(raw); ok && n >= 0 {
			f.Source.Offset = n
		}
	}
	if _, raw := take(jsonGroupKeys); raw != nil {
		f.Source.Group = jsonName(raw)
	}
	if payloadKey != "" {
		f.Value = jsonPayload(payload)
	}
	if _, raw := take(jsonKeyKeys); raw != nil {
		if s, ok := jsonString(raw); ok {
			f.Key = []byte(s)
		}
	}

	e := &f.Error
	msg, typ, stack := jsonError(errRaw)
	e.Message = msg
	if _, raw := take(jsonErrorTypeKeys); raw != nil {
		typ = jsonName(raw)
	}
	if typ != "" {
		e.Type = typ
	}
	if _, raw := take(jsonStackKeys); raw != nil {
		stack = jsonText(raw)
	}
	e.Backtrace = splitLines(stack)
	if _, raw := take(jsonFailedAtKeys); raw != nil {
		if t, ok := jsonTime(raw); ok {
			e.OccurredAt = t
		}
	}
	if f.Type == "" {
		if _, raw := take(jsonTypeKeys); raw != nil {
			f.Type = jsonName(raw)
		}
		if f.Type == "" {
			var inner map[string]json.RawMessage
			if json.Unmarshal(payload, &inner) == nil {
				f.Type = jsonName(inner["event_type"])
			}
		}
	}
	e.Details = jsonDetails(m, used)
	f.Headers = copyHeaders(rec.Headers, withoutPrefixes())
	return true
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// jsonString reads a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// jsonName reads a JSON string as a clean identifier.
func jsonName(raw json.RawMessage) string {
	s, ok := jsonString(raw)
	if !ok {
		return ""
	}
	return cleanName([]byte(s))
}

// jsonText reads a JSON value as clean text: a string's contents, an array of
// strings joined by newlines, or any other value's JSON text.
func jsonText(raw json.RawMessage) string {
	if s, ok := jsonString(raw); ok {
		return cleanText([]byte(s), maxTextBytes)
	}
	var lines []string
	if json.Unmarshal(raw, &lines) == nil {
		return cleanText([]byte(strings.Join(lines, "\n")), maxTextBytes)
	}
	return cleanText(bytes.TrimSpace(raw), maxTextBytes)
}

// jsonInt reads an integer written as a JSON number or a numeric string.
func jsonInt(raw json.RawMessage) (int64, bool) {
	if s, ok := jsonString(raw); ok {
		return parseInt([]byte(s), 64)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// jsonTime reads a timestamp written as a string or as Unix (milli)seconds.
func jsonTime(raw json.RawMessage) (t time.Time, ok bool) {
	if s, isStr := jsonString(raw); isStr {
		return parseTime(s)
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil {
		return t, false
	}
	return epoch(n)
}

// jsonPayload turns the wrapped original back into record bytes.
func jsonPayload(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil
	}
	if s, ok := jsonString(raw); ok {
		return []byte(s)
	}
	return bytes.Clone(raw)
}

// jsonError reads the error field: a string is the message; an object may
// carry message, type and stack; anything else is kept as text.
func jsonError(raw json.RawMessage) (msg, typ, stack string) {
	if raw == nil {
		return "", "", ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return jsonText(raw), "", ""
	}
	for _, k := range []string{"message", "msg", "error_message", "detail"} {
		if v, ok := obj[k]; ok && !isNull(v) {
			msg = jsonText(v)
			break
		}
	}
	for _, k := range []string{"type", "class", "name", "error_type"} {
		if v, ok := obj[k]; ok {
			if typ = jsonName(v); typ != "" {
				break
			}
		}
	}
	for _, k := range append([]string{"stack"}, jsonStackKeys...) {
		if v, ok := obj[k]; ok && !isNull(v) {
			stack = jsonText(v)
			break
		}
	}
	if msg == "" && typ == "" && stack == "" {
		msg = jsonText(raw)
	}
	return msg, typ, stack
}

// jsonDetails keeps the wrapper fields no other part of the failure took,
// skipping any single value over maxJSONDetailValue.
func jsonDetails(m map[string]json.RawMessage, used map[string]bool) json.RawMessage {
	rest := map[string]json.RawMessage{}
	for k, v := range m {
		if !used[k] && len(v) <= maxJSONDetailValue {
			rest[k] = v
		}
	}
	if len(rest) == 0 {
		return nil
	}
	out, err := json.Marshal(rest)
	if err != nil {
		return nil
	}
	obj, ok := jsonObject(out)
	if !ok {
		return nil
	}
	return obj
}
