package httpapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/records"
)

// Export and import (docs/api.md, "Export and import"): GET
// /dead-letter/export streams the records a filter selects as NDJSON, one
// record per line (exportLine), oldest first, ending with a trailer line
// that says how many records it holds and whether it is complete; POST
// /dead-letter/import reads the same lines back (import.go).

// ndjsonType is the media type of an export and of an import's body.
const ndjsonType = "application/x-ndjson"

// exportWriteTimeout bounds writing one group of records to the client
// (records.GroupBytes): a client that stops reading for longer is dropped
// (the export ends without a trailer), freeing its connection.
const exportWriteTimeout = time.Minute

// exportRetryAfter is the Retry-After, in seconds, of an export refused
// past a cap (REDRIVE_EXPORTS_MAX, REDRIVE_EXPORTS_MAX_PER_KEY).
const exportRetryAfter = 30

// exportTime is an exact timestamp: RFC 3339 in UTC with every fraction
// digit Postgres keeps (microseconds), so that an import stores the same
// instant. The API's other timestamps show milliseconds.
type exportTime time.Time

func (t exportTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(time.RFC3339Nano) + `"`), nil
}

func optExportTime(t *time.Time) *exportTime {
	if t == nil || t.IsZero() {
		return nil
	}
	et := exportTime(*t)
	return &et
}

// exportLine is one exported record: exportHead, the key and the value,
// exportMiddle, the payloads, exportTail, in this order on its line.
// exportLineWriter writes the key, the value and the payloads straight from
// the record's bytes, encoded as they are written: a line never holds a
// copy of them.
type exportLine struct {
	exportHead
	// Key and Value are exact: text (utf8), base64, or for a value that is
	// compact JSON, that JSON itself (value_encoding json). Null when null.
	Key           *string         `json:"key"`
	KeyEncoding   *string         `json:"key_encoding"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding *string         `json:"value_encoding"`
	exportMiddle
	// Payload and KeyPayload are a schema-decoded value's and key's JSON
	// (value_schema, key_schema set); absent otherwise.
	Payload    json.RawMessage `json:"payload,omitempty"`
	KeyPayload json.RawMessage `json:"key_payload,omitempty"`
	exportTail
}

// exportHead is what a line says before the record's key.
type exportHead struct {
	// Masked says key, value, headers or errors are shown masked (the
	// caller may not unmask the queue): such a line is not the record, and
	// an import refuses it.
	Masked      bool            `json:"masked,omitempty"`
	ID          string          `json:"id"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Format      dlq.Format      `json:"format"`
	State       dlq.State       `json:"state"`
	Exhaustion  *dlq.Exhaustion `json:"exhaustion"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
}

// exportMiddle is what a line says between the record's value and its
// payloads.
type exportMiddle struct {
	Headers     []exportHeader  `json:"headers"`
	Source      exportSource    `json:"source"`
	DLQ         exportCoord     `json:"dlq"`
	Errors      []exportError   `json:"errors"`
	Retry       json.RawMessage `json:"retry"`
	Meta        json.RawMessage `json:"meta"`
	ValueSchema *dlq.SchemaRef  `json:"value_schema"`
	KeySchema   *dlq.SchemaRef  `json:"key_schema"`
}

// exportTail is what a line says last.
type exportTail struct {
	DecodeError *string     `json:"decode_error"`
	Incident    string      `json:"incident"`
	CreatedAt   exportTime  `json:"created_at"`
	FailedAt    exportTime  `json:"failed_at"`
	DiscardedAt *exportTime `json:"discarded_at"`
	CompletedAt *exportTime `json:"completed_at"`
}

type exportHeader struct {
	Key string `json:"key"`
	// KeyEncoding is base64 for a key that is not UTF-8 without NUL bytes
	// (Kafka allows any bytes); absent for the others.
	KeyEncoding string `json:"key_encoding,omitempty"`
	Value       string `json:"value"`
	Encoding    string `json:"encoding"`
}

type exportSource struct {
	Topic     string      `json:"topic"`
	Partition *int32      `json:"partition"`
	Offset    *int64      `json:"offset"`
	Timestamp *exportTime `json:"timestamp"`
	Group     string      `json:"group"`
}

type exportCoord struct {
	Topic     string      `json:"topic"`
	Partition int32       `json:"partition"`
	Offset    int64       `json:"offset"`
	Timestamp *exportTime `json:"timestamp"`
}

type exportError struct {
	Attempt    int             `json:"attempt"`
	Type       string          `json:"type"`
	Message    string          `json:"message"`
	Code       dlq.Code        `json:"code"`
	Backtrace  []string        `json:"backtrace"`
	Details    json.RawMessage `json:"details"`
	OccurredAt exportTime      `json:"occurred_at"`
}

// exportTrailer is an export's last line.
type exportTrailer struct {
	Export exportSummary `json:"export"`
}

type exportSummary struct {
	// Count is how many record lines precede the trailer.
	Count int64 `json:"count"`
	// Complete says every record the filter selected was written; false
	// when the export stopped on an error (Error says which).
	Complete bool            `json:"complete"`
	Filter   json.RawMessage `json:"filter"`
	Error    string          `json:"error,omitempty"`
}

// exportParams are the query parameters of an export: the list's filter
// keys.
var exportParams = map[string]bool{}

func init() {
	for _, p := range filter.Names(filter.List) {
		exportParams[p] = true
	}
}

// exportAllowed refuses an export the caller may not read all of: read on
// every queue, or on the one queue the filter names.
func exportAllowed(p auth.Principal, f *filter.Filter) error {
	if p.AllQueues(auth.ActionRead) || f.Queue != "" && p.Allowed(auth.ActionRead, f.Queue) {
		return nil
	}
	msg := "an export of every queue needs read on every queue; add queue= naming a queue you may read"
	if f.Queue != "" {
		msg = "you may not read queue " + jsonString(f.Queue) + "; export a queue you may read"
	}
	if globs := p.QueueGlobs(auth.ActionRead); len(globs) > 0 {
		msg += " (" + strings.Join(globs, ", ") + ")"
	}
	return &APIError{Status: http.StatusForbidden, Code: CodeForbidden, Message: msg,
		Details: map[string]any{"parameter": "queue", "required_action": string(auth.ActionRead)}}
}

// exportRecords is GET /dead-letter/export. It holds one group of records
// (records.GroupBytes) and a 32 KiB buffer, whatever the size of the export
// and of its records, and the exports running at once are capped, in total
// and per key (REDRIVE_EXPORTS_MAX, REDRIVE_EXPORTS_MAX_PER_KEY): past a cap
// the answer is 503 with Retry-After.
func (s *Server) exportRecords(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, exportParams); err != nil {
		return err
	}
	f, err := filter.ParseQuery(q, filter.List)
	if err != nil {
		return err
	}
	who := principal(c)
	if err := exportAllowed(who, &f); err != nil {
		return err
	}
	// Masked content is neither shown nor searched for a caller who may not
	// unmask it (masking.go), exactly as in the list.
	m := s.maskerOf(c)
	sc := filter.Scope{QueueGlobs: queueGlobs(c, auth.ActionRead)}
	if sc.OnlyQueues, err = s.searchScope(c.Request().Context(), m, &f); err != nil {
		return err
	}
	release, err := s.rec.BeginExport(streamOwner(c, s.cfg.AuthDisabled))
	if err != nil {
		return exportRefused(c, err)
	}
	defer release()
	canon := f.Canonical()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, ndjsonType)
	h.Set("Cache-Control", "no-store")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="redrive-export-`+s.cfg.Now().UTC().Format("20060102T150405Z")+`.ndjson"`)
	if c.Request().Method == http.MethodHead {
		return c.NoContent(http.StatusOK)
	}
	ctx := c.Request().Context()
	// The first group is read before the answer starts, so that a failure
	// to read is an error answer, not an export that stops at once.
	rd := s.rec.Export(&f, sc)
	group, err := rd.Next(ctx)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(c.Response())
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	c.Response().WriteHeader(http.StatusOK)
	w := newExportWriter(c.Response())
	var n int64
	archiving := !s.cfg.ArchiveDisabled
	summary := exportSummary{Filter: canon}
	gone := func(err error) error {
		s.log.Info("export stopped: the client is gone", "records", n, "err", err)
		noteAudit(c, "export", canon, &n)
		return nil
	}
	for len(group) > 0 {
		if err := rc.SetWriteDeadline(time.Now().Add(exportWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return gone(err)
		}
		for i := range group {
			r := &group[i]
			if !who.Allowed(auth.ActionRead, r.Queue) {
				continue // never with exportAllowed's answer; kept as the last word
			}
			err := w.line(m.record(r), m.masks(r.Queue), archiving)
			var bad *exportEncodeError
			if errors.As(err, &bad) {
				summary.Error = "record " + r.ID + " could not be written: " + bad.Error()
				break
			} else if err != nil {
				return gone(err)
			}
			n++
		}
		if err := w.flush(rc); err != nil {
			return gone(err)
		}
		if summary.Error != "" {
			break
		}
		clear(group) // the group is let go before the next is read
		if group, err = rd.Next(ctx); err != nil {
			if ctx.Err() != nil {
				return gone(ctx.Err())
			}
			s.log.Error("export stopped: reading records failed", "records", n, "err", err)
			summary.Error = "reading records failed; export again"
			break
		}
	}
	summary.Count, summary.Complete = n, summary.Error == ""
	noteAudit(c, "export", canon, &n)
	if err := w.trailer(rc, exportTrailer{Export: summary}); err != nil {
		s.log.Info("export stopped before its trailer: the client is gone", "records", n, "err", err)
	}
	return nil
}

// exportRefused answers an export refused past a cap (records.BeginExport):
// 503 with Retry-After, details naming the setting.
func exportRefused(c echo.Context, err error) error {
	var le *records.ExportLimitError
	if !errors.As(err, &le) {
		return err
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(exportRetryAfter))
	setting := "REDRIVE_EXPORTS_MAX"
	if le.PerOwner {
		setting = "REDRIVE_EXPORTS_MAX_PER_KEY"
	}
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError,
		Message: le.Error() + "; wait for an export to end, or try again later",
		Details: map[string]any{"limit": le.Limit, "setting": setting, "retry_after_seconds": exportRetryAfter}}
}

// exportEncodeError is a record an export could not write (its payload is
// not JSON): nothing of its line was written.
type exportEncodeError struct{ err error }

func (e *exportEncodeError) Error() string { return e.err.Error() }

// exportWriter writes an export's lines to a buffer of 32 KiB on the
// connection: each record's line as it is encoded, its key, value and
// payloads straight from the record's bytes, so that a line never holds a
// copy of them (a 1 MB value was held as a string, escaped, then again in
// the page's buffer). The lines are the bytes json.Marshal of exportLine,
// HTML left unescaped, gives (TestExportWriterWritesWhatMarshalWrites).
type exportWriter struct {
	bw *bufio.Writer
	// parts holds a line's head, middle and tail, encoded before anything
	// of the line is written, by enc.
	parts bytes.Buffer
	enc   *json.Encoder
}

func newExportWriter(w io.Writer) *exportWriter {
	x := &exportWriter{bw: bufio.NewWriterSize(w, 32<<10)}
	x.enc = json.NewEncoder(&x.parts)
	x.enc.SetEscapeHTML(false)
	return x
}

// line writes r's line, as the caller sees it (r masked when masked). An
// *exportEncodeError says the record cannot be written (nothing of it
// was); any other error is the connection's.
func (x *exportWriter) line(r *dlq.Record, masked, archiving bool) error {
	// The record as GET /dead-letter/{id} shows it, but for its key and
	// value (written from r) and its pending edit (not exported): the
	// rendering copies neither.
	bare := *r
	bare.Key, bare.Value, bare.Redelivery = nil, nil, nil
	out := toRecordJSON(&bare, archiving)
	head, middle, tail := toExportParts(r, out)
	head.Masked = masked
	var payload, keyPayload []byte
	if r.ValueSchema != nil {
		payload = r.Payload
	}
	if r.KeySchema != nil {
		keyPayload = r.KeyPayload
	}
	for _, p := range []struct {
		name string
		b    []byte
	}{{"payload", payload}, {"key_payload", keyPayload}} {
		if len(p.b) > 0 && !json.Valid(p.b) {
			return &exportEncodeError{errors.New(p.name + " is not valid JSON")}
		}
	}
	x.parts.Reset()
	var ends [3]int
	for i, part := range []any{head, middle, tail} {
		if err := x.enc.Encode(part); err != nil {
			return &exportEncodeError{err}
		}
		ends[i] = x.parts.Len() - 1 // without Encode's newline
	}
	b := x.parts.Bytes()
	x.bw.Write(b[:ends[0]-1]) // the head without its closing brace
	x.bw.WriteString(`,"key":`)
	x.bytesField(r.Key, "key", false)
	x.bw.WriteString(`,"value":`)
	x.bytesField(r.Value, "value", true)
	x.bw.WriteByte(',')
	x.bw.Write(b[ends[0]+2 : ends[1]-1]) // the middle without its braces
	if len(payload) > 0 {
		x.bw.WriteString(`,"payload":`)
		writeCompactJSON(x.bw, payload)
	}
	if len(keyPayload) > 0 {
		x.bw.WriteString(`,"key_payload":`)
		writeCompactJSON(x.bw, keyPayload)
	}
	x.bw.WriteByte(',')
	x.bw.Write(b[ends[1]+2 : ends[2]]) // the tail without its opening brace
	_, err := x.bw.WriteString("\n")
	return err
}

// bytesField writes a key or value and, after it, its encoding field
// (name_encoding), as an export shows it: null when null; text (utf8) when
// UTF-8 without NUL, or for a value that is compact JSON, that JSON itself
// (json); base64 otherwise. A value's text escapes <, > and & as
// json.Marshal does (as exports always wrote values); a key's does not.
func (x *exportWriter) bytesField(b []byte, name string, value bool) {
	w := x.bw
	enc := records.EncodingBase64
	switch {
	case b == nil:
		w.WriteString(`null,"` + name + `_encoding":null`)
		return
	case utf8.Valid(b) && bytes.IndexByte(b, 0) < 0:
		enc = records.EncodingUTF8
		if value && compactJSON(b) {
			enc = encodingJSON
			w.Write(b)
		} else {
			writeJSONString(w, b, value)
		}
	default:
		w.WriteByte('"')
		e := base64.NewEncoder(base64.StdEncoding, w)
		e.Write(b)
		e.Close()
		w.WriteByte('"')
	}
	w.WriteString(`,"` + name + `_encoding":"` + enc + `"`)
}

// flush sends what is buffered within exportWriteTimeout (set for the
// group by the caller).
func (x *exportWriter) flush(rc *http.ResponseController) error {
	if err := x.bw.Flush(); err != nil {
		return err
	}
	return rc.Flush()
}

// trailer writes and flushes the export's last line.
func (x *exportWriter) trailer(rc *http.ResponseController, t exportTrailer) error {
	if err := rc.SetWriteDeadline(time.Now().Add(exportWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	x.parts.Reset()
	if err := x.enc.Encode(t); err != nil {
		return err
	}
	x.bw.Write(x.parts.Bytes())
	return x.flush(rc)
}

// toExportParts is a record as an export writes it but for its key, value
// and payloads, from out, the record as the API shows it (toRecordJSON:
// what the caller may see of it), with exact timestamps from r.
func toExportParts(r *dlq.Record, out recordJSON) (exportHead, exportMiddle, exportTail) {
	head := exportHead{ID: out.ID, Queue: out.Queue, Type: out.Type, Format: out.Format, State: out.State, Exhaustion: out.Exhaustion,
		Attempt: out.Attempt, MaxAttempts: out.MaxAttempts}
	middle := exportMiddle{
		Headers: make([]exportHeader, len(out.Headers)),
		Source: exportSource{Topic: out.Source.Topic, Partition: out.Source.Partition, Offset: out.Source.Offset,
			Timestamp: optExportTime(&r.Source.Timestamp), Group: out.Source.Group},
		DLQ:    exportCoord{Topic: out.DLQ.Topic, Partition: out.DLQ.Partition, Offset: out.DLQ.Offset, Timestamp: optExportTime(&r.DLQ.Timestamp)},
		Errors: make([]exportError, len(out.Errors)),
		Retry:  out.Retry, Meta: out.Meta, ValueSchema: out.ValueSchema, KeySchema: out.KeySchema,
	}
	tail := exportTail{DecodeError: out.DecodeError, Incident: out.Incident,
		CreatedAt: exportTime(r.CreatedAt), FailedAt: exportTime(failedAt(r)),
		DiscardedAt: optExportTime(r.DiscardedAt), CompletedAt: optExportTime(r.CompletedAt)}
	for i, h := range out.Headers {
		middle.Headers[i] = exportHeader{Key: h.Key, Value: h.Value, Encoding: h.Encoding}
		if !utf8.ValidString(h.Key) || strings.IndexByte(h.Key, 0) >= 0 {
			middle.Headers[i].Key, middle.Headers[i].KeyEncoding = records.EncodeBytes([]byte(h.Key))
		}
	}
	for i, e := range out.Errors {
		at := time.Time(e.OccurredAt)
		if i < len(r.Errors) {
			at = r.Errors[i].OccurredAt
		}
		middle.Errors[i] = exportError{Attempt: e.Attempt, Type: e.Type, Message: e.Message, Code: e.Code,
			Backtrace: e.Backtrace, Details: e.Details, OccurredAt: exportTime(at)}
	}
	return head, middle, tail
}

// failedAt is when the record's latest failure happened (store.FailedAt).
func failedAt(r *dlq.Record) time.Time {
	if at := r.LastError().OccurredAt; !at.IsZero() {
		return at
	}
	return r.CreatedAt
}

// encodingJSON is the value_encoding of a value written as the JSON it is.
const encodingJSON = "json"

// compactJSON reports whether b is one JSON value written without
// insignificant whitespace: written into a line as it is, it is the same
// bytes, on one line. It copies nothing.
func compactJSON(b []byte) bool {
	return len(b) > 0 && json.Valid(b) && !spaceOutsideStrings(b)
}

// spaceOutsideStrings reports whether JSON text b has whitespace outside
// its strings.
func spaceOutsideStrings(b []byte) bool {
	in, esc := false, false
	for _, c := range b {
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return true
		}
	}
	return false
}

// writeCompactJSON writes valid JSON text b without its insignificant
// whitespace (what json.Compact gives), as it goes.
func writeCompactJSON(w *bufio.Writer, b []byte) {
	in, esc, from := false, false, 0
	for i, c := range b {
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			w.Write(b[from:i])
			from = i + 1
		}
	}
	w.Write(b[from:])
}

// writeJSONString writes b, valid UTF-8, as a JSON string, escaped as
// encoding/json escapes a string (escapeHTML: <, > and & too), as it goes:
// exports, and the key and value of a record read.
func writeJSONString(w *bufio.Writer, b []byte, escapeHTML bool) {
	const hex = "0123456789abcdef"
	w.WriteByte('"')
	from := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			w.Write(b[from:i])
			switch c {
			case '"', '\\':
				w.Write([]byte{'\\', c})
			case '\b':
				w.WriteString(`\b`)
			case '\f':
				w.WriteString(`\f`)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.Write([]byte{'\\', 'u', '0', '0', hex[c>>4], hex[c&0xF]})
			}
			i++
			from = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == '\u2028' || r == '\u2029' { // as encoding/json: for JSONP
			w.Write(b[from:i])
			w.Write([]byte{'\\', 'u', '2', '0', '2', hex[r&0xF]})
			from = i + size
		}
		i += size
	}
	w.Write(b[from:])
	w.WriteByte('"')
}
