package envelope

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// decodeNative reads the native envelope (docs/client.md, Envelope headers). A record is native
// when it carries a non-empty redrive.source.topic: without it there is nowhere
// to redeliver to, so other decoders get their turn and, failing them, the
// record is unparseable with all its headers kept. Invalid partition, offset
// or timestamp values leave that field unknown; the record stays native.
func decodeNative(h headers, rec *kgo.Record, f *dlq.Failure) bool {
	src, ok := h.textSource(HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset)
	if !ok {
		return false
	}
	f.Source = src
	f.Source.Group = h.name(HeaderSourceGroup)
	if t, ok := parseTime(string(h.get(HeaderSourceTimestamp))); ok {
		f.Source.Timestamp = t
	}

	e := &f.Error
	setError(e, h.name(HeaderErrorType), h.text(HeaderErrorMessage), h.text(HeaderErrorBacktrace))
	if raw, ok := h.lookup(HeaderErrorDetails); ok && len(strings.TrimSpace(string(raw))) > 0 {
		if obj, ok := jsonObject(raw); ok {
			e.Details = obj
		} else {
			e.Details = rawText(DetailRawDetails, raw)
		}
	}
	if raw, ok := h.lookup(HeaderErrorCode); ok {
		code, valid := parseCode(raw)
		e.Code = code
		if !valid {
			e.Details = addDetail(e.Details, DetailRawCode, cleanText(raw, maxNameBytes))
		}
	}
	if t, ok := parseTime(string(h.get(HeaderFailedAt))); ok {
		e.OccurredAt = t
	}
	if raw, ok := h.lookup(HeaderRetry); ok {
		if obj, ok := jsonObject(raw); ok {
			f.Retry = obj
		}
	}
	f.Headers = copyHeaders(rec.Headers, withoutPrefixes())
	return true
}

// parseCode reads a handler code, case-insensitively ("dead_letter" is
// DEAD_LETTER). An empty value is the default RETRY; anything else unknown is
// RETRY too, reported as invalid.
func parseCode(raw []byte) (dlq.Code, bool) {
	s := strings.ToUpper(strings.TrimSpace(string(raw)))
	if s == "" {
		return dlq.CodeRetry, true
	}
	c := dlq.Code(s)
	if !c.Valid() {
		return dlq.CodeRetry, false
	}
	return c, true
}
