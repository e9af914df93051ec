package httpapi

import (
	"encoding/json"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/tracing"
)

// jsonTime is a timestamp shown as RFC 3339 in UTC with milliseconds.
type jsonTime time.Time

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func (t jsonTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timeLayout) + `"`), nil
}

func optTime(t *time.Time) *jsonTime {
	if t == nil || t.IsZero() {
		return nil
	}
	jt := jsonTime(*t)
	return &jt
}

type sourceJSON struct {
	Topic     string    `json:"topic"`
	Partition *int32    `json:"partition"`
	Offset    *int64    `json:"offset"`
	Timestamp *jsonTime `json:"timestamp"`
	Group     string    `json:"group"`
}

type coordJSON struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp *jsonTime `json:"timestamp"`
}

// failureJSON is a dlq.DeliveryFailure.
type failureJSON struct {
	Reason        string    `json:"reason"`
	Message       string    `json:"message"`
	FailedAt      jsonTime  `json:"failed_at"`
	Failures      int       `json:"failures"`
	NextAttemptAt *jsonTime `json:"next_attempt_at"` // null: not tried again by itself (not_routable)
}

func toFailureJSON(f *dlq.DeliveryFailure) *failureJSON {
	if f == nil {
		return nil
	}
	return &failureJSON{Reason: f.Reason, Message: f.Message, FailedAt: jsonTime(f.FailedAt), Failures: f.Failures,
		NextAttemptAt: optTime(&f.NextAttemptAt)}
}

// archiveJSON is the state of a record's archive copy.
type archiveJSON struct {
	State      dlq.ArchiveState `json:"state"`
	Reason     *string          `json:"reason"`
	ArchivedAt *jsonTime        `json:"archived_at"`
	Failure    *failureJSON     `json:"failure"`
}

// toArchiveJSON shows a record's archive state; a copy that is due while
// archiving is turned off shows as off.
func toArchiveJSON(r *dlq.Record, archiving bool) *archiveJSON {
	a := r.Archive
	if a == nil {
		return nil
	}
	out := &archiveJSON{State: a.State, ArchivedAt: optTime(r.ArchivedAt), Failure: toFailureJSON(a.Failure)}
	if a.Reason != "" {
		out.Reason = &a.Reason
	}
	if !archiving && a.State != dlq.ArchiveDone {
		out.State, out.Failure = dlq.ArchiveOff, nil
	}
	return out
}

type headerJSON struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding"`
	// In a list, a header cut to a preview says so, with its whole value's
	// size in bytes.
	KeyTruncated   bool `json:"key_truncated,omitempty"`
	ValueTruncated bool `json:"value_truncated,omitempty"`
	ValueSize      *int `json:"value_size,omitempty"`
}

type errorJSON struct {
	Attempt    int             `json:"attempt"`
	Type       string          `json:"type"`
	Message    string          `json:"message"`
	Code       dlq.Code        `json:"code"`
	Backtrace  []string        `json:"backtrace"`
	Details    json.RawMessage `json:"details"`
	OccurredAt jsonTime        `json:"occurred_at"`
	// Truncated says (in a list) that the type, message, backtrace or
	// details were cut; GET the record for the whole error.
	Truncated bool `json:"truncated,omitempty"`
}

// recordJSON is a dead-letter record in the API's JSON shape (docs/api.md).
type recordJSON struct {
	ID          string          `json:"id"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	State       dlq.State       `json:"state"`
	Exhaustion  *dlq.Exhaustion `json:"exhaustion"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	ErrorType   string          `json:"error_type"`
	Source      sourceJSON      `json:"source"`
	DLQ         coordJSON       `json:"dlq"`
	Format      dlq.Format      `json:"format"`
	// The key, value and payload; nil while writeRecord streams them.
	*recordBody
	// KeySize and ValueSize are the whole key's and value's bytes (null
	// when null); in a list, key and value are previews, and the
	// *_truncated flags say what was cut.
	KeySize        *int         `json:"key_size"`
	KeyTruncated   bool         `json:"key_truncated"`
	ValueSize      *int         `json:"value_size"`
	ValueTruncated bool         `json:"value_truncated"`
	Headers        []headerJSON `json:"headers"`
	// HeadersTruncated says (in a list) that headers were left out or cut.
	HeadersTruncated bool `json:"headers_truncated,omitempty"`
	// TraceID is the OpenTelemetry trace of the record's life: the trace
	// id of its traceparent header (32 hex digits); null without one.
	TraceID *string     `json:"trace_id"`
	Errors  []errorJSON `json:"errors"`
	// ErrorsTruncated says (in a list) that errors were left out or cut: a
	// list shows the latest error only.
	ErrorsTruncated bool            `json:"errors_truncated,omitempty"`
	Retry           json.RawMessage `json:"retry"`
	RetryTruncated  bool            `json:"retry_truncated,omitempty"`
	Meta            json.RawMessage `json:"meta"`
	MetaTruncated   bool            `json:"meta_truncated,omitempty"`
	CreatedAt       jsonTime        `json:"created_at"`
	EnqueuedAt      *jsonTime       `json:"enqueued_at"`
	NextRetryAt     *jsonTime       `json:"next_retry_at"`
	DiscardedAt     *jsonTime       `json:"discarded_at"`
	CompletedAt     *jsonTime       `json:"completed_at"`
	// CompletedBy says what completed the record: "redelivered" (its
	// produce, under completion: redelivered) or "ack" (the consumer's
	// acknowledgement); null unless completed.
	CompletedBy *dlq.CompletedBy `json:"completed_by"`
	// AckDueAt is when the acknowledgement of the latest redelivery is due
	// (completion: ack), while one is awaited.
	AckDueAt *jsonTime `json:"ack_due_at"`
	// UnacknowledgedAt is when the record was marked unacknowledged: no
	// acknowledgement came by ack_due_at.
	UnacknowledgedAt *jsonTime `json:"unacknowledged_at"`
	// InFlight says a scheduler is producing the record right now: it cannot
	// be retried until the produce is settled, and it is shown as it was
	// before (state, attempt, redelivered_at, its last redelivery failure).
	// GET of one record and the retry's answer always say; listings say it
	// only of records in flight.
	InFlight      *bool     `json:"in_flight,omitempty"`
	UpdatedAt     jsonTime  `json:"updated_at"`
	RedeliveredAt *jsonTime `json:"redelivered_at"`
	ArchivedAt    *jsonTime `json:"archived_at"`
	// Redelivery is an operator's edit for the next redelivery, shown next to
	// the original key, value and headers, which stay as received.
	Redelivery *redeliveryJSON `json:"redelivery"`
	// RedeliveryTruncated says (in a list) that the edit's value and
	// headers were left out.
	RedeliveryTruncated bool `json:"redelivery_truncated,omitempty"`
	// RedeliveryFailure is set while the record's redelivery keeps failing.
	RedeliveryFailure *failureJSON `json:"redelivery_failure"`
	// Incident is the fingerprint of the latest error (GET /incidents/{id}).
	Incident string `json:"incident"`
	// Archive is the state of the record's archive copy.
	Archive *archiveJSON `json:"archive"`
	// PayloadOmitted says why a JSON value is not searchable (dlq.Record.PayloadOmitted).
	PayloadOmitted *string `json:"payload_omitted"`
	// Masked says the record is shown masked to the caller (masking.go).
	Masked bool `json:"masked,omitempty"`
	// ValueSchema and KeySchema say how the value and key were decoded
	// from the Schema Registry wire format (docs/schema-registry.md); null
	// when they were not.
	ValueSchema *dlq.SchemaRef `json:"value_schema"`
	KeySchema   *dlq.SchemaRef `json:"key_schema"`
	// KeyPayload is the decoded key's JSON (key_schema set).
	KeyPayload json.RawMessage `json:"key_payload,omitempty"`
	// DecodeError says why a value or key in the wire format could not be
	// decoded; DecodePending that it waits for its schema.
	DecodeError   *string `json:"decode_error"`
	DecodePending bool    `json:"decode_pending"`
	// Schedule is the record's retry schedule (GET of one record only).
	Schedule *policy.Schedule `json:"schedule,omitempty"`
}

// recordBody is a record's key, value and payload: the parts a producer
// sizes, written by writeRecord without a copy of the whole.
type recordBody struct {
	Key           *string         `json:"key"`
	KeyEncoding   *string         `json:"key_encoding"`
	Value         *string         `json:"value"`
	ValueEncoding *string         `json:"value_encoding"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// redeliveryJSON is a record's pending redelivery changes.
type redeliveryJSON struct {
	Queue *string `json:"queue"`
	// Target is who the next redelivery is for (override.target): group or
	// topic; null keeps the policy's redelivery.target.
	Target        *string      `json:"target"`
	Headers       []headerJSON `json:"headers"`
	Value         *string      `json:"value"`
	ValueEncoding *string      `json:"value_encoding"`
	// Payload is the edited JSON the value was made from (override.payload,
	// a bulk patch); null for a raw value edit or none.
	Payload json.RawMessage `json:"payload"`
	// ValueSchema is the schema the edited payload was encoded with; null
	// for a JSON record's edit or none.
	ValueSchema *dlq.SchemaRef `json:"value_schema"`
}

// encodeBytes shows b as text with its encoding; a nil b (a null key or a
// tombstone value) is null.
func encodeBytes(b []byte) (*string, *string) {
	if b == nil {
		return nil, nil
	}
	s, enc := records.EncodeBytes(b)
	return &s, &enc
}

// toRecordJSON shows a record; archiving says whether archive copies are
// made (REDRIVE_ARCHIVE_TOPIC is not off).
// inFlightOf is a listed record's in_flight: said only when true.
func inFlightOf(r *dlq.Record) *bool {
	if !r.InFlight {
		return nil
	}
	return &r.InFlight
}

func toRecordJSON(r *dlq.Record, archiving bool) recordJSON {
	out := recordJSON{
		ID: r.ID, Queue: r.Queue, Type: r.Type, State: r.State, Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		ErrorType: r.LastError().Type,
		Source:    sourceJSON{Topic: r.Source.Topic, Group: r.Source.Group, Timestamp: optTime(&r.Source.Timestamp)},
		DLQ:       coordJSON{Topic: r.DLQ.Topic, Partition: r.DLQ.Partition, Offset: r.DLQ.Offset, Timestamp: optTime(&r.DLQ.Timestamp)},
		Format:    r.Format, recordBody: &recordBody{},
		KeySize: sizeOf(r.Key), ValueSize: sizeOf(r.Value),
		Headers: make([]headerJSON, len(r.Headers)),
		Errors:  make([]errorJSON, len(r.Errors)),
		Retry:   r.Retry, Meta: r.Meta,
		InFlight:  inFlightOf(r),
		CreatedAt: jsonTime(r.CreatedAt), UpdatedAt: jsonTime(r.UpdatedAt),
		EnqueuedAt: optTime(r.EnqueuedAt), NextRetryAt: optTime(r.NextRetryAt),
		DiscardedAt: optTime(r.DiscardedAt), CompletedAt: optTime(r.CompletedAt),
		RedeliveredAt: optTime(r.RedeliveredAt), ArchivedAt: optTime(r.ArchivedAt),
		RedeliveryFailure: toFailureJSON(r.RedeliveryFailure), Archive: toArchiveJSON(r, archiving), Incident: r.Fingerprint,
	}
	if id := tracing.TraceID(r.Headers); id != "" {
		out.TraceID = &id
	}
	if rd := r.Redelivery; rd != nil {
		out.Redelivery = &redeliveryJSON{Headers: make([]headerJSON, len(rd.Headers))}
		if rd.Target != "" {
			out.Redelivery.Target = &rd.Target
		}
		if rd.Topic != "" {
			out.Redelivery.Queue = &rd.Topic
		}
		out.Redelivery.Payload, out.Redelivery.ValueSchema = rd.Payload, rd.ValueSchema
		for i, h := range rd.Headers {
			v, enc := records.EncodeBytes(h.Value)
			out.Redelivery.Headers[i] = headerJSON{Key: h.Key, Value: v, Encoding: enc}
		}
		if rd.ValueSet {
			out.Redelivery.Value, out.Redelivery.ValueEncoding = encodeBytes(rd.Value)
			if rd.Value != nil && out.Redelivery.Value == nil {
				empty, enc := "", records.EncodingUTF8
				out.Redelivery.Value, out.Redelivery.ValueEncoding = &empty, &enc
			}
		}
	}
	if r.Exhaustion != "" {
		out.Exhaustion = &r.Exhaustion
	}
	if r.CompletedBy != "" {
		out.CompletedBy = &r.CompletedBy
	}
	out.AckDueAt, out.UnacknowledgedAt = optTime(r.AckDueAt), optTime(r.UnacknowledgedAt)
	if r.Source.Partition >= 0 {
		out.Source.Partition = &r.Source.Partition
	}
	if r.Source.Offset >= 0 {
		out.Source.Offset = &r.Source.Offset
	}
	out.Key, out.KeyEncoding = encodeBytes(r.Key)
	out.Value, out.ValueEncoding = encodeBytes(r.Value)
	out.Payload = payloadOf(r)
	out.ValueSchema, out.KeySchema, out.KeyPayload, out.DecodePending = r.ValueSchema, r.KeySchema, r.KeyPayload, r.DecodePending
	if r.DecodeError != "" {
		out.DecodeError = &r.DecodeError
	}
	if r.PayloadOmitted != "" {
		out.PayloadOmitted = &r.PayloadOmitted
	}
	for i, h := range r.Headers {
		v, enc := records.EncodeBytes(h.Value)
		out.Headers[i] = headerJSON{Key: h.Key, Value: v, Encoding: enc}
	}
	for i, e := range r.Errors {
		out.Errors[i] = errorJSON{Attempt: e.Attempt, Type: e.Type, Message: e.Message, Code: e.Code,
			Backtrace: e.Backtrace, Details: e.Details, OccurredAt: jsonTime(e.OccurredAt)}
		if out.Errors[i].Backtrace == nil {
			out.Errors[i].Backtrace = []string{}
		}
		if len(out.Errors[i].Details) == 0 || string(out.Errors[i].Details) == "null" {
			out.Errors[i].Details = json.RawMessage("{}")
		}
	}
	return out
}

// payloadOf is a record's value as JSON: decoded from the Schema
// Registry wire format, or the value itself when it is JSON; nil otherwise.
func payloadOf(r *dlq.Record) json.RawMessage {
	if r.ValueSchema != nil {
		return r.Payload
	}
	if isPayload(r.Value) {
		return r.Value
	}
	return nil
}

// isPayload reports whether a value is shown decoded as payload: JSON.
func isPayload(v []byte) bool { return len(v) > 0 && json.Valid(v) }

func sizeOf(b []byte) *int {
	if b == nil {
		return nil
	}
	n := len(b)
	return &n
}
