package envelope

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/dlq"
)

// Limits on decoded text. Everything Decode returns must be storable as-is:
// Postgres text rejects NUL and invalid UTF-8, and B-tree indexes reject very
// long keys, so header values are cleaned and capped instead of trusted.
const (
	// maxNameBytes caps identifiers: topics, groups, error and job types
	// (dlq.MaxNameBytes: they are indexed and counted by).
	maxNameBytes = dlq.MaxNameBytes
	// maxTextBytes caps a decoded error message or stack trace.
	maxTextBytes = 64 << 10
	// maxJSONBytes caps a decoded details or retry JSON object.
	maxJSONBytes = 64 << 10
)

// truncatedMark ends a value that was cut to fit a limit.
const truncatedMark = "…[truncated]"

// cleanText turns raw bytes into storable UTF-8: invalid sequences become
// U+FFFD, NUL bytes are dropped, and the result is cut to at most max bytes.
func cleanText(b []byte, max int) string {
	s := string(b)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return truncate(s, max)
}

// cleanName is cleanText for identifiers: trimmed and capped at maxNameBytes.
func cleanName(b []byte) string {
	return strings.TrimSpace(cleanText(bytes.TrimSpace(b), maxNameBytes))
}

// truncate cuts s to at most max bytes on a rune boundary, marking the cut when
// there is room for the mark.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	mark := truncatedMark
	if max < 4*len(mark) {
		mark = ""
	}
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// splitLines splits a stack trace into lines, dropping carriage returns and
// blank trailing lines. It returns nil for an empty trace.
func splitLines(s string) []string {
	s = strings.TrimRight(s, " \t\r\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// parseInt reads a decimal integer from text, tolerating surrounding spaces.
func parseInt(b []byte, bits int) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "" || len(s) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, bits)
	return n, err == nil
}

// textPartition reads a partition number written as text; -1 when invalid.
func textPartition(b []byte) int32 {
	if n, ok := parseInt(b, 32); ok && n >= 0 {
		return int32(n)
	}
	return -1
}

// textOffset reads an offset written as text; -1 when invalid.
func textOffset(b []byte) int64 {
	if n, ok := parseInt(b, 64); ok && n >= 0 {
		return n
	}
	return -1
}

// binaryInt reads a big-endian integer of 4 or 8 bytes (Java int or long),
// falling back to decimal text for other lengths.
func binaryInt(b []byte) (int64, bool) {
	switch len(b) {
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b))), true
	case 8:
		return int64(binary.BigEndian.Uint64(b)), true
	}
	return parseInt(b, 64)
}

// minTime and maxTime bound the timestamps Decode accepts: anything outside is
// garbage (a wrong-length binary long, a -1 "no timestamp") and would not
// survive JSON or Postgres anyway.
var (
	minTime = time.Unix(0, 0).UTC()
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// validTime reports whether t is a plausible timestamp.
func validTime(t time.Time) bool {
	return !t.Before(minTime) && !t.After(maxTime)
}

// orZero returns t if it is plausible, else the zero time.
func orZero(t time.Time) time.Time {
	if validTime(t) {
		return t
	}
	return time.Time{}
}

// millis converts Unix milliseconds to a time, reporting implausible values.
func millis(ms int64) (time.Time, bool) {
	if ms < 0 || ms > maxTime.UnixMilli() {
		return time.Time{}, false
	}
	return time.UnixMilli(ms).UTC(), true
}

// timeLayouts are the textual timestamp forms Decode understands, most
// specific first. Layouts without a zone are read as UTC.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
}

// parseTime reads an RFC 3339 timestamp (or a close relative such as Python's
// isoformat without a zone, or Unix milliseconds as digits).
func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return time.Time{}, false
	}
	if isDigits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		return epoch(float64(n))
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			return t, validTime(t)
		}
	}
	return time.Time{}, false
}

// epoch reads a number as Unix seconds or milliseconds: values below 1e11
// (before 1973 in milliseconds, after 5138 in seconds) are taken as seconds.
func epoch(n float64) (time.Time, bool) {
	if n < 0 {
		return time.Time{}, false
	}
	if n < 1e11 {
		n *= 1000
	}
	if n > float64(maxTime.UnixMilli()) {
		return time.Time{}, false
	}
	return millis(int64(n))
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// jsonObject returns raw as a storable JSON object: valid JSON, an object,
// within maxJSONBytes, free of NUL characters (which Postgres JSONB rejects).
// It reports false when raw cannot be made into one.
func jsonObject(raw []byte) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || len(raw) > maxJSONBytes || !json.Valid(raw) {
		return nil, false
	}
	if bytes.Contains(raw, []byte(`\u0000`)) {
		return scrubJSON(raw)
	}
	return json.RawMessage(bytes.Clone(raw)), true
}

// scrubJSON rewrites a JSON document without NUL characters in its strings
// and keys. Numbers keep their exact text.
func scrubJSON(raw []byte) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	out, err := json.Marshal(scrubValue(v))
	if err != nil {
		return nil, false
	}
	return out, true
}

func scrubValue(v any) any {
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, "\x00", "")
	case []any:
		for i := range v {
			v[i] = scrubValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[strings.ReplaceAll(k, "\x00", "")] = scrubValue(e)
		}
		return out
	}
	return v
}

// rawText wraps text that should have been a JSON object into one, so that
// nothing the sender wrote is dropped: {"<key>": "<text>"}.
func rawText(key string, b []byte) json.RawMessage {
	out, _ := json.Marshal(map[string]string{key: cleanText(b, maxJSONBytes)})
	return out
}

// addDetail adds key=value to a details object unless the key is present.
// A nil details becomes a new object.
func addDetail(details json.RawMessage, key string, value any) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(details) > 0 {
		if err := json.Unmarshal(details, &m); err != nil {
			return details
		}
	}
	if _, ok := m[key]; ok {
		return details
	}
	v, err := json.Marshal(value)
	if err != nil {
		return details
	}
	m[key] = v
	out, err := json.Marshal(m)
	if err != nil {
		return details
	}
	return out
}

// details builds a details object from the non-empty values of kv (key, value
// pairs), or nil when all are empty.
func details(kv ...string) json.RawMessage {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			m[kv[i]] = kv[i+1]
		}
	}
	if len(m) == 0 {
		return nil
	}
	out, _ := json.Marshal(m)
	return out
}
