package records

import (
	"github.com/redrive/redrive/internal/store"
)

// The store's row types (and the constants that go with them), named here so
// that callers of records — the HTTP API above all — render what records
// returns without importing internal/store. They are aliases, not copies: a
// records.Task is a store.Task, so nothing is converted on the way out and
// the store stays the one definition. Params of the transitions records owns
// (RetryParams, BulkParams) are records' own types, not these; ReplayParams
// is the store's, as Replay adds only the scope every retry of many records
// has.
type (
	// Record reads.
	RecordPreview  = store.RecordPreview
	PreviewPage    = store.PreviewPage
	ListParams     = store.ListParams
	Sort           = store.Sort
	SortField      = store.SortField
	Position       = store.Position
	Stats          = store.Stats
	ErrorTypeCount = store.ErrorTypeCount
	BatchRow       = store.BatchRow
	Replayed       = store.Replayed

	// Queues.
	QueueConfig = store.QueueConfig
	Blocked     = store.Blocked
	Activity    = store.Activity

	// Tasks.
	Task            = store.Task
	SkippedRecord   = store.SkippedRecord
	TaskKind        = store.TaskKind
	TaskState       = store.TaskState
	ListTasksParams = store.ListTasksParams

	// Incidents and activity.
	Incident       = store.Incident
	IncidentParams = store.IncidentParams
	ActivityParams = store.ActivityParams
	ActivitySeries = store.ActivitySeries

	// Audit log.
	AuditEntry  = store.AuditEntry
	AuditParams = store.AuditParams

	// Replay rules as the API stores them, and one rule's pass.
	ReplayRule   = store.ReplayRule
	ReplayParams = store.ReplayParams
)

// Sentinel errors, the store's own values so that errors.Is matches either.
var (
	ErrNotFound   = store.ErrNotFound
	ErrConflict   = store.ErrConflict
	ErrInFlight   = store.ErrInFlight
	ErrExists     = store.ErrExists
	ErrRuleExists = store.ErrRuleExists
)

// Task kinds and states.
const (
	TaskRetry     = store.TaskRetry
	TaskPurge     = store.TaskPurge
	TaskPending   = store.TaskPending
	TaskRunning   = store.TaskRunning
	TaskCompleted = store.TaskCompleted
	TaskCancelled = store.TaskCancelled
	TaskFailed    = store.TaskFailed
)

// Orders of a record listing.
const (
	SortCreated   = store.SortCreated
	SortAttempt   = store.SortAttempt
	SortNextRetry = store.SortNextRetry
	SortFailed    = store.SortFailed
)

// SortFields lists every SortField.
var SortFields = store.SortFields

// Orders of the incident list.
const (
	IncidentSortCount    = store.IncidentSortCount
	IncidentSortLastSeen = store.IncidentSortLastSeen
)

// How long activity is kept by the minute, and at all.
const (
	ActivityMinutes = store.ActivityMinutes
	ActivityKept    = store.ActivityKept
)

// How a byte string is shown as text.
const (
	EncodingUTF8   = store.EncodingUTF8
	EncodingBase64 = store.EncodingBase64
)

// The bounds of a record preview (see store.ListPreviews).
const (
	PreviewKeyBytes           = store.PreviewKeyBytes
	PreviewValueBytes         = store.PreviewValueBytes
	PreviewHeaderKeyBytes     = store.PreviewHeaderKeyBytes
	PreviewHeaderValueBytes   = store.PreviewHeaderValueBytes
	PreviewErrorTypeBytes     = store.PreviewErrorTypeBytes
	PreviewMessageBytes       = store.PreviewMessageBytes
	PreviewBacktraceLineBytes = store.PreviewBacktraceLineBytes
)

// EncodeBytes returns b as text and its encoding (store.EncodeBytes).
func EncodeBytes(b []byte) (string, string) { return store.EncodeBytes(b) }

// DecodeBytes reads text of an encoding back (store.DecodeBytes).
func DecodeBytes(s, encoding string) ([]byte, error) { return store.DecodeBytes(s, encoding) }

// PositionOf is where a preview stands in a listing of sort s.
func PositionOf(s Sort, p *RecordPreview) Position { return store.PositionOf(s, p) }
