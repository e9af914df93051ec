package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/redrive/redrive/internal/dlq"
)

// recordColumns are redrive_record's columns in the order rows are written and read.
var recordColumns = []string{
	"id", "queue", "type", "state", "exhaustion", "attempt", "max_attempts",
	"source_partition", "source_offset", "source_timestamp", "source_group",
	"dlq_topic", "dlq_partition", "dlq_offset", "dlq_timestamp", "format",
	"key", "value", "headers", "payload", "error_type", "errors", "retry", "meta",
	"created_at", "enqueued_at", "next_retry_at", "discarded_at", "completed_at", "updated_at",
	"archive_state", "fingerprint",
}

var insertColumns = strings.Join(recordColumns, ", ")

// readColumns are the columns a Record is read from: payload and error_type are
// derived from value and errors, kept only for search; the redelivery and
// archive columns are set after insert.
var readColumns = strings.Join(append(slices.DeleteFunc(slices.Clone(recordColumns), func(c string) bool {
	return c == "payload" || c == "error_type"
}), "redelivered_at", "redelivery", "archived_at", "redelivery_failure", "archive_reason", "archive_failure"), ", ")

// Encoding names how a byte string is shown as text.
const (
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
)

// EncodeBytes returns b as text and the encoding used: UTF-8 when b is valid
// UTF-8 without NUL bytes (which Postgres text and JSON strings cannot hold), else base64.
func EncodeBytes(b []byte) (string, string) {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return string(b), EncodingUTF8
	}
	return base64.StdEncoding.EncodeToString(b), EncodingBase64
}

// DecodeBytes reverses EncodeBytes.
func DecodeBytes(s, encoding string) ([]byte, error) {
	switch encoding {
	case EncodingUTF8, "":
		return []byte(s), nil
	case EncodingBase64:
		return base64.StdEncoding.DecodeString(s)
	}
	return nil, fmt.Errorf("unknown encoding %q", encoding)
}

// storedHeader is a header as kept in the headers column; it is also the API shape.
type storedHeader struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding"`
}

func encodeHeaders(hs []dlq.Header) ([]byte, error) {
	out := make([]storedHeader, len(hs))
	for i, h := range hs {
		v, enc := EncodeBytes(h.Value)
		out[i] = storedHeader{Key: clean(h.Key), Value: v, Encoding: enc}
	}
	return json.Marshal(out)
}

func decodeHeaders(b []byte) ([]dlq.Header, error) {
	var in []storedHeader
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decode headers: %w", err)
	}
	out := make([]dlq.Header, len(in))
	for i, h := range in {
		v, err := DecodeBytes(h.Value, h.Encoding)
		if err != nil {
			return nil, fmt.Errorf("decode header %q: %w", h.Key, err)
		}
		out[i] = dlq.Header{Key: h.Key, Value: v}
	}
	return out, nil
}

// nulEscape is how JSON spells a NUL character, which jsonb rejects.
var nulEscape = []byte(`\u0000`)

// payloadOf returns the value as jsonb input when it is JSON that Postgres
// accepts, else nil (the value is still stored byte for byte).
func payloadOf(value []byte) []byte {
	if len(value) == 0 || !json.Valid(value) || bytes.Contains(value, nulEscape) {
		return nil
	}
	return value
}

// looksLikeJSON is payloadOf without the full check: an object or array
// without a NUL escape is passed to jsonb as it is, and Postgres validates it
// while it parses. Ingest's batches use it (a full json.Valid is the largest
// per-record cost of ingest); a batch that holds a bad one fails its COPY and
// is written again with the full check (see InsertEncoded).
func looksLikeJSON(value []byte) []byte {
	v := bytes.TrimSpace(value)
	if len(v) < 2 || bytes.Contains(value, nulEscape) {
		return nil
	}
	switch v[0] {
	case '{':
		return nilUnless(v[len(v)-1] == '}', value)
	case '[':
		return nilUnless(v[len(v)-1] == ']', value)
	}
	return payloadOf(value) // anything else: a scalar, or text that fails at once
}

func nilUnless(ok bool, b []byte) []byte {
	if ok {
		return b
	}
	return nil
}

// jsonMode says how JSON from the outside (a record's value, an error's
// details) is stored.
type jsonMode int

const (
	// asJSON stores it as jsonb, searchable.
	asJSON jsonMode = iota
	// asText is the fallback for JSON that Go accepts but jsonb rejects
	// (numbers beyond numeric's range, lone surrogate escapes): no payload, and
	// error details kept as a string under "raw_details". Nothing is dropped.
	asText
	// asJSONUnchecked is asJSON with the value's payload only shaped like
	// JSON (looksLikeJSON), for Postgres to validate: ingest's fast path.
	asJSONUnchecked
)

// encodeErrors marshals an error history, keeping the newest dlq.MaxErrorHistory.
func encodeErrors(errs []dlq.ErrorEntry, mode jsonMode) ([]byte, error) {
	if len(errs) > dlq.MaxErrorHistory {
		errs = errs[len(errs)-dlq.MaxErrorHistory:]
	}
	cleaned := make([]dlq.ErrorEntry, len(errs))
	for i, e := range errs {
		e.Type, e.Message = clean(e.Type), clean(e.Message)
		for j := range e.Backtrace {
			e.Backtrace[j] = clean(e.Backtrace[j])
		}
		if len(e.Details) > 0 && (mode == asText || !json.Valid(e.Details) || bytes.Contains(e.Details, nulEscape)) {
			raw, err := json.Marshal(map[string]string{"raw_details": clean(string(e.Details))})
			if err != nil {
				return nil, err
			}
			e.Details = raw
		}
		cleaned[i] = e
	}
	return appendErrorsJSON(make([]byte, 0, 256*len(cleaned)), cleaned), nil
}

// clean makes s storable in Postgres text: valid UTF-8, no NUL bytes.
func clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func nullIfEmpty(s dlq.Exhaustion) *string {
	if s == "" {
		return nil
	}
	v := string(s)
	return &v
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func jsonOr(b []byte, fallback string) []byte {
	if len(b) == 0 {
		return []byte(fallback)
	}
	return b
}

// rowValues encodes r as the values of one row, in recordColumns order.
func rowValues(r *dlq.Record, mode jsonMode) ([]any, error) {
	headers, err := encodeHeaders(r.Headers)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	errs, err := encodeErrors(r.Errors, mode)
	if err != nil {
		return nil, fmt.Errorf("encode errors: %w", err)
	}
	id, err := uuid.Parse(r.ID) // as bytes: uuid.UUID would be encoded as text through driver.Valuer
	if err != nil {
		return nil, fmt.Errorf("invalid id %q: %w", r.ID, err)
	}
	errorType := clean(r.LastError().Type)
	var payload []byte
	switch mode {
	case asJSON:
		payload = payloadOf(r.Value)
	case asJSONUnchecked:
		payload = looksLikeJSON(r.Value)
	}
	return []any{
		pgtype.UUID{Bytes: id, Valid: true}, clean(r.Queue), clean(r.Type), string(r.State), nullIfEmpty(r.Exhaustion), r.Attempt, r.MaxAttempts,
		r.Source.Partition, r.Source.Offset, timeOrNil(r.Source.Timestamp), clean(r.Source.Group),
		r.DLQ.Topic, r.DLQ.Partition, r.DLQ.Offset, timestampOrNegInf(r.DLQ.Timestamp), string(r.Format),
		r.Key, r.Value, headers, payload, errorType, errs, jsonOr(r.Retry, "{}"), jsonOr(r.Meta, "{}"),
		r.CreatedAt, r.EnqueuedAt, r.NextRetryAt, r.DiscardedAt, r.CompletedAt, r.UpdatedAt,
		archiveStateOf(r.State), r.Fingerprint,
	}, nil
}

// timestampOrNegInf stores an unknown timestamp as -infinity, as the column
// does for rows stored before it existed.
func timestampOrNegInf(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// archiveStateOf is the archive state a record is written with: a discarded
// record's copy is due (archiving on or off: with it off nothing takes it, and
// the API shows it as off).
func archiveStateOf(s dlq.State) *string {
	if s != dlq.StateDiscarded {
		return nil
	}
	v := string(dlq.ArchivePending)
	return &v
}

// storedRedelivery is dlq.Redelivery as kept in the redelivery column.
type storedRedelivery struct {
	Topic         string         `json:"topic,omitempty"`
	Headers       []storedHeader `json:"headers,omitempty"`
	Value         *string        `json:"value,omitempty"`
	ValueEncoding string         `json:"value_encoding,omitempty"`
}

func encodeRedelivery(r *dlq.Redelivery) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	out := storedRedelivery{Topic: r.Topic}
	for _, h := range r.Headers {
		v, enc := EncodeBytes(h.Value)
		out.Headers = append(out.Headers, storedHeader{Key: clean(h.Key), Value: v, Encoding: enc})
	}
	if r.ValueSet {
		v, enc := EncodeBytes(r.Value)
		out.Value, out.ValueEncoding = &v, enc
	}
	return json.Marshal(out)
}

func decodeRedelivery(b []byte) (*dlq.Redelivery, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in storedRedelivery
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decode redelivery: %w", err)
	}
	out := &dlq.Redelivery{Topic: in.Topic}
	for _, h := range in.Headers {
		v, err := DecodeBytes(h.Value, h.Encoding)
		if err != nil {
			return nil, fmt.Errorf("decode redelivery header %q: %w", h.Key, err)
		}
		out.Headers = append(out.Headers, dlq.Header{Key: h.Key, Value: v})
	}
	if in.Value != nil {
		v, err := DecodeBytes(*in.Value, in.ValueEncoding)
		if err != nil {
			return nil, fmt.Errorf("decode redelivery value: %w", err)
		}
		out.Value, out.ValueSet = v, true
	}
	return out, nil
}
