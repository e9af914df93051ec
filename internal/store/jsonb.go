package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// MaxJSONDepth is the deepest nesting of objects and arrays stored as jsonb
// (a record's payload, an error's details). Postgres parses JSON
// recursively and fails a statement that nests too deep for its stack
// ("stack depth limit exceeded", about 10,000 levels with the default
// max_stack_depth of 2MB, far fewer with a smaller one); nothing searches
// that deep. A deeper value is still stored byte for byte, without its
// searchable copy.
const MaxJSONDepth = 1000

// Reasons a JSON value is kept without its jsonb copy (Record.PayloadOmitted).
var (
	reasonTooDeep = "nested more than " + strconv.Itoa(MaxJSONDepth) + " levels deep"
	reasonNUL     = `contains the NUL character \u0000, which jsonb cannot hold`
)

// reasonRefused is the reason for a value Postgres refused as jsonb.
func reasonRefused(err error) string {
	return "Postgres refused it as jsonb: " + describe(err)
}

// reasonMinimal is the reason for a record stored in its minimal form.
func reasonMinimal(err error) string {
	return "the record was stored in its minimal form (no payload, error details as text, identifiers cut to " +
		fmt.Sprint(maxIdentifierBytes) + " bytes) after Postgres refused it: " + describe(err)
}

// maxReasonBytes bounds a reason taken from a Postgres error: its detail
// may quote the failing row ("Failing row contains (…)"), a megabyte of it.
const maxReasonBytes = 1024

// describe is a Postgres error as a reason: its message and SQLSTATE.
func describe(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return cut(clean(err.Error()), maxReasonBytes)
	}
	msg := pgErr.Message
	if pgErr.Detail != "" {
		msg += ": " + pgErr.Detail
	}
	return cut(clean(msg), maxReasonBytes) + " (SQLSTATE " + pgErr.Code + ")"
}

// tooDeep reports whether b nests objects and arrays more than MaxJSONDepth
// deep. Counting brackets is a vectorised byte count, so the common value
// costs next to nothing; only a value with more brackets than the limit is
// scanned, skipping brackets inside strings.
func tooDeep(b []byte) bool {
	n := bytes.Count(b, []byte{'['})
	if n <= MaxJSONDepth {
		n += bytes.Count(b, []byte{'{'})
	}
	if n <= MaxJSONDepth {
		return false
	}
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxJSONDepth {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// nulEscape is how JSON spells a NUL character, which jsonb rejects.
var nulEscape = []byte(`\u0000`)

// payloadOf returns a value's jsonb input when it is JSON that Postgres
// accepts, else nil (the value is still stored byte for byte), and when a
// JSON value gets none, why.
//
// Unchecked, an object or array (first and last bytes) is passed to jsonb
// as it is, and Postgres validates it while it parses: ingest's batches are
// encoded that way (a full json.Valid is the largest per-record cost of
// ingest); a batch that holds a bad one fails its COPY and is written again
// checked. Scalars and anything else are always checked: they are short, or
// fail at once.
func payloadOf(value []byte, checked bool) (payload []byte, omitted string) {
	v := bytes.TrimSpace(value)
	if len(v) == 0 {
		return nil, ""
	}
	if v[0] == '{' || v[0] == '[' {
		if last := v[len(v)-1]; len(v) < 2 || (v[0] == '{') != (last == '}') || (v[0] == '[') != (last == ']') {
			return nil, "" // not JSON
		}
		if tooDeep(v) {
			return nil, reasonTooDeep
		}
		if !checked {
			if bytes.Contains(v, nulEscape) {
				return nil, reasonNUL
			}
			return value, ""
		}
	}
	if !json.Valid(v) {
		return nil, ""
	}
	if bytes.Contains(v, nulEscape) {
		return nil, reasonNUL
	}
	return value, ""
}

// jsonbSafe reports whether b, JSON made or checked by Redrive (a retry
// policy, meta, error details), can be given to jsonb as it is.
func jsonbSafe(b []byte) bool {
	return json.Valid(b) && !bytes.Contains(b, nulEscape) && !tooDeep(b)
}
