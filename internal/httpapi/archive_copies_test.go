package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// 18 dead letters are archived, exported, purged and imported again —
// twice. The archive topic holds one copy of each record in its state, not
// three: a record imported again in a state it was archived in is marked
// archived (when its copy was made), not copied again.
func TestRecordsImportedAgainAfterAPurgeAreNotArchivedAgain(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, make([]rec, 18)...)
	archived := func(what string) {
		t.Helper()
		eventually.True(t, what, func() bool {
			return b.count(t, "id = ANY($1::uuid[]) AND archive_state = 'done' AND archived_at IS NOT NULL", ids) == len(ids)
		}, eventually.Within(30*time.Second))
	}
	archived("the dead letters archived")
	_, _, exported := b.export(t, "queue=orders")

	for round := range 2 {
		var purge struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter",
			map[string]any{"filter": map[string]any{"queue": "orders"}, "confirm": true}, &purge), http.StatusAccepted)
		b.waitTask(t, purge.Task.ID, "completed", 30*time.Second)
		if n := b.count(t, "queue = 'orders'"); n != 0 {
			t.Fatalf("round %d: %d records left after the purge", round, n)
		}
		r := b.importNDJSON(t, "", exported.body)
		wantStatus(t, r, http.StatusOK)
		var res importResult
		r.json(t, &res)
		if res.Imported != len(ids) {
			t.Fatalf("round %d: import %+v, want %d imported", round, res, len(ids))
		}
		archived(fmt.Sprintf("the records imported again (round %d) marked archived", round))
	}

	copies := map[[2]string]int{}
	for _, r := range readTopicToEnd(t, b.brokers, dlqTopic+".archive") {
		copies[[2]string{headerOf(r, "redrive.id"), headerOf(r, "redrive.state")}]++
	}
	for _, id := range ids {
		if n := copies[[2]string{id, "discarded"}]; n != 1 {
			t.Errorf("record %s has %d discarded copies on the archive topic, want 1", id, n)
		}
	}
	if len(copies) != len(ids) {
		t.Errorf("the archive topic holds copies of %d records and states, want %d: %v", len(copies), len(ids), copies)
	}
}

// readTopicToEnd reads topic from its start to the end it has now.
func readTopicToEnd(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(kafkatest.Client(t, brokers)).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	todo := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			todo[o.Partition], parts[o.Partition] = o.Offset, kgo.NewOffset().AtStart()
		}
	})
	var out []*kgo.Record
	if len(todo) == 0 {
		return out
	}
	cl := kafkatest.Client(t, brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	for len(todo) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s to its end %v: timed out", topic, todo)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := todo[r.Partition]; ok && r.Offset < end {
				out = append(out, r)
				if r.Offset+1 >= end {
					delete(todo, r.Partition)
				}
			}
		})
	}
	return out
}

// headerOf is r's header key ("" when it has none).
func headerOf(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
