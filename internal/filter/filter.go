// Package filter is the one definition of "which records does this operation
// touch": the Filter a user writes — as the query string of GET
// /ojs/v1/dead-letter, the JSON filter of a bulk retry or purge (and of the
// task it creates), or the filter of a replay rule in the API or a policy
// file — and the Scope an operation adds to it.
//
// One key table (Keys) says which keys there are, what each holds, how far it
// is bounded and which sources take it; every parser reads through it, and
// the OpenAPI document, the CLI's flags and the console's filter form are
// built from or checked against it. Canonical is the JSON a filter is stored
// as.
//
// It parses, bounds and writes filters; it never runs them (the store
// compiles them to SQL), and it imports nothing but dlq: no Kafka, Postgres
// or HTTP.
package filter

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// Filter selects records by what they are: what a user asks for. Zero fields
// do not filter; set fields are ANDed. Parse one with ParseQuery, ParseJSON
// or ParseMap, which bound and normalise every field; a Filter built in Go is
// taken as it is.
type Filter struct {
	// Queue is the source topic.
	Queue string
	// Type is the record type.
	Type string
	// ErrorType is the type of the record's most recent error.
	ErrorType string
	// State is one state (dlq.States).
	State dlq.State
	// Exhaustion is how an exhausted record ended.
	Exhaustion dlq.Exhaustion
	// Since and Until bound when Redrive stored the failure (created_at):
	// Since inclusive, Until exclusive. Parsed filters hold them in UTC.
	Since time.Time
	Until time.Time
	// Key, when non-nil, is the record key, matched byte for byte (an empty
	// non-nil Key matches empty keys).
	Key []byte
	// Q is a substring of the value, matched byte for byte (case-sensitive).
	Q string
	// Path, when set, is a JSON match on the payload: the value at Path
	// (object keys, outermost first) is Value. Value is text: a JSON scalar
	// written as JSON (17, true, null) matches that scalar or the same text as
	// a JSON string, and any other text matches as a string.
	Path  []string
	Value string
	// Headers match record headers: each must be present.
	Headers []Header
	// Incident is an incident id (a fingerprint): records whose latest error
	// has it.
	Incident string
	// IDs are record ids (lowercase UUIDs): the records an operator picked.
	IDs []string
	// Unacknowledged, when set, keeps only records marked unacknowledged
	// (true) or only the others (false).
	Unacknowledged *bool
}

// Header is a header match: a header with Key (and, when ValueSet, with that
// UTF-8 Value) must be present.
type Header struct {
	Key      string
	Value    string
	ValueSet bool
}

// Scope is what an operation imposes on the records a Filter selects, on top
// of what the user asked: the states a retry may touch, the records a task may
// reach, the topics a retry or replay must leave alone. Users never write it
// and it is never stored with a filter (Canonical leaves it out): the
// operation that runs a filter sets it, each time it runs. Zero fields do not
// narrow.
type Scope struct {
	// States, when set, restricts to these states (ANDed with Filter.State).
	States []dlq.State
	// MaxID, when set, excludes records with a greater id (stored later).
	MaxID string
	// NotQueues excludes records of these queues (Redrive's own topics: their
	// records have no topic to go back to).
	NotQueues []string
	// NotInternal excludes records whose queue is named as Kafka's internal
	// topics are ("__…").
	NotInternal bool
	// NotErrorTypes excludes records whose latest error is of these types
	// (replay rules leave alone the records an ingest-side rule turned away).
	NotErrorTypes []string
	// InFlight, when set, keeps only records a scheduler is producing right
	// now (true) or only the others (false).
	InFlight *bool
	// QueueGlobs, when non-nil, keeps only records of the queues matching
	// one of these globs ('*' any run of characters, '?' one): the queues
	// the caller's roles allow (docs/security.md). Empty but non-nil keeps
	// nothing. Nil does not narrow.
	QueueGlobs []string
	// OnlyQueues, when non-nil, keeps only records of these queues (none
	// when empty): the queues whose content the caller may search
	// (masking, docs/security.md).
	OnlyQueues []string
}

// Canonical is the filter as stored on tasks and replay rules: a JSON object
// of the keys that are set, in the key table's order, with normalised values
// (times in UTC, header matches written key:value with the key escaped,
// value as text, ids lowercase). ParseJSON reads it back to an equal Filter,
// and two equal filters write the same bytes (Postgres keeps them as jsonb,
// in its own key order).
// A Key or Q that is not UTF-8 (possible only from a query string) is written
// with U+FFFD in place of the bad bytes.
func (f *Filter) Canonical() json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	first := true
	for i := range table {
		k := &table[i]
		v, ok := k.get(f)
		if !ok {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		_ = enc.Encode(k.Name) // strings, bools and string lists always encode
		b.Truncate(b.Len() - 1)
		b.WriteByte(':')
		_ = enc.Encode(v)
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Map is Canonical as a map of JSON values, for documents that embed the
// filter (a policy shown as JSON).
func (f *Filter) Map() map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(f.Canonical(), &m)
	return m
}

// String is Canonical as text.
func (f *Filter) String() string { return string(f.Canonical()) }
