// Package events publishes Redrive's lifecycle events (OJS dead-letter spec
// §11.1, queue-config spec §10.1) in the OJS event envelope: fanned out in
// process to Server-Sent Events subscribers, kept in a bounded in-memory
// history for polling (Broker.Recent), and produced to a Kafka events topic.
//
// Events are notifications, never the source of truth: they are published after
// the database commit that caused them, asynchronously, and a slow subscriber, a
// full buffer or a broker outage loses events (counted in metrics) instead of
// slowing or failing the work that emits them. Publish never blocks.
package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Type is an event type.
type Type string

// Event types. dead_letter.* are the OJS dead-letter spec's, queue.* the
// queue-config spec's.
const (
	// DeadLetterAdded: a record was stored (one event per new record). Subject:
	// record id. Emitted by ingest.
	DeadLetterAdded Type = "dead_letter.added"
	// DeadLetterRetried: an operator retried a record. Subject: record id.
	// Emitted by the HTTP API (single and bulk retry).
	DeadLetterRetried Type = "dead_letter.retried"
	// DeadLetterReplayed: a replay rule replayed a record. Subject: record id.
	DeadLetterReplayed Type = "dead_letter.replayed"
	// DeadLetterPruned: the pruner removed records of a queue. Subject: queue;
	// data holds the count.
	DeadLetterPruned Type = "dead_letter.pruned"
	// DeadLetterDeleted: an operator deleted a record. Subject: record id.
	// Emitted by the HTTP API (single delete and purge).
	DeadLetterDeleted Type = "dead_letter.deleted"
	// QueuePaused, QueueResumed, QueueConfigUpdated: a topic's state or policy
	// changed through the API. Subject: queue.
	QueuePaused        Type = "queue.paused"
	QueueResumed       Type = "queue.resumed"
	QueueConfigUpdated Type = "queue.config_updated"
	// IncidentOpened: a failure with a fingerprint never seen before was
	// stored (Redrive's own). Subject: the fingerprint. Emitted by ingest.
	IncidentOpened Type = "incident.opened"
	// JobDiscarded: a waiting record was discarded without being retried
	// to the end: its queue deleted with strategy discard (exhaustion
	// cancelled, error type queue_deleted; emitted by the task runner), or
	// to make room in a full topic (overflow_policy drop_oldest, error type
	// overflow; emitted by ingest). Subject: record id. The worker API's
	// discard (a job's attempts exhausted) is built with Job instead: data
	// JobEventData with total_attempts and last_error (events spec §4.1).
	JobDiscarded Type = "job.discarded"
	// DeadLetterMoved: a waiting record was re-homed to another queue and
	// made available there (its queue deleted with strategy move). Subject:
	// record id; data.queue is the new queue, data.from_queue the old.
	DeadLetterMoved Type = "dead_letter.moved"
	// QueueDeleted: a queue was deleted (strategy reject at once; discard
	// and move when their task completed). Subject: queue.
	QueueDeleted Type = "queue.deleted"
	// TaskCanaryWatching, TaskCanaryPassed, TaskCanaryAborted: a bulk
	// retry's canary redelivered its sample and watches it; its verdict let
	// the task go on with the rest; its verdict stopped the task. Subject:
	// the task id. Emitted by the task runner.
	TaskCanaryWatching Type = "task.canary_watching"
	TaskCanaryPassed   Type = "task.canary_passed"
	TaskCanaryAborted  Type = "task.canary_aborted"
	// TaskCanaryInconclusive: the watch ended with outcomes of the sample
	// still pending: the task stopped, or went on as its canary asked
	// (on_inconclusive: continue). Subject: the task id.
	TaskCanaryInconclusive Type = "task.canary_inconclusive"
	// IncidentRedriveStarted: an incident marked "resolved, redrive when
	// quiet" was quiet long enough, and its canary retry started. Subject:
	// the fingerprint. Emitted by the maintenance leader.
	IncidentRedriveStarted Type = "incident.redrive_started"
	// The worker API's job events (OJS events spec §3.1, §3.2; data:
	// JobEventData, built with Job). Subject: the job id.
	// JobEnqueued: a job entered the available (or scheduled) state.
	JobEnqueued Type = "job.enqueued"
	// JobStarted: a worker fetched the job (it became active).
	JobStarted Type = "job.started"
	// JobCompleted: a worker acknowledged the job (it became completed).
	JobCompleted Type = "job.completed"
	// JobFailed: an attempt failed (a nack, or a lease that expired), one
	// per attempt, whether the job will be retried or not.
	JobFailed Type = "job.failed"
	// JobRetrying: a failed job was scheduled for another attempt.
	JobRetrying Type = "job.retrying"
	// JobCancelled: a job was cancelled.
	JobCancelled Type = "job.cancelled"
	// JobHeartbeat: a worker's heartbeat extended the job's lease
	// (visible_until).
	JobHeartbeat Type = "job.heartbeat"
)

// Types lists every event type Redrive emits.
var Types = []Type{
	DeadLetterAdded, DeadLetterRetried, DeadLetterReplayed, DeadLetterPruned, DeadLetterDeleted,
	QueuePaused, QueueResumed, QueueConfigUpdated, IncidentOpened,
	TaskCanaryWatching, TaskCanaryPassed, TaskCanaryAborted, IncidentRedriveStarted,
	JobDiscarded, DeadLetterMoved, QueueDeleted, TaskCanaryInconclusive,
	JobEnqueued, JobStarted, JobCompleted, JobFailed, JobRetrying, JobCancelled, JobHeartbeat,
}

// Valid reports whether t is a known event type.
func (t Type) Valid() bool {
	for _, k := range Types {
		if t == k {
			return true
		}
	}
	return false
}

// SpecVersion is the version of the OJS event envelope.
const SpecVersion = "1.0"

// DefaultSource is the envelope's source.
const DefaultSource = "redrive"

// Event is one lifecycle event in the OJS event envelope. Callers set Type,
// Subject, Queue and Data; the Publisher fills in SpecVersion, ID (UUIDv7),
// Source and, when zero, Time.
type Event struct {
	SpecVersion string    `json:"specversion"`
	ID          string    `json:"id"`
	Type        Type      `json:"type"`
	Source      string    `json:"source"`
	Time        time.Time `json:"time"`
	// Subject is what the event is about: a record id or a queue name.
	Subject string `json:"subject,omitempty"`
	// Data is the event's payload; it is marshalled to JSON later, on another
	// goroutine, so it must not be changed after Publish.
	Data any `json:"data"`
	// Queue is the source topic the event concerns; subscribers filter on it.
	// It is not part of the envelope (data repeats it where it matters).
	Queue string `json:"-"`
	// Also are the other queues the event names (a move's other end): a
	// subscriber limited to some queues gets it only if it may read them all.
	Also []string `json:"-"`
}

// readableBy reports whether a subscriber allowed the queues allow accepts
// may see ev: every queue it names, and only an event that names one.
func (ev *Event) readableBy(allow func(queue string) bool) bool {
	if ev.Queue == "" || !allow(ev.Queue) {
		return false
	}
	for _, q := range ev.Also {
		if !allow(q) {
			return false
		}
	}
	return true
}

// RecordData is the data of dead_letter.added, .retried, .replayed and .deleted.
type RecordData struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// The record key's start (RecordKey); no key fields for a null key.
	*RecordKeyData
	Type       string `json:"type,omitempty"`
	State      string `json:"state,omitempty"`
	Exhaustion string `json:"exhaustion,omitempty"`
	ErrorType  string `json:"error_type,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	// Rule and ReplayCount are set on dead_letter.replayed.
	Rule        string `json:"rule,omitempty"`
	ReplayCount int    `json:"replay_count,omitempty"`
	// FromQueue is the queue a dead_letter.moved record left.
	FromQueue string `json:"from_queue,omitempty"`
}

// KeyBytes bounds the record key an event carries: its first KeyBytes
// bytes, so that an event stays small whatever keys producers choose.
const KeyBytes = 128

// RecordKeyData is a record key in an event, shaped as in the API's record
// previews: its start as text, in an encoding, with the whole size.
type RecordKeyData struct {
	// Key is the key's first KeyBytes bytes (or fewer, cut at a character
	// boundary) as UTF-8 text, or the base64 of its first 96 bytes when it
	// is not UTF-8 without NUL bytes.
	Key         string `json:"key"`
	KeyEncoding string `json:"key_encoding"`
	// KeySize is the whole key's size in bytes; KeyTruncated says Key is a
	// part of it.
	KeySize      int  `json:"key_size"`
	KeyTruncated bool `json:"key_truncated,omitempty"`
}

// RecordKey is the key of a record event: prefix is the key's start (at
// least KeyBytes of it, or all of it), size the whole key's size in bytes,
// negative for a null key (nil: the event has no key fields).
func RecordKey(prefix []byte, size int) *RecordKeyData {
	if size < 0 {
		return nil
	}
	b := prefix[:min(len(prefix), KeyBytes)]
	text := b
	if len(b) < size {
		// A cut may end inside a character: drop its first bytes.
		for i := 0; i < utf8.UTFMax-1 && len(text) > 0 && !utf8.Valid(text); i++ {
			text = text[:len(text)-1]
		}
	}
	if utf8.Valid(text) && bytes.IndexByte(text, 0) < 0 {
		return &RecordKeyData{Key: string(text), KeyEncoding: "utf8", KeySize: size, KeyTruncated: len(text) < size}
	}
	b = b[:min(len(b), KeyBytes/4*3)] // whole 3-byte groups: the prefix decodes
	return &RecordKeyData{Key: base64.StdEncoding.EncodeToString(b), KeyEncoding: "base64", KeySize: size, KeyTruncated: len(b) < size}
}

// KeyOf is RecordKey of a whole key (nil: a null key).
func KeyOf(key []byte) *RecordKeyData {
	if key == nil {
		return nil
	}
	return RecordKey(key, len(key))
}

// PrunedData is the data of dead_letter.pruned.
type PrunedData struct {
	Queue string `json:"queue"`
	// Count is how many records were removed.
	Count int64 `json:"count"`
	// Reason is the retention limit: max_age, max_count, retention.discarded
	// or retention.completed.
	Reason string `json:"reason"`
	// State and Exhaustion say which records: discarded/dead_letter,
	// discarded/discard or completed.
	State      string `json:"state"`
	Exhaustion string `json:"exhaustion,omitempty"`
	// PruningPolicy is delete or archive.
	PruningPolicy string `json:"pruning_policy"`
}

// QueueData is the data of queue.paused, .resumed and .config_updated.
type QueueData struct {
	Queue string `json:"queue"`
	// State is the topic's state after the change.
	State string `json:"state,omitempty"`
	// Config is the effective policy after a config_updated, if shown.
	Config json.RawMessage `json:"config,omitempty"`
}

// QueueDeletedData is the data of queue.deleted.
type QueueDeletedData struct {
	Queue string `json:"queue"`
	// Strategy is reject, discard or move; TargetQueue is a move's target.
	Strategy    string `json:"strategy"`
	TargetQueue string `json:"target_queue,omitempty"`
	// TaskID is the task of a discard or move; Records how many records it
	// discarded or moved.
	TaskID  string `json:"task_id,omitempty"`
	Records int64  `json:"records"`
}

// Deleted returns a queue.deleted event.
func Deleted(d QueueDeletedData) Event {
	ev := Event{Type: QueueDeleted, Subject: d.Queue, Queue: d.Queue, Data: d}
	if d.TargetQueue != "" {
		ev.Also = []string{d.TargetQueue}
	}
	return ev
}

// IncidentData is the data of incident.opened.
type IncidentData struct {
	ID        string `json:"id"` // the fingerprint
	Queue     string `json:"queue"`
	ErrorType string `json:"error_type"`
	Signature string `json:"signature"`
	// Sample is the record that opened it, and its message.
	Sample IncidentSample `json:"sample"`
}

// IncidentSample is one record of an incident.
type IncidentSample struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// Incident returns an incident.opened event.
func Incident(d IncidentData) Event {
	return Event{Type: IncidentOpened, Subject: d.ID, Queue: d.Queue, Data: d}
}

// Record returns a record event of type t.
func Record(t Type, d RecordData) Event {
	ev := Event{Type: t, Subject: d.ID, Queue: d.Queue, Data: d}
	if d.FromQueue != "" {
		ev.Also = []string{d.FromQueue}
	}
	return ev
}

// Queue returns a queue event of type t.
func Queue(t Type, d QueueData) Event {
	return Event{Type: t, Subject: d.Queue, Queue: d.Queue, Data: d}
}

// CanaryData is the data of task.canary_watching, .canary_passed and
// .canary_aborted: the task, its filter and canary, and its sample's
// outcomes when the event was sent.
type CanaryData struct {
	TaskID string          `json:"task_id"`
	Filter json.RawMessage `json:"filter"`
	// Phase is the canary's phase after the change: watch, passed or aborted.
	Phase string `json:"phase"`
	// Canary is the canary as asked (sample, sample_size, watch, abort_if_refail).
	Canary any `json:"canary"`
	// Report counts the sample's outcomes (sample, delivered, completed,
	// failed_same, failed_different, pending, deleted).
	Report any `json:"report"`
	// WatchUntil is when the watch ends (task.canary_watching).
	WatchUntil *time.Time `json:"watch_until,omitempty"`
}

// Canary returns a canary event of type t; queue is the queue the task's
// filter names ("" for none).
func Canary(t Type, queue string, d CanaryData) Event {
	return Event{Type: t, Subject: d.TaskID, Queue: queue, Data: d}
}

// RedriveStartedData is the data of incident.redrive_started.
type RedriveStartedData struct {
	ID     string `json:"id"` // the fingerprint
	TaskID string `json:"task_id"`
	// RequestedBy is who marked the incident (the task is theirs).
	RequestedBy string `json:"requested_by"`
	// Quiet is the quiet time asked (ISO 8601), QuietSince when it began.
	Quiet      string    `json:"quiet"`
	QuietSince time.Time `json:"quiet_since"`
}

// RedriveStarted returns an incident.redrive_started event.
func RedriveStarted(d RedriveStartedData) Event {
	return Event{Type: IncidentRedriveStarted, Subject: d.ID, Data: d}
}
