package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/records"
)

// Bounds of an import (docs/api.md).
const (
	// MaxImportBytes bounds an import's body.
	MaxImportBytes = 256 << 20
	// MaxImportLineBytes bounds one line: a record of the largest value
	// Kafka is usually configured for, in base64, with room to spare.
	MaxImportLineBytes = 16 << 20
	// importBatch is how many records are staged at a time, at most;
	// importBatchBytes bounds a batch's lines (a line longer than that is
	// a batch of its own): an import holds a few megabytes of records
	// whatever their sizes.
	importBatch      = 500
	importBatchBytes = records.GroupBytes
	// importDeadline bounds reading an import and answering it, in place
	// of the server's read and write timeouts (made for small calls).
	importDeadline = 15 * time.Minute
	// maxImportHeaders bounds a record's headers.
	maxImportHeaders = 1000
	// maxImportAttempt bounds attempt and max_attempts.
	maxImportAttempt = 1_000_000
)

// importLine is one line of an import: a record as exportLine writes it.
// Every field is checked; failed_at and incident are read and checked but
// not stored as they are (the importing Redrive derives both from the
// errors), and state, exhaustion, max_attempts, retry, discarded_at and
// completed_at describe the record where it was exported from: the import
// decides them (records.PrepareImport).
type importLine struct {
	Masked        bool             `json:"masked"`
	ID            *string          `json:"id"`
	Queue         *string          `json:"queue"`
	Type          string           `json:"type"`
	Format        *string          `json:"format"`
	State         *string          `json:"state"`
	Exhaustion    *string          `json:"exhaustion"`
	Attempt       *int             `json:"attempt"`
	MaxAttempts   *int             `json:"max_attempts"`
	Key           *string          `json:"key"`
	KeyEncoding   *string          `json:"key_encoding"`
	Value         json.RawMessage  `json:"value"`
	ValueEncoding *string          `json:"value_encoding"`
	Headers       []importHeader   `json:"headers"`
	Source        *importSource    `json:"source"`
	DLQ           *importCoord     `json:"dlq"`
	Errors        []importError    `json:"errors"`
	Retry         json.RawMessage  `json:"retry"`
	Meta          json.RawMessage  `json:"meta"`
	ValueSchema   *importSchemaRef `json:"value_schema"`
	KeySchema     *importSchemaRef `json:"key_schema"`
	Payload       json.RawMessage  `json:"payload"`
	KeyPayload    json.RawMessage  `json:"key_payload"`
	DecodeError   *string          `json:"decode_error"`
	Incident      *string          `json:"incident"`
	CreatedAt     *string          `json:"created_at"`
	FailedAt      *string          `json:"failed_at"`
	DiscardedAt   *string          `json:"discarded_at"`
	CompletedAt   *string          `json:"completed_at"`
}

type importHeader struct {
	Key         *string `json:"key"`
	KeyEncoding *string `json:"key_encoding"`
	Value       *string `json:"value"`
	Encoding    *string `json:"encoding"`
}

type importSource struct {
	Topic     string  `json:"topic"`
	Partition *int32  `json:"partition"`
	Offset    *int64  `json:"offset"`
	Timestamp *string `json:"timestamp"`
	Group     string  `json:"group"`
}

type importCoord struct {
	Topic     *string `json:"topic"`
	Partition *int32  `json:"partition"`
	Offset    *int64  `json:"offset"`
	Timestamp *string `json:"timestamp"`
}

type importError struct {
	Attempt    *int            `json:"attempt"`
	Type       *string         `json:"type"`
	Message    *string         `json:"message"`
	Code       *string         `json:"code"`
	Backtrace  []string        `json:"backtrace"`
	Details    json.RawMessage `json:"details"`
	OccurredAt *string         `json:"occurred_at"`
}

type importSchemaRef struct {
	RegistryID *int   `json:"registry_id"`
	Type       string `json:"type"`
	Subject    string `json:"subject"`
	Message    string `json:"message"`
}

// importJSON answers an import.
type importJSON struct {
	State    dlq.State `json:"state"`
	Received int       `json:"received"`
	Imported int       `json:"imported"`
	Skipped  int       `json:"skipped"`
}

// lineError is a line refused: its number (1-based) and the field at fault.
type lineError struct {
	line   int
	field  string
	msg    string
	status int
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s: %s", e.line, e.field, e.msg) }

func (e *lineError) apiError() *APIError {
	status := e.status
	if status == 0 {
		status = http.StatusUnprocessableEntity
	}
	code := CodeValidationError
	switch status {
	case http.StatusForbidden:
		code = CodeForbidden
	case http.StatusRequestEntityTooLarge:
		code = CodeInvalidRequest
	}
	return &APIError{Status: status, Code: code, Message: e.Error(),
		Details: map[string]any{"line": e.line, "field": e.field, "parameter": "body"}}
}

// importParams are the query parameters of an import.
var importParams = map[string]bool{"state": true}

// importRecords is POST /dead-letter/import: NDJSON records, as an export
// writes them, stored all or nothing.
func (s *Server) importRecords(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, importParams); err != nil {
		return err
	}
	state := dlq.StateDiscarded
	if v := q.Get("state"); v != "" {
		state = dlq.State(v)
		if state != dlq.StateDiscarded && state != dlq.StateRetryable {
			return invalidParam("state", "must be discarded (the default: kept for an operator) or retryable (scheduled by this "+
				"Redrive's policy for each record's queue), got "+jsonString(v))
		}
	}
	rc := http.NewResponseController(c.Response())
	deadline := time.Now().Add(importDeadline)
	for _, set := range []func(time.Time) error{rc.SetReadDeadline, rc.SetWriteDeadline} {
		if err := set(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	who := principal(c)
	now := s.cfg.Now().UTC()
	body := &readErr{r: c.Request().Body}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxImportLineBytes)
	lineNo, trailerAt, count := 0, 0, 0
	var batch []dlq.Record
	next := func() ([]dlq.Record, error) {
		clear(batch) // the records staged are let go before the next are read
		batch = batch[:0]
		size := 0
		for len(batch) < importBatch && size < importBatchBytes && sc.Scan() {
			lineNo++
			if body.err != nil {
				// The body could not be read to its end (over its limit, or
				// cut): the scanner gives what it had read as a last line,
				// cut short. The body is refused for what stopped it, not for
				// that line.
				return nil, scanError(body.err, lineNo)
			}
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			if trailerAt != 0 {
				return nil, &lineError{line: lineNo, field: "export", msg: fmt.Sprintf("nothing may follow the export's trailer (line %d)", trailerAt)}
			}
			if bytes.HasPrefix(line, []byte(`{"export"`)) {
				if err := checkTrailer(line, lineNo, count); err != nil {
					return nil, err
				}
				trailerAt = lineNo
				continue
			}
			r, err := parseImportLine(line)
			if err != nil {
				return nil, withLine(err, lineNo)
			}
			if !who.Allowed(auth.ActionAdmin, r.Queue) {
				return nil, &lineError{line: lineNo, field: "queue", status: http.StatusForbidden,
					msg: "importing into queue " + jsonString(r.Queue) + " needs admin on it"}
			}
			if err := s.rec.PrepareImport(&r, state, now); err != nil {
				var ref *records.ImportRefusal
				if errors.As(err, &ref) {
					return nil, &lineError{line: lineNo, field: ref.Field, msg: ref.Msg}
				}
				return nil, err
			}
			batch = append(batch, r)
			size += len(line)
			count++
		}
		if err := sc.Err(); err != nil {
			return nil, scanError(err, lineNo+1)
		}
		if len(batch) == 0 {
			return nil, nil
		}
		return batch, nil
	}
	res, err := s.rec.Import(c.Request().Context(), next)
	var le *lineError
	switch {
	case errors.As(err, &le):
		noteAudit(c, "import:"+string(state), nil, count64(0))
		return le.apiError()
	case errors.Is(err, records.ErrRecordRefused):
		noteAudit(c, "import:"+string(state), nil, count64(0))
		return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeValidationError,
			Message: "body: " + err.Error() + "; nothing was imported", Details: map[string]any{"parameter": "body"}}
	case err != nil:
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			noteAudit(c, "import:"+string(state), nil, count64(0))
		}
		return err
	}
	out := importJSON{State: state, Received: res.Received, Imported: res.Imported, Skipped: res.Skipped}
	noteAudit(c, "import:"+string(state), nil, count64(res.Imported))
	noteChange(c, nil, out)
	return c.JSON(http.StatusOK, out)
}

// readErr is a request body that keeps the error that ended its reading,
// if not its end: the scanner reading it gives the last line it had
// read, cut short, before it says why.
type readErr struct {
	r   io.Reader
	err error
}

func (b *readErr) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && b.err == nil {
		b.err = err
	}
	return n, err
}

// scanError says why the body could not be read past line: a line or a
// body over its bound (413), or the read failed.
func scanError(err error, line int) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeInvalidRequest,
			Message: fmt.Sprintf("body: larger than the limit of %d bytes for an import; import it in parts (redrive dlq export with --since and --until)", MaxImportBytes),
			Details: map[string]any{"parameter": "body", "line": line}}
	case errors.Is(err, bufio.ErrTooLong):
		return &lineError{line: line, field: "line", status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("longer than the limit of %d bytes", MaxImportLineBytes)}
	}
	return invalidParam("body", "could not be read: "+err.Error())
}

// withLine names the line of a field error.
func withLine(err error, line int) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		field, _ := apiErr.Details["parameter"].(string)
		msg := strings.TrimPrefix(apiErr.Message, field+": ")
		if field == "" {
			field = "body"
		}
		return &lineError{line: line, field: field, msg: msg}
	}
	return err
}

// checkTrailer reads an export's trailer: it must say the export is
// complete and how many records precede it, as many as did.
func checkTrailer(line []byte, lineNo, count int) error {
	var t struct {
		Export *struct {
			Count    *int            `json:"count"`
			Complete *bool           `json:"complete"`
			Filter   json.RawMessage `json:"filter"`
			Error    string          `json:"error"`
		} `json:"export"`
	}
	if err := decodeStrict(line, &t); err != nil {
		return withLine(prefixField(err, "export."), lineNo)
	}
	switch {
	case t.Export == nil || t.Export.Count == nil || t.Export.Complete == nil:
		return &lineError{line: lineNo, field: "export", msg: "an export's trailer says count and complete"}
	case !*t.Export.Complete:
		why := ""
		if t.Export.Error != "" {
			why = " (" + t.Export.Error + ")"
		}
		return &lineError{line: lineNo, field: "export.complete", msg: "the export stopped before its end" + why + "; export again"}
	case *t.Export.Count != count:
		return &lineError{line: lineNo, field: "export.count", msg: fmt.Sprintf("the export says %d records, the body holds %d: it was cut or edited", *t.Export.Count, count)}
	}
	return nil
}

// prefixField puts prefix before the field a 400 names.
func prefixField(err error, prefix string) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		if field, _ := apiErr.Details["parameter"].(string); field != "" && field != "body" {
			return invalidParam(prefix+field, strings.TrimPrefix(apiErr.Message, field+": "))
		}
	}
	return err
}

// parseImportLine reads one record line; errors name the field.
func parseImportLine(line []byte) (dlq.Record, error) {
	var l importLine
	if err := decodeStrict(line, &l); err != nil {
		return dlq.Record{}, err
	}
	var r dlq.Record
	bad := func(field, msg string) (dlq.Record, error) { return dlq.Record{}, invalidParam(field, msg) }
	if l.Masked {
		return bad("masked", "the record was exported masked (its exporter may not unmask the queue): it is not the record; export it with a key or role that may unmask")
	}
	if l.ID == nil {
		return bad("id", "required: the record's id (a UUID)")
	}
	id, err := uuid.Parse(*l.ID)
	if err != nil || id.String() != *l.ID {
		return bad("id", "must be a UUID in lowercase with hyphens, got "+jsonString(*l.ID))
	}
	r.ID = *l.ID
	if l.Queue == nil {
		return bad("queue", "required: the record's queue (source topic)")
	}
	if msg := dlq.TopicNameProblem(*l.Queue); msg != "" {
		return bad("queue", msg)
	}
	r.Queue = *l.Queue
	if msg := importNameProblem(l.Type); msg != "" {
		return bad("type", msg)
	}
	r.Type = l.Type
	if l.Format == nil || !knownFormat(dlq.Format(*l.Format)) {
		return bad("format", "must be one of "+strings.Join(formatNames(), ", "))
	}
	r.Format = dlq.Format(*l.Format)
	if l.State == nil || !dlq.State(*l.State).Valid() {
		return bad("state", "must be one of retryable, available, completed, discarded")
	}
	r.State = dlq.State(*l.State)
	if l.Exhaustion != nil {
		if e := dlq.Exhaustion(*l.Exhaustion); !e.Kept() {
			return bad("exhaustion", "must be dead_letter, discard, cancelled or null")
		}
		r.Exhaustion = dlq.Exhaustion(*l.Exhaustion)
	}
	if l.Attempt == nil || *l.Attempt < 0 || *l.Attempt > maxImportAttempt {
		return bad("attempt", "must be an integer from 0 to 1000000")
	}
	r.Attempt = *l.Attempt
	if l.MaxAttempts == nil || *l.MaxAttempts < 0 || *l.MaxAttempts > maxImportAttempt {
		return bad("max_attempts", "must be an integer from 0 to 1000000")
	}
	r.MaxAttempts = *l.MaxAttempts
	if r.Key, err = importBytes(l.Key, l.KeyEncoding, "key"); err != nil {
		return dlq.Record{}, err
	}
	if r.Value, err = importValue(l.Value, l.ValueEncoding); err != nil {
		return dlq.Record{}, err
	}
	if len(l.Headers) > maxImportHeaders {
		return bad("headers", "at most 1000 headers")
	}
	for i, h := range l.Headers {
		hd, err := importHeaderOf(h, "headers["+strconv.Itoa(i)+"]")
		if err != nil {
			return dlq.Record{}, err
		}
		r.Headers = append(r.Headers, hd)
	}
	if r.Source, err = importSourceOf(l.Source); err != nil {
		return dlq.Record{}, err
	}
	if r.DLQ, err = importCoordOf(l.DLQ); err != nil {
		return dlq.Record{}, err
	}
	if len(l.Errors) > dlq.MaxErrorHistory {
		return bad("errors", fmt.Sprintf("at most %d errors (a record keeps its latest %d)", dlq.MaxErrorHistory, dlq.MaxErrorHistory))
	}
	for i, e := range l.Errors {
		entry, err := importErrorOf(e, "errors["+strconv.Itoa(i)+"]")
		if err != nil {
			return dlq.Record{}, err
		}
		r.Errors = append(r.Errors, entry)
	}
	if r.Retry, err = importObject(l.Retry, "retry"); err != nil {
		return dlq.Record{}, err
	}
	if r.Meta, err = importObject(l.Meta, "meta"); err != nil {
		return dlq.Record{}, err
	}
	if r.ValueSchema, err = importSchema(l.ValueSchema, "value_schema"); err != nil {
		return dlq.Record{}, err
	}
	if r.KeySchema, err = importSchema(l.KeySchema, "key_schema"); err != nil {
		return dlq.Record{}, err
	}
	if r.Payload, err = importPayload(l.Payload, r.ValueSchema != nil, "payload", "value_schema"); err != nil {
		return dlq.Record{}, err
	}
	if r.KeyPayload, err = importPayload(l.KeyPayload, r.KeySchema != nil, "key_payload", "key_schema"); err != nil {
		return dlq.Record{}, err
	}
	if l.DecodeError != nil {
		if !validText(*l.DecodeError) {
			return bad("decode_error", "must be text without NUL characters")
		}
		r.DecodeError = *l.DecodeError
	}
	if l.Incident != nil && *l.Incident != "" && !filter.ValidIncident(*l.Incident) {
		return bad("incident", "must be an incident id (16 lowercase hex characters) or empty")
	}
	if l.CreatedAt == nil {
		return bad("created_at", "required: when the record was stored (RFC 3339)")
	}
	if r.CreatedAt, err = importTime(*l.CreatedAt, "created_at"); err != nil {
		return dlq.Record{}, err
	}
	for _, t := range []struct {
		v    *string
		name string
	}{{l.FailedAt, "failed_at"}, {l.DiscardedAt, "discarded_at"}, {l.CompletedAt, "completed_at"}} {
		if t.v != nil {
			if _, err := importTime(*t.v, t.name); err != nil {
				return dlq.Record{}, err
			}
		}
	}
	return r, nil
}

// importNameProblem says why a type or group name cannot be stored as it is.
func importNameProblem(s string) string {
	switch {
	case len(s) > dlq.MaxNameBytes:
		return fmt.Sprintf("at most %d bytes", dlq.MaxNameBytes)
	case !validText(s):
		return "must be text without NUL characters"
	}
	return ""
}

var importFormats = []dlq.Format{dlq.FormatRedrive, dlq.FormatSpring, dlq.FormatConnect, dlq.FormatStreams, dlq.FormatShareGroup,
	dlq.FormatWatermill, dlq.FormatJSON, dlq.FormatUnparseable, dlq.FormatOJS}

func knownFormat(f dlq.Format) bool {
	for _, k := range importFormats {
		if f == k {
			return true
		}
	}
	return false
}

func formatNames() []string {
	out := make([]string, len(importFormats))
	for i, f := range importFormats {
		out[i] = string(f)
	}
	return out
}

// importTime reads an RFC 3339 timestamp.
func importTime(v, field string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidParam(field, "must be an RFC 3339 timestamp like 2026-02-13T10:00:00.123456Z, got "+jsonString(v))
	}
	return t.UTC(), nil
}

// importBytes reads a key or header value: text of encoding utf8 (the
// default) or base64; null (s nil) is null.
func importBytes(s, enc *string, field string) ([]byte, error) {
	if s == nil {
		if enc != nil {
			return nil, invalidParam(field+"_encoding", "must be null when "+field+" is null")
		}
		return nil, nil
	}
	e := records.EncodingUTF8
	if enc != nil {
		e = *enc
	}
	if e != records.EncodingUTF8 && e != records.EncodingBase64 {
		return nil, invalidParam(field+"_encoding", "must be utf8 or base64, got "+jsonString(e))
	}
	b, err := records.DecodeBytes(*s, e)
	if err != nil {
		return nil, invalidParam(field, "is not valid base64")
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// importValue reads a value: JSON itself (value_encoding json), a string of
// encoding utf8 or base64, or null.
func importValue(v json.RawMessage, enc *string) ([]byte, error) {
	if len(v) == 0 || string(v) == "null" {
		if enc != nil {
			return nil, invalidParam("value_encoding", "must be null when value is null")
		}
		return nil, nil
	}
	if enc != nil && *enc != encodingJSON && *enc != records.EncodingUTF8 && *enc != records.EncodingBase64 {
		return nil, invalidParam("value_encoding", "must be json, utf8 or base64, got "+jsonString(*enc))
	}
	if enc != nil && *enc == encodingJSON {
		return v, nil // decodeStrict gave the line's value a copy of its own
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, invalidParam("value", "must be a string (of value_encoding utf8 or base64), JSON (value_encoding json) or null")
	}
	return importBytes(&s, enc, "value")
}

func importHeaderOf(h importHeader, field string) (dlq.Header, error) {
	if h.Key == nil {
		return dlq.Header{}, invalidParam(field+".key", "required")
	}
	if h.Value == nil {
		return dlq.Header{}, invalidParam(field+".value", "required (a header without a value has value \"\")")
	}
	key, err := importBytes(h.Key, h.KeyEncoding, field+".key")
	if err != nil {
		return dlq.Header{}, err
	}
	v, err := importBytes(h.Value, h.Encoding, field+".value")
	if err != nil {
		// The value's encoding field is "encoding", not "value_encoding".
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Details["parameter"] == field+".value_encoding" {
			return dlq.Header{}, invalidParam(field+".encoding", strings.TrimPrefix(apiErr.Message, field+".value_encoding: "))
		}
		return dlq.Header{}, err
	}
	return dlq.Header{Key: string(key), Value: v}, nil
}

func importSourceOf(s *importSource) (dlq.Source, error) {
	out := dlq.Source{Partition: -1, Offset: -1}
	if s == nil {
		return out, invalidParam("source", "required: where the record was consumed from")
	}
	out.Topic = s.Topic
	if s.Partition != nil {
		if *s.Partition < 0 {
			return out, invalidParam("source.partition", "must be 0 or more, or null")
		}
		out.Partition = *s.Partition
	}
	if s.Offset != nil {
		if *s.Offset < 0 {
			return out, invalidParam("source.offset", "must be 0 or more, or null")
		}
		out.Offset = *s.Offset
	}
	if s.Timestamp != nil {
		t, err := importTime(*s.Timestamp, "source.timestamp")
		if err != nil {
			return out, err
		}
		out.Timestamp = t
	}
	if msg := importNameProblem(s.Group); msg != "" {
		return out, invalidParam("source.group", msg)
	}
	out.Group = s.Group
	return out, nil
}

func importCoordOf(c *importCoord) (dlq.Coord, error) {
	var out dlq.Coord
	switch {
	case c == nil:
		return out, invalidParam("dlq", "required: the record's DLQ topic, partition and offset")
	case c.Topic == nil:
		return out, invalidParam("dlq.topic", "required")
	case c.Partition == nil || *c.Partition < 0:
		return out, invalidParam("dlq.partition", "required: 0 or more")
	case c.Offset == nil || *c.Offset < 0:
		return out, invalidParam("dlq.offset", "required: 0 or more")
	}
	if msg := dlq.TopicNameProblem(*c.Topic); msg != "" {
		return out, invalidParam("dlq.topic", msg)
	}
	out.Topic, out.Partition, out.Offset = *c.Topic, *c.Partition, *c.Offset
	if c.Timestamp != nil {
		t, err := importTime(*c.Timestamp, "dlq.timestamp")
		if err != nil {
			return out, err
		}
		out.Timestamp = t
	}
	return out, nil
}

func importErrorOf(e importError, field string) (dlq.ErrorEntry, error) {
	var out dlq.ErrorEntry
	switch {
	case e.Attempt == nil || *e.Attempt < 0 || *e.Attempt > maxImportAttempt:
		return out, invalidParam(field+".attempt", "must be an integer from 0 to 1000000")
	case e.Type == nil:
		return out, invalidParam(field+".type", "required")
	case e.Message == nil:
		return out, invalidParam(field+".message", "required")
	case e.OccurredAt == nil:
		return out, invalidParam(field+".occurred_at", "required (RFC 3339)")
	}
	if msg := importNameProblem(*e.Type); msg != "" {
		return out, invalidParam(field+".type", msg)
	}
	if !validText(*e.Message) {
		return out, invalidParam(field+".message", "must be text without NUL characters")
	}
	out.Attempt, out.Type, out.Message = *e.Attempt, *e.Type, *e.Message
	if e.Code != nil && *e.Code != "" {
		if !dlq.Code(*e.Code).Valid() {
			return out, invalidParam(field+".code", "must be RETRY, DISCARD, DEAD_LETTER or FAIL")
		}
		out.Code = dlq.Code(*e.Code)
	}
	for j, f := range e.Backtrace {
		if !validText(f) {
			return out, invalidParam(field+".backtrace["+strconv.Itoa(j)+"]", "must be text without NUL characters")
		}
	}
	if len(e.Backtrace) > 0 {
		out.Backtrace = e.Backtrace
	}
	// An export writes no details as {}: stored as none, as they were.
	if len(e.Details) > 0 && string(e.Details) != "null" && string(bytes.TrimSpace(e.Details)) != "{}" {
		if e.Details[0] != '{' {
			return out, invalidParam(field+".details", "must be a JSON object or null")
		}
		out.Details = bytes.Clone(e.Details)
	}
	t, err := importTime(*e.OccurredAt, field+".occurred_at")
	if err != nil {
		return out, err
	}
	out.OccurredAt = t
	return out, nil
}

// importObject reads retry or meta: a JSON object, or null for {}.
func importObject(v json.RawMessage, field string) (json.RawMessage, error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	if v[0] != '{' {
		return nil, invalidParam(field, "must be a JSON object or null")
	}
	return bytes.Clone(v), nil
}

func importSchema(s *importSchemaRef, field string) (*dlq.SchemaRef, error) {
	if s == nil {
		return nil, nil
	}
	if s.RegistryID == nil || *s.RegistryID < 0 {
		return nil, invalidParam(field+".registry_id", "required: the schema's id in the registry (0 or more)")
	}
	switch s.Type {
	case "AVRO", "PROTOBUF", "JSON":
	default:
		return nil, invalidParam(field+".type", "must be AVRO, PROTOBUF or JSON")
	}
	for _, v := range []struct{ s, name string }{{s.Subject, "subject"}, {s.Message, "message"}} {
		if len(v.s) > 4096 || !validText(v.s) {
			return nil, invalidParam(field+"."+v.name, "must be text without NUL characters, at most 4096 bytes")
		}
	}
	return &dlq.SchemaRef{RegistryID: *s.RegistryID, Type: s.Type, Subject: s.Subject, Message: s.Message}, nil
}

// importPayload reads a decoded value's (or key's) JSON: only with its
// schema reference.
func importPayload(v json.RawMessage, withSchema bool, field, schemaField string) (json.RawMessage, error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	if !withSchema {
		return nil, invalidParam(field, "only with "+schemaField+": the JSON a schema-encoded value was decoded to")
	}
	return v, nil // decodeStrict gave it a copy of its own
}
