// Package dlq holds Redrive's domain types: dead-letter records, their lifecycle
// states and failure history, and the decoded form of a record read from a DLQ topic.
//
// It is a leaf package: it must never import Kafka, Postgres, HTTP or any other
// infrastructure. Everything else in Redrive depends on it; it depends on nothing.
package dlq

import (
	"encoding/json"
	"time"
)

// State is a record's lifecycle state, named as in the OJS specs.
//
//	new failure ──▶ retryable ──(scheduler)──▶ completed (completion: redelivered)
//	      │             ▲      └───(scheduler)──▶ available ──(ack)──▶ completed (completion: ack)
//	      │             └──────(fails again)────────┤ (re-opens a record completed by its redelivery)
//	      ▼                                         ▼
//	  discarded ◀─────────(exhausted/non-retryable)─┘
//	      │
//	      └──(manual retry / replay rule)──▶ available
type State string

const (
	// StateRetryable waits for automatic redelivery at NextRetryAt.
	StateRetryable State = "retryable"
	// StateAvailable is queued for redelivery (NextRetryAt set), being
	// produced, or — under completion: ack — redelivered and waiting for the
	// consumer's acknowledgement (UnacknowledgedAt is set once it is overdue).
	StateAvailable State = "available"
	// StateCompleted was redelivered and is done: CompletedBy says whether
	// its produce completed it or the consumer's acknowledgement did.
	StateCompleted State = "completed"
	// StateDiscarded is terminal; Exhaustion says why and how long it is kept.
	StateDiscarded State = "discarded"
)

// States lists every State, in lifecycle order.
var States = []State{StateRetryable, StateAvailable, StateCompleted, StateDiscarded}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, known := range States {
		if s == known {
			return true
		}
	}
	return false
}

// Exhaustion says why a discarded record stays: as a dead letter (the DLQ proper,
// kept per dead-letter retention), as a discard (kept per retention.discarded),
// or cancelled (kept per retention.cancelled).
type Exhaustion string

const (
	ExhaustionDeadLetter Exhaustion = "dead_letter"
	ExhaustionDiscard    Exhaustion = "discard"
	// ExhaustionCancelled: an operator gave up on the record by hand before
	// its retries ran out (its queue was deleted with strategy discard). It
	// is never a policy's on_exhaustion.
	ExhaustionCancelled Exhaustion = "cancelled"
)

// Valid reports whether e is an exhaustion action a policy may choose
// (on_exhaustion): dead_letter or discard.
func (e Exhaustion) Valid() bool { return e == ExhaustionDeadLetter || e == ExhaustionDiscard }

// Kept reports whether e is how a stored discarded record may be kept: an
// on_exhaustion action, or cancelled.
func (e Exhaustion) Kept() bool { return e.Valid() || e == ExhaustionCancelled }

// Code is the handler's verdict on a failure (OJS retry spec §7).
type Code string

const (
	// CodeRetry asks for a retry per the policy. It is the default.
	CodeRetry Code = "RETRY"
	// CodeDiscard gives up without retrying; the record is kept as a discard.
	CodeDiscard Code = "DISCARD"
	// CodeDeadLetter gives up without retrying; the record is kept as a dead letter.
	CodeDeadLetter Code = "DEAD_LETTER"
	// CodeFail is a recognised permanent failure: discarded like CodeDiscard
	// (OJS retry spec §7.2), but recorded with its own code.
	CodeFail Code = "FAIL"
)

// Valid reports whether c is a known handler code.
func (c Code) Valid() bool {
	switch c {
	case CodeRetry, CodeDiscard, CodeDeadLetter, CodeFail:
		return true
	}
	return false
}

// CompletedBy says what completed a record.
type CompletedBy string

const (
	// CompletedByRedelivered: its redelivery was produced (topic policy
	// completion: redelivered). A repeat failure of that redelivery that
	// comes back re-opens it.
	CompletedByRedelivered CompletedBy = "redelivered"
	// CompletedByAck: the consumer acknowledged the redelivery (client
	// library option AckCompletions).
	CompletedByAck CompletedBy = "ack"
)

// Format names the decoder that understood a DLQ record.
type Format string

const (
	FormatRedrive     Format = "redrive"
	FormatSpring      Format = "spring"
	FormatConnect     Format = "connect"
	FormatStreams     Format = "streams"
	FormatShareGroup  Format = "share_group"
	FormatWatermill   Format = "watermill"
	FormatJSON        Format = "json"
	FormatUnparseable Format = "unparseable"
	// FormatOJS is a job published over HTTP (POST /ojs/v1/jobs): an OJS
	// job envelope whose args are the value. Workers fetch it over HTTP;
	// it is never produced to Kafka.
	FormatOJS Format = "ojs"
)

// ErrorTypeUnparseable is the error type given to records no decoder understands.
const ErrorTypeUnparseable = "redrive.unparseable"

// ErrorTypeNotRoutable is the error type of the entry ingest adds to a new
// failure whose source topic Redrive may not redeliver to (ReservedTopics):
// kept as a dead letter, after the failure's own error.
const ErrorTypeNotRoutable = "redrive.not_routable"

// Header is one Kafka record header. Values are raw bytes: they may be binary.
type Header struct {
	Key   string
	Value []byte
}

// Source is where a failed record was originally consumed from. Fields the DLQ
// record did not carry are zero, except Partition and Offset, which are -1.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Group     string
}

// Coord is a record's position in a DLQ topic; it identifies a DLQ record and
// makes ingest idempotent. Timestamp is the DLQ record's own timestamp: a DLQ
// topic that is deleted and recreated starts its offsets at 0 again, and the
// timestamp tells its new records from the old ones at the same offsets.
type Coord struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// ErrorEntry is one failed attempt in a record's history.
type ErrorEntry struct {
	Attempt    int             `json:"attempt"`
	Type       string          `json:"type"`
	Message    string          `json:"message"`
	Code       Code            `json:"code"`
	Backtrace  []string        `json:"backtrace,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
}

// MaxNameBytes caps the identifiers a producer chooses that Redrive indexes
// and counts by: the record type, error types and the source group. Decoding
// cuts longer ones (at a rune boundary), so that no record can exceed a
// B-tree index entry or bloat the statistics. Source topics are Kafka topic
// names (at most 249 characters) or the record is kept as unparseable.
const MaxNameBytes = 255

// MaxErrorHistory is how many of the most recent errors a record keeps (RET-15
// asks for at least 10).
const MaxErrorHistory = 20

// Failure is one record read from a DLQ topic, decoded: the original record and
// the context of its failure. It is what ingest turns into (or joins with) a Record.
type Failure struct {
	// DLQ is where this failure was read from.
	DLQ Coord
	// Format names the decoder that read it.
	Format Format
	// Source is where the original record was consumed from.
	Source Source
	// Type is the job/event type, if known.
	Type string
	// Key and Value are the original record's, byte for byte. A nil Key is a null key.
	Key   []byte
	Value []byte
	// Headers are the original record's headers, without the envelope's own.
	Headers []Header
	// Error describes the failure; Error.Attempt is the attempt that failed.
	Error ErrorEntry
	// Retry is a record-level OJS RetryPolicy override (raw JSON), if any.
	Retry json.RawMessage
	// RecordID and Attempt are set on a repeat failure of a record Redrive
	// redelivered: it joins the existing record instead of creating one.
	RecordID string
	Attempt  int
	// Completed marks not a failure but the consumer's acknowledgement that
	// delivery Attempt of record RecordID succeeded.
	Completed bool
}

// Record is a dead-letter record as Redrive stores and serves it.
type Record struct {
	ID          string
	Queue       string // the source topic
	Type        string
	State       State
	Exhaustion  Exhaustion // empty unless State is StateDiscarded
	Attempt     int
	MaxAttempts int
	Source      Source
	DLQ         Coord
	Format      Format
	Key         []byte
	Value       []byte
	Headers     []Header
	Errors      []ErrorEntry // oldest first
	Retry       json.RawMessage
	Meta        json.RawMessage
	CreatedAt   time.Time
	EnqueuedAt  *time.Time
	NextRetryAt *time.Time
	DiscardedAt *time.Time
	CompletedAt *time.Time
	UpdatedAt   time.Time
	// CompletedBy says what completed the record; empty unless State is
	// StateCompleted.
	CompletedBy CompletedBy
	// AckDueAt is, while an acknowledgement of the latest redelivery is
	// awaited (completion: ack), when it is due.
	AckDueAt *time.Time
	// UnacknowledgedAt is when the record was marked unacknowledged: no
	// acknowledgement came by AckDueAt. It stays available, and may be retried.
	UnacknowledgedAt *time.Time
	// InFlight says a scheduler has claimed the record and is producing it
	// right now (its claim is not settled yet); it is then shown as it was
	// before the claim (state, attempt, redelivered_at, no completion).
	InFlight bool
	// RedeliveredAt is when the record was last produced to its topic.
	RedeliveredAt *time.Time
	// Redelivery holds an operator's changes for the next redelivery, if any.
	Redelivery *Redelivery
	// ArchivedAt is when the record was copied to the archive topic.
	ArchivedAt *time.Time
	// RedeliveryFailure is set while the record's redelivery keeps failing
	// (a missing topic, a record too large): the record waits on its own
	// backoff, apart from its retry policy's attempts.
	RedeliveryFailure *DeliveryFailure
	// Archive is the state of the record's archive copy; nil when none is due.
	Archive *ArchiveStatus
	// Fingerprint identifies the incident of the record's latest error (its
	// type and normalized message); empty until computed.
	Fingerprint string
	// PayloadOmitted says why a JSON Value is not kept as searchable JSON
	// (nested too deep, a character or number Postgres's jsonb cannot hold,
	// or the record had to be stored in its minimal form); empty when it is,
	// or when Value is not JSON. Value itself is always kept byte for byte.
	PayloadOmitted string
	// ValueSchema says how Value was decoded from the Schema Registry wire
	// format; nil when it was not (not in that format, no registry
	// configured, its schema not fetched yet, or DecodeError). While it is
	// set, Payload is the decoded value as natural JSON.
	ValueSchema *SchemaRef
	// Payload is the decoded value's natural JSON (ValueSchema set), nil
	// otherwise; it is what search (path, value) sees. It is also nil when
	// the decoded JSON could not be kept as jsonb (PayloadOmitted says why).
	Payload json.RawMessage
	// KeySchema and KeyPayload are the same for the key.
	KeySchema  *SchemaRef
	KeyPayload json.RawMessage
	// DecodeError says why a value or key in the wire format could not be
	// decoded (unknown schema id, bytes that do not match the schema).
	DecodeError string
	// DecodePending says the value or key waits for its schema to be
	// fetched: the background decoder will decode it.
	DecodePending bool
}

// SchemaRef names the Schema Registry schema a value or key was decoded
// with.
type SchemaRef struct {
	RegistryID int `json:"registry_id"`
	// Type is AVRO, PROTOBUF or JSON.
	Type string `json:"type"`
	// Subject is one subject the schema is registered under, when known.
	Subject string `json:"subject,omitempty"`
	// Message is the Protobuf message's full name.
	Message string `json:"message,omitempty"`
}

// Reasons a produce to Kafka failed, as stored on a record and in metrics.
const (
	ReasonUnknownTopic  = "unknown_topic"
	ReasonInvalidTopic  = "invalid_topic"
	ReasonTooLarge      = "too_large"
	ReasonAuthorization = "authorization"
	ReasonTimeout       = "timeout"
	ReasonBroker        = "broker"
	// ReasonNotRoutable is not a failed produce but a refused one: the
	// record's target is a topic Redrive never produces to (ReservedTopics),
	// so it is kept as a dead letter instead of being redelivered.
	ReasonNotRoutable = "not_routable"
)

// DeliveryFailure describes why producing a record (a redelivery or its
// archive copy) keeps failing, and when it is tried again.
type DeliveryFailure struct {
	Reason   string    `json:"reason"`
	Message  string    `json:"message"`
	FailedAt time.Time `json:"failed_at"`
	Failures int       `json:"failures"`
	// NextAttemptAt is zero (and left out) when nothing tries again by
	// itself: a record refused as not routable waits for an operator.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
}

// ArchiveState is where a record's archive copy stands.
type ArchiveState string

const (
	// ArchivePending waits for the archiver.
	ArchivePending ArchiveState = "pending"
	// ArchiveFailed failed at least once and is tried again after a backoff.
	ArchiveFailed ArchiveState = "failed"
	// ArchiveDone is on the archive topic.
	ArchiveDone ArchiveState = "done"
	// ArchiveOff is shown for records that would be archived, while archiving
	// is turned off; it is never stored.
	ArchiveOff ArchiveState = "off"
)

// ArchiveStatus is the state of a record's archive copy.
type ArchiveStatus struct {
	State ArchiveState
	// Reason is why the last attempt failed (a Reason* constant), or for a
	// done copy why it is only a reference copy (ReasonTooLarge).
	Reason string
	// Failure describes the last failed attempt while State is ArchiveFailed.
	Failure *DeliveryFailure
}

// Redelivery is an operator's change to a record's next redelivery. The
// record's own key, value and headers stay as they were received.
type Redelivery struct {
	// Topic replaces the target topic; empty keeps the policy's.
	Topic string
	// Target replaces the policy's redelivery.target: "group" (only the
	// consumer group that failed the record) or "topic" (every group);
	// empty keeps the policy's.
	Target string
	// Headers are set on the redelivered record, replacing original headers
	// with the same key.
	Headers []Header
	// Value replaces the value when ValueSet.
	Value    []byte
	ValueSet bool
	// Payload is the JSON an operator edited (override.payload, a bulk
	// JSON Patch) when Value was made from it: encoded with ValueSchema
	// when that is set, else Value is this JSON's text. Nil for a raw
	// value edit.
	Payload []byte
	// ValueSchema is the schema Value was encoded with from Payload.
	ValueSchema *SchemaRef
}

// LastError returns the most recent error, or the zero entry when there is none.
func (r *Record) LastError() ErrorEntry {
	if len(r.Errors) == 0 {
		return ErrorEntry{}
	}
	return r.Errors[len(r.Errors)-1]
}
