package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
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

// exportPageSize is how many records an export reads, writes and flushes
// at a time: its memory is one page of whole records.
const exportPageSize = 200

// exportPageWriteTimeout bounds writing one page to the client: a client
// that stops reading for longer is dropped (the export ends without a
// trailer), freeing its connection.
const exportPageWriteTimeout = time.Minute

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

// exportLine is one exported record.
type exportLine struct {
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
	// Key and Value are exact: text (utf8), base64, or for a value that is
	// compact JSON, that JSON itself (value_encoding json). Null when null.
	Key           *string         `json:"key"`
	KeyEncoding   *string         `json:"key_encoding"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding *string         `json:"value_encoding"`
	Headers       []exportHeader  `json:"headers"`
	Source        exportSource    `json:"source"`
	DLQ           exportCoord     `json:"dlq"`
	Errors        []exportError   `json:"errors"`
	Retry         json.RawMessage `json:"retry"`
	Meta          json.RawMessage `json:"meta"`
	ValueSchema   *dlq.SchemaRef  `json:"value_schema"`
	KeySchema     *dlq.SchemaRef  `json:"key_schema"`
	// Payload and KeyPayload are a schema-decoded value's and key's JSON
	// (value_schema, key_schema set); absent otherwise.
	Payload     json.RawMessage `json:"payload,omitempty"`
	KeyPayload  json.RawMessage `json:"key_payload,omitempty"`
	DecodeError *string         `json:"decode_error"`
	Incident    string          `json:"incident"`
	CreatedAt   exportTime      `json:"created_at"`
	FailedAt    exportTime      `json:"failed_at"`
	DiscardedAt *exportTime     `json:"discarded_at"`
	CompletedAt *exportTime     `json:"completed_at"`
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

// exportRecords is GET /dead-letter/export.
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
	canon := f.Canonical()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, ndjsonType)
	h.Set("Cache-Control", "no-store")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="redrive-export-`+s.cfg.Now().UTC().Format("20060102T150405Z")+`.ndjson"`)
	if c.Request().Method == http.MethodHead {
		return c.NoContent(http.StatusOK)
	}
	ctx := c.Request().Context()
	// The first page is read before the answer starts, so that a failure
	// to read is an error answer, not an export that stops at once.
	page, err := s.rec.ExportPage(ctx, &f, sc, "", exportPageSize)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(c.Response())
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	c.Response().WriteHeader(http.StatusOK)
	var n int64
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	archiving := !s.cfg.ArchiveDisabled
	summary := exportSummary{Filter: canon}
	for {
		buf.Reset()
		for i := range page {
			r := &page[i]
			if !who.Allowed(auth.ActionRead, r.Queue) {
				continue // never with exportAllowed's answer; kept as the last word
			}
			shown := m.record(r)
			line := toExportLine(shown, toRecordJSON(shown, archiving))
			line.Masked = m.masks(r.Queue)
			if err := enc.Encode(line); err != nil {
				summary.Error = "record " + r.ID + " could not be written: " + err.Error()
				break
			}
			n++
		}
		if summary.Error == "" {
			if err := s.writeExport(rc, c, buf.Bytes()); err != nil {
				s.log.Info("export stopped: the client is gone", "records", n, "err", err)
				noteAudit(c, "export", canon, &n)
				return nil
			}
		}
		if summary.Error != "" || len(page) < exportPageSize {
			break
		}
		if page, err = s.rec.ExportPage(ctx, &f, sc, page[len(page)-1].ID, exportPageSize); err != nil {
			if ctx.Err() != nil {
				s.log.Info("export stopped: the client is gone", "records", n)
				noteAudit(c, "export", canon, &n)
				return nil
			}
			s.log.Error("export stopped: reading records failed", "records", n, "err", err)
			summary.Error = "reading records failed; export again"
			break
		}
	}
	summary.Count, summary.Complete = n, summary.Error == ""
	noteAudit(c, "export", canon, &n)
	buf.Reset()
	if err := enc.Encode(exportTrailer{Export: summary}); err != nil {
		return nil
	}
	if err := s.writeExport(rc, c, buf.Bytes()); err != nil {
		s.log.Info("export stopped before its trailer: the client is gone", "records", n, "err", err)
	}
	return nil
}

// writeExport writes and flushes part of an export within
// exportPageWriteTimeout.
func (s *Server) writeExport(rc *http.ResponseController, c echo.Context, b []byte) error {
	if err := rc.SetWriteDeadline(time.Now().Add(exportPageWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := c.Response().Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// toExportLine is a record as an export writes it, from out, the record as
// the API shows it (toRecordJSON: what the caller may see of it), with
// exact timestamps from r.
func toExportLine(r *dlq.Record, out recordJSON) exportLine {
	l := exportLine{
		ID: out.ID, Queue: out.Queue, Type: out.Type, Format: out.Format, State: out.State, Exhaustion: out.Exhaustion,
		Attempt: out.Attempt, MaxAttempts: out.MaxAttempts,
		Key: out.Key, KeyEncoding: out.KeyEncoding,
		Headers: make([]exportHeader, len(out.Headers)),
		Source: exportSource{Topic: out.Source.Topic, Partition: out.Source.Partition, Offset: out.Source.Offset,
			Timestamp: optExportTime(&r.Source.Timestamp), Group: out.Source.Group},
		DLQ:    exportCoord{Topic: out.DLQ.Topic, Partition: out.DLQ.Partition, Offset: out.DLQ.Offset, Timestamp: optExportTime(&r.DLQ.Timestamp)},
		Errors: make([]exportError, len(out.Errors)),
		Retry:  out.Retry, Meta: out.Meta,
		ValueSchema: out.ValueSchema, KeySchema: out.KeySchema, DecodeError: out.DecodeError, Incident: out.Incident,
		CreatedAt: exportTime(r.CreatedAt), FailedAt: exportTime(failedAt(r)),
		DiscardedAt: optExportTime(r.DiscardedAt), CompletedAt: optExportTime(r.CompletedAt),
	}
	l.Value, l.ValueEncoding = exportValue(out.Value, out.ValueEncoding)
	if r.ValueSchema != nil {
		l.Payload = out.Payload
	}
	if r.KeySchema != nil {
		l.KeyPayload = out.KeyPayload
	}
	for i, h := range out.Headers {
		l.Headers[i] = exportHeader{Key: h.Key, Value: h.Value, Encoding: h.Encoding}
		if !utf8.ValidString(h.Key) || strings.IndexByte(h.Key, 0) >= 0 {
			l.Headers[i].Key, l.Headers[i].KeyEncoding = records.EncodeBytes([]byte(h.Key))
		}
	}
	for i, e := range out.Errors {
		at := time.Time(e.OccurredAt)
		if i < len(r.Errors) {
			at = r.Errors[i].OccurredAt
		}
		l.Errors[i] = exportError{Attempt: e.Attempt, Type: e.Type, Message: e.Message, Code: e.Code,
			Backtrace: e.Backtrace, Details: e.Details, OccurredAt: exportTime(at)}
	}
	return l
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

// exportValue is a value as an export writes it: a UTF-8 value that is
// compact JSON as its own JSON (value_encoding json: the same bytes, so
// that tools like jq read it as it is); any other as a JSON string of its
// encoding (utf8 or base64); null as null.
func exportValue(v, enc *string) (json.RawMessage, *string) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	if *enc == records.EncodingUTF8 && compactJSON([]byte(*v)) {
		e := encodingJSON
		return json.RawMessage(*v), &e
	}
	s, _ := json.Marshal(*v)
	return s, enc
}

// compactJSON reports whether b is one JSON value written without
// insignificant whitespace: written into a line as it is, it is the same
// bytes, on one line.
func compactJSON(b []byte) bool {
	if len(b) == 0 || !json.Valid(b) {
		return false
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return false
	}
	return bytes.Equal(c.Bytes(), b)
}
