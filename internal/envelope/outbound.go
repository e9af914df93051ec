package envelope

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
)

// Redelivery builds the record Redrive produces to a record's topic (see
// docs/redelivery.md): the original key, the original value or the operator's edit, the
// original headers (an operator's header overrides replace same-key ones), and
// redrive.id, redrive.attempt, redrive.redelivered_at so that a repeat failure
// joins its record and consumers can dedupe. Partition -1 leaves the choice to
// the producer's partitioner.
func Redelivery(r *dlq.Record, topic string, partition int32, attempt int, at time.Time) *kgo.Record {
	return NewRedeliveries(1, at).Add(r, topic, partition, attempt)
}

// Redeliveries builds the records of one batch redelivered at the same time
// (Redelivery's records) from a few allocations for the batch instead of
// several for each record: the records, their headers, their ids, and one
// redelivered_at and attempt value that the records share. Kafka records
// are about a kilobyte each and a batch a thousand of them, so this is a
// measurable part of a redelivery's CPU. The records stay valid while any of
// them is referenced; their header values must not be written to.
type Redeliveries struct {
	recs    []kgo.Record
	headers []kgo.RecordHeader
	ids     []byte
	at      []byte
	attempt []byte // the last attempt's value, shared by the records of that attempt
	n       int    // the last attempt
}

// redeliveryHeaders is how many headers a redelivery adds to its record's
// own: id, attempt, redelivered_at, and room for a target group.
const redeliveryHeaders = 4

// NewRedeliveries makes room for n records redelivered at at.
func NewRedeliveries(n int, at time.Time) *Redeliveries {
	b := &Redeliveries{}
	b.Reuse(n, at)
	return b
}

// Reuse empties b for n records redelivered at at, keeping its memory where
// it has room. Nothing may refer to b's records any more: the scheduler
// reuses a batch's once its records are produced and settled.
func (b *Redeliveries) Reuse(n int, at time.Time) {
	clear(b.recs) // the records and headers refer to their batch's keys and values
	clear(b.headers)
	b.recs = slices.Grow(b.recs[:0], n)
	b.headers = slices.Grow(b.headers[:0], n*redeliveryHeaders)
	b.ids = slices.Grow(b.ids[:0], n*36)          // a UUID's text
	b.at = at.UTC().AppendFormat(nil, TimeLayout) // shared by the records: not written over
	b.attempt, b.n = nil, 0
}

// Add builds the redelivery of r (see Redelivery).
func (b *Redeliveries) Add(r *dlq.Record, topic string, partition int32, attempt int) *kgo.Record {
	value := r.Value
	var override []dlq.Header
	if rd := r.Redelivery; rd != nil {
		if rd.ValueSet {
			value = rd.Value
		}
		override = rd.Headers
	}
	hs := b.headerRoom(len(r.Headers) + len(override) + redeliveryHeaders)
	for _, h := range r.Headers {
		if !hasKey(override, h.Key) {
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
	}
	for _, h := range override {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if b.attempt == nil || attempt != b.n {
		b.attempt, b.n = strconv.AppendInt(nil, int64(attempt), 10), attempt
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderID, Value: b.id(r.ID)},
		kgo.RecordHeader{Key: HeaderAttempt, Value: b.attempt},
		kgo.RecordHeader{Key: HeaderRedeliveredAt, Value: b.at},
	)
	if len(b.recs) == cap(b.recs) {
		return &kgo.Record{Topic: topic, Key: r.Key, Value: value, Headers: hs, Partition: partition}
	}
	b.recs = append(b.recs, kgo.Record{Topic: topic, Key: r.Key, Value: value, Headers: hs, Partition: partition})
	return &b.recs[len(b.recs)-1]
}

// headerRoom returns an empty slice with room for n headers, cut from the
// batch's while it has room: its capacity ends where the next record's
// headers start, so that appending past it (another target group, a trace
// context) copies instead of writing over them.
func (b *Redeliveries) headerRoom(n int) []kgo.RecordHeader {
	if len(b.headers)+n > cap(b.headers) {
		return make([]kgo.RecordHeader, 0, n)
	}
	start := len(b.headers)
	b.headers = b.headers[:start+n]
	return b.headers[start : start : start+n]
}

// id returns id's bytes, cut from the batch's while it has room.
func (b *Redeliveries) id(id string) []byte {
	if len(b.ids)+len(id) > cap(b.ids) {
		return []byte(id)
	}
	start := len(b.ids)
	b.ids = append(b.ids, id...)
	return b.ids[start:len(b.ids):len(b.ids)]
}

// SetTargetGroup makes a redelivery for one consumer group only: it sets
// HeaderTargetGroup (replacing any), which the client library reads.
func SetTargetGroup(rec *kgo.Record, group string) {
	for i := range rec.Headers {
		if rec.Headers[i].Key == HeaderTargetGroup {
			rec.Headers[i].Value = []byte(group)
			return
		}
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderTargetGroup, Value: []byte(group)})
}

// TargetGroupOf is a record's HeaderTargetGroup, "" without one.
func TargetGroupOf(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == HeaderTargetGroup {
			return string(h.Value)
		}
	}
	return ""
}

func hasKey(hs []dlq.Header, key string) bool {
	for _, h := range hs {
		if h.Key == key {
			return true
		}
	}
	return false
}

// HeaderValueOmitted marks a reference copy on an archive topic: the record
// was too large for the topic, so its value (this many bytes) was left out.
const HeaderValueOmitted = "redrive.value_omitted"

// ArchiveReference builds the copy of a record too large for its archive
// topic: everything Archive keeps but the value, plus redrive.value_omitted
// with the value's size in bytes. The record itself stays in Postgres.
func ArchiveReference(r *dlq.Record, topic string) *kgo.Record {
	rec := Archive(r, topic)
	rec.Value = nil
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderValueOmitted, Value: strconv.AppendInt(nil, int64(len(r.Value)), 10)})
	return rec
}

// Archive builds the copy of a record kept on an archive topic: the original
// key, value and headers, plus its Redrive context and whole error history
// (redrive.errors, JSON), so the archive alone tells the record's story.
func Archive(r *dlq.Record, topic string) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+16)
	for _, h := range r.Headers {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	add := func(key, value string) {
		if value != "" {
			hs = append(hs, kgo.RecordHeader{Key: key, Value: []byte(value)})
		}
	}
	add(HeaderID, r.ID)
	add(HeaderAttempt, strconv.Itoa(r.Attempt))
	add(HeaderSourceTopic, r.Source.Topic)
	if r.Source.Partition >= 0 {
		add(HeaderSourcePartition, strconv.FormatInt(int64(r.Source.Partition), 10))
	}
	if r.Source.Offset >= 0 {
		add(HeaderSourceOffset, strconv.FormatInt(r.Source.Offset, 10))
	}
	if !r.Source.Timestamp.IsZero() {
		add(HeaderSourceTimestamp, r.Source.Timestamp.UTC().Format(TimeLayout))
	}
	add(HeaderSourceGroup, r.Source.Group)
	add(HeaderType, r.Type)
	last := r.LastError()
	add(HeaderErrorType, last.Type)
	add(HeaderErrorMessage, cleanText([]byte(last.Message), MaxMessageBytes))
	add(HeaderErrorCode, string(last.Code))
	add("redrive.queue", r.Queue)
	add("redrive.state", string(r.State))
	add("redrive.exhaustion", string(r.Exhaustion))
	add("redrive.format", string(r.Format))
	add("redrive.dlq.topic", r.DLQ.Topic)
	add("redrive.dlq.partition", strconv.FormatInt(int64(r.DLQ.Partition), 10))
	add("redrive.dlq.offset", strconv.FormatInt(r.DLQ.Offset, 10))
	if errs, err := json.Marshal(r.Errors); err == nil {
		add(HeaderErrors, string(errs))
	}
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs}
}

// Ack builds the completion acknowledgement of delivery `attempt` of record id:
// an empty record on the DLQ topic that ingest turns into state completed.
func Ack(dlqTopic, id string, attempt int, group string) *kgo.Record {
	hs := []kgo.RecordHeader{
		{Key: HeaderAck, Value: []byte(AckCompleted)},
		{Key: HeaderID, Value: []byte(id)},
		{Key: HeaderAttempt, Value: strconv.AppendInt(nil, int64(attempt), 10)},
	}
	if group != "" {
		hs = append(hs, kgo.RecordHeader{Key: HeaderSourceGroup, Value: []byte(group)})
	}
	return &kgo.Record{Topic: dlqTopic, Key: []byte(id), Headers: hs}
}
