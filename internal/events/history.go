package events

import (
	"encoding/json"
	"strings"
)

// HistoryConfig bounds the recent events a Broker keeps for polling
// (Broker.Recent, GET /ojs/v1/events as JSON). Zero fields take the defaults
// noted. The history is in memory: it starts empty with the process, and a
// poller that falls further behind than it reaches loses the events between.
type HistoryConfig struct {
	// Events bounds how many events are kept. Default DefaultHistoryEvents.
	Events int
	// Bytes bounds the kept events' encoded size (their JSON and what they
	// are filtered on). Default DefaultHistoryBytes.
	Bytes int
	// MaxEventBytes bounds one kept event's JSON: a bigger event is streamed
	// and produced, but not kept. Default DefaultHistoryMaxEventBytes.
	MaxEventBytes int
}

// Default history bounds: the last 10,000 events within 16 MiB, none bigger
// than 64 KiB.
const (
	DefaultHistoryEvents        = 10_000
	DefaultHistoryBytes         = 16 << 20
	DefaultHistoryMaxEventBytes = 64 << 10
)

func (h HistoryConfig) withDefaults() HistoryConfig {
	if h.Events <= 0 {
		h.Events = DefaultHistoryEvents
	}
	if h.Bytes <= 0 {
		h.Bytes = DefaultHistoryBytes
	}
	if h.MaxEventBytes <= 0 {
		h.MaxEventBytes = DefaultHistoryMaxEventBytes
	}
	return h
}

// entryOverhead is what an entry costs beyond its strings and JSON.
const entryOverhead = 128

// entry is one kept event: its JSON and what a poll filters on.
type entry struct {
	id, queue, jobType string
	typ                Type
	also               []string
	json               []byte
}

func (e *entry) size() int {
	n := entryOverhead + len(e.id) + len(e.queue) + len(e.jobType) + len(e.json)
	for _, q := range e.also {
		n += len(q) + 16
	}
	return n
}

// history is a ring of the most recent events, oldest first. The Broker's
// mutex guards it.
type history struct {
	limits HistoryConfig
	ring   []entry // capacity limits.Events
	start  int     // index of the oldest
	n      int
	bytes  int
}

func newHistory(l HistoryConfig) *history {
	l = l.withDefaults()
	return &history{limits: l, ring: make([]entry, l.Events)}
}

// at is the i-th oldest kept entry.
func (h *history) at(i int) *entry { return &h.ring[(h.start+i)%len(h.ring)] }

// add keeps ev (encoded as data), dropping the oldest entries past the bounds.
func (h *history) add(ev *Event, data []byte) {
	if len(data) > h.limits.MaxEventBytes {
		return
	}
	e := entry{id: ev.ID, queue: ev.Queue, jobType: jobTypeOf(ev), typ: ev.Type, also: ev.Also, json: data}
	size := e.size()
	if size > h.limits.Bytes {
		return // it would not fit even alone
	}
	for h.n > 0 && (h.n == len(h.ring) || h.bytes+size > h.limits.Bytes) {
		h.bytes -= h.at(0).size()
		*h.at(0) = entry{} // release its JSON
		h.start = (h.start + 1) % len(h.ring)
		h.n--
	}
	*h.at(h.n) = e
	h.n++
	h.bytes += size
}

// after is the index of the first entry after the event id: the one
// following it when it is kept, else the first with a greater id (entries
// are in publish order, and the publisher makes their UUIDv7 ids in that
// order, so a cursor older than the history gets all of it, and one newer
// than every entry gets none).
func (h *history) after(id string) int {
	for i := h.n - 1; i >= 0; i-- { // a cursor is most often recent
		if h.at(i).id == id {
			return i + 1
		}
	}
	i := 0
	for i < h.n && h.at(i).id <= id {
		i++
	}
	return i
}

// jobTypeOf is the job type an event is about: a job event's job_type, a
// record event's type; "" for others.
func jobTypeOf(ev *Event) string {
	switch d := ev.Data.(type) {
	case JobEventData:
		return d.JobType
	case RecordData:
		return d.Type
	}
	return ""
}

// Poll asks Broker.Recent for kept events.
type Poll struct {
	// Filter selects events as a subscription's does: Types, Queues, Allow.
	Filter Filter
	// JobTypes, when set, keeps only events about these job types (a job
	// event's job_type, a record event's type).
	JobTypes []string
	// After, when set, is an event id: only events after it are returned.
	// An id no longer (or never) kept counts by its time order: events with
	// a greater id (UUIDv7 ids sort by time) are returned.
	After string
	// Limit bounds how many events are returned (at least 1).
	Limit int
}

// Page is the answer of Broker.Recent.
type Page struct {
	// Events are the matching events, oldest first, as their JSON.
	Events []json.RawMessage
	// Cursor is the id of the last event returned, or Poll.After when none
	// was: the After of the next poll.
	Cursor string
	// HasMore says more matching events follow the last one returned.
	HasMore bool
}

// Recent returns the kept events p matches, oldest first: at most p.Limit,
// from after p.After. Role narrowing (p.Filter.Allow) applies as it does to
// a stream: an event shows only when the caller may read every queue it
// names.
func (b *Broker) Recent(p Poll) Page {
	types := maskOf(p.Filter.Types)
	limit := max(p.Limit, 1)
	page := Page{Cursor: p.After}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hist
	i := 0
	if p.After != "" {
		i = h.after(p.After)
	}
	for ; i < h.n; i++ {
		e := h.at(i)
		if !types.match(e.typ) || !matchAny(p.Filter.Queues, e.queue) || len(p.JobTypes) > 0 && !matchAny(p.JobTypes, e.jobType) {
			continue
		}
		if p.Filter.Allow != nil && !(&Event{Queue: e.queue, Also: e.also}).readableBy(p.Filter.Allow) {
			continue
		}
		if len(page.Events) == limit {
			page.HasMore = true
			break
		}
		page.Events = append(page.Events, e.json)
		page.Cursor = e.id
	}
	return page
}

// TrimEventID is an event id as a poll's cursor: without the "evt_" prefix
// the events spec recommends (Redrive's ids have none), lower case.
func TrimEventID(id string) string {
	return strings.ToLower(strings.TrimPrefix(id, "evt_"))
}
