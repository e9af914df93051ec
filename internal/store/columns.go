package store

import (
	"bytes"
	"cmp"
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

// recordColumns are the record's columns (of the view redrive_record) in the
// order rows are read. A record is written as two rows (migration 00180):
// dataColumns of its wide row and lifecycleColumns of its lifecycle.
var recordColumns = []string{
	"id", "queue", "type", "state", "exhaustion", "attempt", "max_attempts",
	"source_partition", "source_offset", "source_timestamp", "source_group",
	"dlq_topic", "dlq_partition", "dlq_offset", "dlq_timestamp", "format",
	"key", "value", "headers", "payload", "error_type", "errors", "retry", "meta",
	"created_at", "enqueued_at", "next_retry_at", "discarded_at", "completed_at", "updated_at",
	"archive_state", "fingerprint", "payload_omitted", "failed_at",
	"value_schema", "key_schema", "key_payload", "decode_error", "decode_pending",
}

// lifecycleOnly are the columns of recordColumns that only the lifecycle row
// has: where a record stands, written by every change of state.
var lifecycleOnly = []string{"state", "exhaustion", "attempt", "enqueued_at", "next_retry_at", "discarded_at",
	"completed_at", "updated_at", "archive_state"}

// dataColumns are the columns of a record's wide row (redrive_record_data),
// in the order rowValues gives them.
var dataColumns = slices.DeleteFunc(slices.Clone(recordColumns), func(c string) bool { return slices.Contains(lifecycleOnly, c) })

// lifecycleColumns are the columns of a record's lifecycle row
// (redrive_lifecycle) an insert writes, in the order lifecycleValues gives
// them: its id, copies of the wide row's dimensions (which the statistics
// group by) and its state.
var lifecycleColumns = append([]string{"id", "queue", "type", "error_type", "fingerprint", "format", "bytes"}, lifecycleOnly...)

// readColumns are the columns a Record is read from: payload, error_type and
// failed_at are derived from value and errors, kept only for search and
// sorting; the redelivery and archive columns are set after insert.
var readColumns = strings.Join(append(slices.DeleteFunc(slices.Clone(recordColumns), func(c string) bool {
	return c == "payload" || c == "error_type" || c == "failed_at"
}), "redelivered_at", "redelivery", "archived_at", "redelivery_failure", "archive_reason", "archive_failure",
	"completed_by", "ack_due_at", "unacknowledged_at", "payload", "claim_prior"), ", ")

// readSQL is readColumns as a select list for reads shown to people (List,
// with scanShown): payload is read only when it is a decoded value
// (value_schema set), a JSON value's payload being its value, and
// claim_prior says whether a claim holds the record (inflight.go).
var readSQL = readSelect("", true)

// storedSQL is readSQL for the statements that read records to change them
// (with scanRecord): they see records as stored, so claim_prior is NULL and
// no claim is looked up per row.
var storedSQL = readSelect("", false)

// readSelect is readColumns as a select list, each column qualified with
// alias when it is not empty; shown says whether claim_prior is looked up.
func readSelect(alias string, shown bool) string {
	return readSelectOf(alias, alias, shown)
}

// lifecycleHeld are the record's columns (of the view redrive_record) that
// its lifecycle row holds; the wide row holds the others.
var lifecycleHeld = append(slices.Clone(lifecycleOnly), "redelivered_at", "archived_at", "claim_token", "redelivery_failure",
	"archive_reason", "archive_failure", "archive_retry_at", "archive_token", "completed_by", "ack_due_at",
	"unacknowledged_at", "fetch_at", "lease_until", "worker_id", "result")

// readSelectOf is readColumns as a select list over a record's wide row
// (aliased data) and lifecycle (aliased life), for statements that read the
// two tables, not the view (both "" for the view itself).
func readSelectOf(data, life string, shown bool) string {
	dq, lq := "", ""
	if data != "" {
		dq = data + "."
	}
	if life != "" {
		lq = life + "."
	}
	cols := strings.Split(readColumns, ", ")
	for i, c := range cols {
		cols[i] = dq + c
		if slices.Contains(lifecycleHeld, c) {
			cols[i] = lq + c
		}
		switch c {
		case "payload":
			cols[i] = "(CASE WHEN " + dq + "value_schema IS NOT NULL THEN " + dq + "payload END)::jsonb AS payload"
		case "claim_prior":
			cols[i] = "NULL::jsonb AS claim_prior"
			if shown {
				cols[i] = claimPriorExpr(cmp.Or(life, "redrive_record"))
			}
		}
	}
	return strings.Join(cols, ", ")
}

// Encoding names how a byte string is shown as text.
const (
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
)

// EncodeBytes returns b as text and the encoding used: UTF-8 when b is valid
// UTF-8 without NUL bytes (which Postgres text and JSON strings cannot hold), else base64.
func EncodeBytes(b []byte) (string, string) {
	if textSafe(b) {
		return string(b), EncodingUTF8
	}
	return base64.StdEncoding.EncodeToString(b), EncodingBase64
}

// textSafe says whether b can be kept as text: valid UTF-8 without NUL bytes.
func textSafe(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

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

// storedHeader is a header as kept in the headers column, which header
// filters match by containment. A key that is not valid UTF-8 without NUL
// bytes (Kafka allows any bytes) is kept in base64, with key_encoding saying
// so, so that the record is redelivered with exactly its own headers.
type storedHeader struct {
	Key         string `json:"key"`
	KeyEncoding string `json:"key_encoding,omitempty"`
	Value       string `json:"value"`
	Encoding    string `json:"encoding"`
}

// appendHeaders appends hs as the headers column stores them: a JSON array
// of storedHeader, written by hand (json.Marshal of the structs cost ingest
// 0.8 µs a record); every string in it is valid UTF-8 without NUL bytes
// (as EncodeBytes makes them), which appendJSONString needs.
func appendHeaders(dst []byte, hs []dlq.Header) []byte {
	dst = append(dst, '[')
	for i, h := range hs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		if clean(h.Key) != h.Key {
			k, enc := EncodeBytes([]byte(h.Key))
			dst = appendJSONString(dst, k)
			dst = append(dst, `,"key_encoding":`...)
			dst = appendJSONString(dst, enc)
		} else {
			dst = appendJSONString(dst, h.Key)
		}
		dst = append(dst, `,"value":`...)
		if textSafe(h.Value) { // EncodeBytes' test, without its copy
			dst = appendJSONString(dst, h.Value)
			dst = append(dst, `,"encoding":"`+EncodingUTF8+`"}`...)
		} else {
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, h.Value)
			dst = append(dst, `","encoding":"`+EncodingBase64+`"}`...)
		}
	}
	return append(dst, ']')
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
		key := h.Key
		if h.KeyEncoding != "" {
			k, err := DecodeBytes(h.Key, h.KeyEncoding)
			if err != nil {
				return nil, fmt.Errorf("decode header key %q: %w", h.Key, err)
			}
			key = string(k)
		}
		out[i] = dlq.Header{Key: key, Value: v}
	}
	return out, nil
}

// jsonMode says how JSON from the outside (a record's value, an error's
// details) is stored: the steps by which a row Postgres refuses is degraded.
type jsonMode int

const (
	// asJSON stores it as jsonb, searchable.
	asJSON jsonMode = iota
	// asTextDetails keeps error details as a string under "raw_details"
	// instead of JSON: the fallback for details that Go accepts but jsonb
	// rejects (numbers beyond numeric's range, lone surrogate escapes).
	asTextDetails
	// asText is asTextDetails without a payload, for a value jsonb rejects.
	// Nothing is dropped: the value is kept byte for byte.
	asText
	// asMinimal is asText with every indexed or counted value bounded
	// (queue, type, error type, group, fingerprint) and Redrive's own JSON
	// (retry, meta) replaced by {} unless jsonb can surely take it: the
	// last form tried before a row is deemed unstorable. Key, value and
	// headers are still kept byte for byte.
	asMinimal
	// asJSONUnchecked is asJSON with the value's payload only shaped like
	// JSON (see payloadOf), for Postgres to validate: ingest's fast path.
	asJSONUnchecked
)

// maxIdentifierBytes bounds identifiers in a row's minimal form: below a
// B-tree entry's limit (~2.7 kB) whatever the other columns of the index.
const maxIdentifierBytes = 255

// encodeErrors marshals an error history, keeping the newest dlq.MaxErrorHistory.
func encodeErrors(errs []dlq.ErrorEntry, mode jsonMode) ([]byte, error) {
	return appendErrors(make([]byte, 0, 256*min(len(errs), dlq.MaxErrorHistory)), errs, mode)
}

// appendErrors appends encodeErrors' JSON to dst: each entry cleaned (see
// clean) as it is written, its details kept as a string where jsonb could
// not take them (or mode says not to try).
func appendErrors(dst []byte, errs []dlq.ErrorEntry, mode jsonMode) ([]byte, error) {
	if len(errs) > dlq.MaxErrorHistory {
		errs = errs[len(errs)-dlq.MaxErrorHistory:]
	}
	dst = append(dst, '[')
	for i := range errs {
		e := errs[i] // a copy to clean: the record's own history is left as it is
		e.Type, e.Message = clean(e.Type), clean(e.Message)
		if mode == asMinimal {
			e.Type = cut(e.Type, maxIdentifierBytes)
		}
		if len(e.Backtrace) > 0 && !allClean(e.Backtrace) {
			e.Backtrace = slices.Clone(e.Backtrace)
			for j := range e.Backtrace {
				e.Backtrace[j] = clean(e.Backtrace[j])
			}
		}
		if len(e.Details) > 0 && (mode == asTextDetails || mode == asText || mode == asMinimal || !jsonbSafe(e.Details)) {
			raw, err := json.Marshal(map[string]string{"raw_details": clean(string(e.Details))})
			if err != nil {
				return nil, err
			}
			e.Details = raw
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendErrorJSON(dst, &e)
	}
	return append(dst, ']'), nil
}

// allClean says whether clean leaves every one of ss as it is.
func allClean(ss []string) bool {
	for _, s := range ss {
		if clean(s) != s {
			return false
		}
	}
	return true
}

// cut cuts s to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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

func jsonOr(b, fallback []byte) []byte {
	if len(b) == 0 {
		return fallback
	}
	return b
}

// emptyObject is the JSON {}: shared, never written to.
var emptyObject = []byte("{}")

// dims are a record's dimensions as its rows store them: cleaned, and cut in
// the minimal form. The wide row and the lifecycle's copies hold the same.
type dims struct{ queue, typ, errorType, group, fp string }

func dimsOf(r *dlq.Record, mode jsonMode) dims {
	d := dims{clean(r.Queue), clean(r.Type), clean(r.LastError().Type), clean(r.Source.Group), r.Fingerprint}
	if mode == asMinimal {
		d.queue, d.typ, d.errorType = cut(d.queue, maxIdentifierBytes), cut(d.typ, maxIdentifierBytes), cut(d.errorType, maxIdentifierBytes)
		d.group, d.fp = cut(d.group, maxIdentifierBytes), cut(clean(d.fp), maxIdentifierBytes)
	}
	return d
}

// lifecycleValues are the values of r's lifecycle row, in lifecycleColumns
// order, for a wide row written in mode.
func lifecycleValues(r *dlq.Record, id pgtype.UUID, mode jsonMode) []any {
	var a argRow
	writeLifecycleRow(&a, r, id, mode)
	return a.vals
}

// writeLifecycleRow writes r's lifecycle row to w.
func writeLifecycleRow(w rowWriter, r *dlq.Record, id pgtype.UUID, mode jsonMode) {
	d := dimsOf(r, mode)
	w.uuid(id)
	w.text(d.queue)
	w.text(d.typ)
	w.text(d.errorType)
	w.text(d.fp)
	w.text(string(r.Format))
	w.int8(int64(len(r.Key) + len(r.Value)))
	w.text(string(r.State))
	textOrNull(w, string(r.Exhaustion))
	w.int4(r.Attempt)
	timeOrNull(w, r.EnqueuedAt)
	timeOrNull(w, r.NextRetryAt)
	timeOrNull(w, r.DiscardedAt)
	timeOrNull(w, r.CompletedAt)
	w.timestamptz(r.UpdatedAt)
	textOrNull(w, archiveStateOf(r.State))
}

// writeCoordRow writes r's DLQ coordinates row to w.
func writeCoordRow(w rowWriter, r *dlq.Record, id pgtype.UUID) {
	w.text(r.DLQ.Topic)
	w.int4(int(r.DLQ.Partition))
	w.int8(r.DLQ.Offset)
	timeOrNegInf(w, r.DLQ.Timestamp)
	w.uuid(id)
}

// recordID is r's id as a binary uuid (uuid.UUID would be encoded as text
// through driver.Valuer).
func recordID(r *dlq.Record) (pgtype.UUID, error) {
	id, err := uuid.Parse(r.ID)
	if err != nil {
		return pgtype.UUID{}, fmt.Errorf("invalid id %q: %w", r.ID, err)
	}
	return pgtype.UUID{Bytes: id, Valid: true}, nil
}

// rowValues encodes r as the values of its wide row, in dataColumns order.
// reason is why a degraded row (asText, asMinimal) has no payload: it is
// kept when the value would have had one.
func rowValues(r *dlq.Record, mode jsonMode, reason string) ([]any, error) {
	id, err := recordID(r)
	if err != nil {
		return nil, err
	}
	var a argRow
	if err := writeDataRow(&a, r, id, mode, reason); err != nil {
		return nil, err
	}
	return a.vals, nil
}

// writeDataRow writes r's wide row to w (see rowValues).
func writeDataRow(w rowWriter, r *dlq.Record, id pgtype.UUID, mode jsonMode, reason string) error {
	d := dimsOf(r, mode)
	retry, meta := jsonOr(r.Retry, emptyObject), jsonOr(r.Meta, emptyObject)
	var payload []byte
	var omitted string
	if r.ValueSchema != nil {
		payload, omitted = decodedPayloadOf(r.Payload)
	} else {
		payload, omitted = payloadOf(r.Value, mode != asJSONUnchecked)
	}
	keyPayload, _ := decodedPayloadOf(r.KeyPayload)
	switch mode {
	case asText, asMinimal:
		if payload != nil {
			omitted = reason
		}
		payload, keyPayload = nil, nil
	}
	if mode == asMinimal {
		if !jsonbSafe(retry) {
			retry = emptyObject
		}
		if !jsonbSafe(meta) {
			meta = emptyObject
		}
	}
	w.uuid(id)
	w.text(d.queue)
	w.text(d.typ)
	w.int4(r.MaxAttempts)
	w.int4(int(r.Source.Partition))
	w.int8(r.Source.Offset)
	if r.Source.Timestamp.IsZero() {
		w.null()
	} else {
		w.timestamptz(r.Source.Timestamp)
	}
	w.text(d.group)
	w.text(r.DLQ.Topic)
	w.int4(int(r.DLQ.Partition))
	w.int8(r.DLQ.Offset)
	timeOrNegInf(w, r.DLQ.Timestamp)
	w.text(string(r.Format))
	w.bytea(r.Key)
	w.bytea(r.Value)
	w.built(appendHeaders(w.scratch(), r.Headers))
	w.jsonb(payload)
	w.text(d.errorType)
	errs, err := appendErrors(w.scratch(), r.Errors, mode)
	if err != nil {
		return fmt.Errorf("encode errors: %w", err)
	}
	w.built(errs)
	w.jsonb(retry)
	w.jsonb(meta)
	w.timestamptz(r.CreatedAt)
	w.text(d.fp)
	textOrNull(w, omitted)
	w.timestamptz(FailedAt(r))
	w.jsonb(schemaRefJSON(r.ValueSchema))
	w.jsonb(schemaRefJSON(r.KeySchema))
	w.jsonb(keyPayload)
	textOrNull(w, clean(r.DecodeError))
	w.boolean(r.DecodePending)
	return nil
}

// FailedAt is when a record's latest failure happened, as the failed_at
// column keeps it for sorting: its latest error's occurred_at, or when that
// is unknown its created_at.
func FailedAt(r *dlq.Record) time.Time {
	if at := r.LastError().OccurredAt; !at.IsZero() {
		return at
	}
	return r.CreatedAt
}

// nullIfEmptyString is s, or NULL when it is empty. (Not a *string: taking
// the address of a parameter moves it to the heap on every call.)
func nullIfEmptyString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// archiveStateOf is the archive state a record is written with ("" for
// none): a discarded record's copy is due (archiving on or off: with it off
// nothing takes it, and the API shows it as off).
func archiveStateOf(s dlq.State) string {
	if s != dlq.StateDiscarded {
		return ""
	}
	return string(dlq.ArchivePending)
}

// storedRedelivery is dlq.Redelivery as kept in the redelivery column.
type storedRedelivery struct {
	Topic         string         `json:"topic,omitempty"`
	Target        string         `json:"target,omitempty"`
	Headers       []storedHeader `json:"headers,omitempty"`
	Value         *string        `json:"value,omitempty"`
	ValueEncoding string         `json:"value_encoding,omitempty"`
	// Payload is the edited JSON as text: a jsonb value would lose its
	// member order (and the exact text of numbers like 1E+2).
	Payload     *string        `json:"payload,omitempty"`
	ValueSchema *dlq.SchemaRef `json:"value_schema,omitempty"`
}

func encodeRedelivery(r *dlq.Redelivery) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	out := storedRedelivery{Topic: r.Topic, Target: r.Target}
	for _, h := range r.Headers {
		v, enc := EncodeBytes(h.Value)
		out.Headers = append(out.Headers, storedHeader{Key: clean(h.Key), Value: v, Encoding: enc})
	}
	if r.ValueSet {
		v, enc := EncodeBytes(r.Value)
		out.Value, out.ValueEncoding = &v, enc
	}
	if r.Payload != nil {
		p := string(r.Payload)
		out.Payload = &p
	}
	out.ValueSchema = r.ValueSchema
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
	out := &dlq.Redelivery{Topic: in.Topic, Target: in.Target}
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
	if in.Payload != nil {
		out.Payload = []byte(*in.Payload)
	}
	out.ValueSchema = in.ValueSchema
	return out, nil
}

// decodedPayloadOf is a decoded value's (or key's) jsonb input: JSON that
// Redrive made (valid by construction, so not checked again on the hot
// path), within the same bounds as any payload (payloadOf).
func decodedPayloadOf(b []byte) ([]byte, string) {
	if len(b) == 0 {
		return nil, ""
	}
	return payloadOf(b, false)
}

// schemaRefJSON is how a value or key was decoded as its column stores it;
// NULL when it was not.
func schemaRefJSON(ref *dlq.SchemaRef) []byte {
	if ref == nil {
		return nil
	}
	b, _ := json.Marshal(ref) // a struct of strings and an int: cannot fail
	return b
}

func schemaRefOf(b []byte) (*dlq.SchemaRef, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var ref dlq.SchemaRef
	if err := json.Unmarshal(b, &ref); err != nil {
		return nil, fmt.Errorf("decode schema reference: %w", err)
	}
	return &ref, nil
}
