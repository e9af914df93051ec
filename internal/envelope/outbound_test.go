package envelope

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

func testRecord() *dlq.Record {
	return &dlq.Record{
		ID: "01936f0e-1111-7000-8000-000000000001", Queue: "orders", Type: "order.created",
		State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Attempt: 3,
		Source: dlq.Source{Topic: "orders", Partition: 2, Offset: 41, Group: "billing"},
		DLQ:    dlq.Coord{Topic: "dead_letter_queue", Partition: 1, Offset: 9},
		Key:    []byte("k"), Value: []byte(`{"id":1}`),
		Headers: []dlq.Header{{Key: "traceparent", Value: []byte("00-abc")}, {Key: "tenant", Value: []byte("a")}},
		Errors:  []dlq.ErrorEntry{{Attempt: 1, Type: "db.down", Message: "m1"}, {Attempt: 3, Type: "db.down", Message: "m3", Code: dlq.CodeRetry}},
	}
}

func header(rec *kgo.Record, key string) (string, int) {
	var v string
	n := 0
	for _, h := range rec.Headers {
		if h.Key == key {
			v, n = string(h.Value), n+1
		}
	}
	return v, n
}

func TestRedeliveryCarriesOriginalAndRedriveHeaders(t *testing.T) {
	r := testRecord()
	at := time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC)
	rec := Redelivery(r, "orders", -1, 4, at)
	if string(rec.Key) != "k" || string(rec.Value) != `{"id":1}` || rec.Topic != "orders" {
		t.Fatalf("record = %+v", rec)
	}
	for key, want := range map[string]string{"traceparent": "00-abc", "tenant": "a", HeaderID: r.ID, HeaderAttempt: "4",
		HeaderRedeliveredAt: "2026-02-13T10:00:00.000Z"} {
		if got, n := header(rec, key); got != want || n != 1 {
			t.Errorf("header %s = %q (×%d), want %q once", key, got, n, want)
		}
	}
	// The redelivered record, failing again, decodes back to its record and attempt.
	failed := Encode(rec, FailureInfo{DLQTopic: "dead_letter_queue", ErrorType: "db.down"})
	failed.Topic = "dead_letter_queue"
	f := Decode(failed)
	if f.RecordID != r.ID || f.Attempt != 4 || f.Error.Attempt != 4 || len(f.Headers) != 2 {
		t.Fatalf("repeat failure decodes as %+v", f)
	}
}

func TestRedeliveryAppliesOperatorEdits(t *testing.T) {
	r := testRecord()
	r.Redelivery = &dlq.Redelivery{Topic: "orders-fixed", Headers: []dlq.Header{{Key: "tenant", Value: []byte("b")}},
		Value: []byte(`{"id":2}`), ValueSet: true}
	rec := Redelivery(r, "orders-fixed", 2, 1, testdate.Now())
	if string(rec.Value) != `{"id":2}` || rec.Partition != 2 {
		t.Fatalf("edited value/partition not applied: %+v", rec)
	}
	if got, n := header(rec, "tenant"); got != "b" || n != 1 {
		t.Fatalf("tenant header = %q ×%d, want the override once", got, n)
	}
	if string(r.Value) != `{"id":1}` {
		t.Fatal("the original value must stay untouched")
	}
}

func TestArchiveCarriesHistory(t *testing.T) {
	r := testRecord()
	rec := Archive(r, "dead_letter_queue.archive")
	hist, _ := header(rec, HeaderErrors)
	var errs []dlq.ErrorEntry
	if err := json.Unmarshal([]byte(hist), &errs); err != nil || len(errs) != 2 || errs[1].Message != "m3" {
		t.Fatalf("history header = %q (%v)", hist, err)
	}
	for key, want := range map[string]string{HeaderID: r.ID, HeaderSourceTopic: "orders", HeaderSourceOffset: "41",
		"redrive.exhaustion": "dead_letter", HeaderErrorType: "db.down", "traceparent": "00-abc"} {
		if got, _ := header(rec, key); got != want {
			t.Errorf("header %s = %q, want %q", key, got, want)
		}
	}
}

func TestAckDecodesAsCompletion(t *testing.T) {
	rec := Ack("dead_letter_queue", "01936f0e-1111-7000-8000-000000000001", 2, "billing")
	f := Decode(rec)
	if !f.Completed || f.RecordID != "01936f0e-1111-7000-8000-000000000001" || f.Attempt != 2 {
		t.Fatalf("ack decodes as %+v", f)
	}
	// Without a valid id it is not an ack (and is kept as unparseable).
	bad := Ack("dead_letter_queue", "nope", 2, "")
	if f := Decode(bad); f.Completed || f.Format != dlq.FormatUnparseable {
		t.Fatalf("ack without a valid id decodes as %+v", f)
	}
}

// The records of one batch share its allocations, and no record's headers
// run into the next one's: a target group set on one, or more records than
// the batch made room for, leave the others as Redelivery builds them.
func TestRedeliveriesOfABatchStayApart(t *testing.T) {
	at := time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC)
	b := NewRedeliveries(2, at)
	var recs []*kgo.Record
	var want []*kgo.Record
	for i, attempt := range []int{4, 4, 5} { // the third is past the room made for two
		r := testRecord()
		r.ID = r.ID[:len(r.ID)-1] + string(rune('1'+i))
		r.Key, r.Headers = []byte{byte('a' + i)}, nil // the room made for each record is all used
		recs = append(recs, b.Add(r, "orders", int32(i), attempt))
		want = append(want, Redelivery(r, "orders", int32(i), attempt, at))
	}
	for _, rec := range []*kgo.Record{recs[0], want[0]} {
		SetTargetGroup(rec, "billing")
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "traceparent", Value: []byte("00-def")},
			kgo.RecordHeader{Key: "tracestate", Value: []byte("x")})
	}
	for i := range recs {
		got, _ := json.Marshal(recs[i])
		w, _ := json.Marshal(want[i])
		if string(got) != string(w) {
			t.Errorf("record %d of the batch = %s\nwant %s", i, got, w)
		}
	}
}

// A batch reused for the next one builds that batch's records as a new
// batch would: its redelivered_at, its attempts, its ids, room past what the
// last use made.
func TestARedeliveriesBatchReusedBuildsItsRecordsAsNew(t *testing.T) {
	first, next := time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC), time.Date(2026, 2, 13, 11, 30, 0, 0, time.UTC)
	b := NewRedeliveries(2, first)
	for i := range 2 {
		r := testRecord()
		r.ID = r.ID[:len(r.ID)-1] + string(rune('1'+i))
		b.Add(r, "orders", 0, 4)
	}
	b.Reuse(3, next)
	for i, attempt := range []int{4, 5, 5} {
		r := testRecord()
		r.ID = r.ID[:len(r.ID)-1] + string(rune('5'+i))
		got, _ := json.Marshal(b.Add(r, "payments", int32(i), attempt))
		want, _ := json.Marshal(Redelivery(r, "payments", int32(i), attempt, next))
		if string(got) != string(want) {
			t.Errorf("record %d of the reused batch = %s\nwant %s", i, got, want)
		}
	}
}
