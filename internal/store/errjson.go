package store

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/dlq"
)

// appendErrorsJSON appends an error history as a JSON array, as
// json.Marshal would write it but without reflection (ingest writes one per
// record). Strings must be valid UTF-8 (clean makes them so); Details must
// be valid JSON. The column is jsonb, so escaping style does not matter.
func appendErrorsJSON(dst []byte, errs []dlq.ErrorEntry) []byte {
	dst = append(dst, '[')
	for i := range errs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendErrorJSON(dst, &errs[i])
	}
	return append(dst, ']')
}

// appendErrorJSON appends one entry of appendErrorsJSON's array.
func appendErrorJSON(dst []byte, e *dlq.ErrorEntry) []byte {
	dst = append(dst, `{"attempt":`...)
	dst = strconv.AppendInt(dst, int64(e.Attempt), 10)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, e.Type)
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, e.Message)
	dst = append(dst, `,"code":`...)
	dst = appendJSONString(dst, string(e.Code))
	if len(e.Backtrace) > 0 {
		dst = append(dst, `,"backtrace":[`...)
		for j, f := range e.Backtrace {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, f)
		}
		dst = append(dst, ']')
	}
	if len(e.Details) > 0 {
		dst = append(dst, `,"details":`...)
		dst = append(dst, e.Details...)
	}
	dst = append(dst, `,"occurred_at":"`...)
	dst = e.OccurredAt.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, `"}`...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf || (c >= 0x20 && c != '"' && c != '\\') {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
