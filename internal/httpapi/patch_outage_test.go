package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// A registry outage in the middle of a patch task loses nothing and
// produces nothing half-right. 1,200 records of two schemas, none held in
// memory: the first 600 of schema A, the next 600 of schema B. The registry
// goes down right after serving A, while the first batch (500 records of A)
// runs: that batch commits; the second (100 of A, 400 of B) cannot fetch B,
// fails as a whole and is tried again, without a record produced, patched
// or skipped. Once the registry is back the task completes and every record
// is produced exactly once, patched.
func TestRegistryOutageDuringAPatchTaskLosesNothing(t *testing.T) {
	sb := setupSchemas(t)
	const textB = `{"type":"record","name":"Transfer","namespace":"com.acme.b","fields":[
	{"name":"id","type":"string"},
	{"name":"seq","type":"long"},
	{"name":"fix","type":["null","long"],"default":null}]}`
	idA := sb.reg.Register("transfers-a-value", "AVRO", transferAvro)
	idB := sb.reg.Register("transfers-b-value", "AVRO", textB)
	schemas := map[int]avro.Schema{idA: avro.MustParse(transferAvro), idB: avro.MustParse(textB)}
	const n, perSchema, batch = 1200, 600, 500
	const base = int64(1_000_000_000_000_000_000)
	rs := make([]rec, n)
	for i := range rs {
		id, subject := idA, "transfers-a-value"
		if i >= perSchema {
			id, subject = idB, "transfers-b-value"
		}
		key := fmt.Sprintf("t-%05d", i)
		body, err := avro.Marshal(schemas[id], map[string]any{"id": key, "seq": int64(i), "fix": base + int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		var h sr.ConfluentHeader
		v, _ := h.AppendEncode(nil, id, nil)
		rs[i] = rec{queue: "orders", errType: "transfer.bad_seq", key: key, value: string(append(v, body...)),
			valueSchema: &dlq.SchemaRef{RegistryID: id, Type: "AVRO", Subject: subject},
			payload:     fmt.Sprintf(`{"id":%q,"seq":%d,"fix":%d}`, key, i, base+int64(i))}
	}
	sb.seed(t, rs...) // seeded, not ingested: no schema in memory nor in Postgres's cache
	if got := sb.count(t, "state = 'discarded' AND redelivery IS NULL AND error_type = 'transfer.bad_seq'"); got != n {
		t.Fatalf("%d records seeded, want %d", got, n)
	}

	sb.reg.DownAfterServing(idA)
	patch := json.RawMessage(`[{"op":"copy","from":"/fix","path":"/seq"}]`)
	var created patchAnswer
	wantStatus(t, sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"filter": map[string]any{"error_type": "transfer.bad_seq"}, "patch": patch, "confirm": true}, &created),
		http.StatusAccepted)

	// The registry is down after the first batch: the second fails, and is
	// tried again (at least twice), failing each time.
	var tj taskJSON
	eventually.True(t, "the second batch failing, again", func() bool {
		tj = sb.task(t, created.Task.ID)
		return len(tj.Errors) >= 2
	}, eventually.Within(30*time.Second))
	if tj.State != "running" && tj.State != "pending" {
		t.Fatalf("task %s while the registry is down, want it running", tj.State)
	}
	var task patchedTask
	sb.get(t, "/ojs/v1/tasks/"+created.Task.ID, &task)
	if task.Processed != batch || task.Skipped.Count != 0 {
		t.Fatalf("while the registry is down: %d processed, %d skipped; want %d, 0", task.Processed, task.Skipped.Count, batch)
	}
	if !strings.Contains(fmt.Sprint(tj.Errors), "unreachable") {
		t.Errorf("task errors %v, want the registry unreachable", tj.Errors)
	}
	// The rest, A's last 100 included, are untouched: no edit, not retried.
	if got := sb.count(t, "state = 'discarded' AND redelivery IS NULL AND error_type = 'transfer.bad_seq'"); got != n-batch {
		t.Errorf("%d records untouched while the registry is down, want %d", got, n-batch)
	}
	// Nothing of the failed batch reached Kafka.
	for _, offs := range kafkatest.Held(t, sb.brokers, "orders") {
		for off, key := range offs {
			var i int
			if _, err := fmt.Sscanf(key, "t-%05d", &i); err != nil || i >= batch {
				t.Errorf("produced %q at offset %d while the registry was down", key, off)
			}
		}
	}

	sb.reg.SetDown(false)
	sb.waitTask(t, created.Task.ID, "completed", 2*time.Minute)
	sb.get(t, "/ojs/v1/tasks/"+created.Task.ID, &task)
	if task.Processed != n || task.Skipped.Count != 0 {
		t.Fatalf("task: %d processed, %d skipped; want %d, 0", task.Processed, task.Skipped.Count, n)
	}
	out := kafkatest.Consume(t, sb.brokers, "orders", n, 2*time.Minute)
	seen := map[string]int{}
	for _, r := range out {
		var h sr.ConfluentHeader
		sid, b, err := h.DecodeID(r.Value)
		if err != nil || schemas[sid] == nil {
			t.Fatalf("redelivered value: schema %d, %v", sid, err)
		}
		var v struct {
			ID  string `avro:"id"`
			Seq int64  `avro:"seq"`
			Fix *int64 `avro:"fix"`
		}
		if err := avro.Unmarshal(schemas[sid], b, &v); err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscanf(v.ID, "t-%05d", &i)
		wantID := idA
		if i >= perSchema {
			wantID = idB
		}
		if sid != wantID || string(r.Key) != v.ID || v.Fix == nil || v.Seq != base+int64(i) || *v.Fix != v.Seq {
			t.Fatalf("redelivered %+v with schema %d key %q", v, sid, r.Key)
		}
		seen[v.ID]++
	}
	// Exactly once: the topic holds n records, n distinct.
	held := 0
	for _, offs := range kafkatest.Held(t, sb.brokers, "orders") {
		held += len(offs)
	}
	if len(seen) != n || held != n {
		t.Errorf("%d distinct records redelivered, %d on the topic; want %d and %d", len(seen), held, n, n)
	}
}
