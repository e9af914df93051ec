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
	"github.com/redrive/redrive/internal/kafkatest"
)

// transferAvro is a record whose seq an incident left wrong; fix holds the
// right one, or null when nobody knows it.
const transferAvro = `{"type":"record","name":"Transfer","namespace":"com.acme","fields":[
	{"name":"id","type":"string"},
	{"name":"seq","type":"long"},
	{"name":"fix","type":["null","long"],"default":null}]}`

type patchAnswer struct {
	DryRun bool `json:"dry_run"`
	Patch  *struct {
		Applies   int64 `json:"applies"`
		Fails     int64 `json:"fails"`
		Evaluated int64 `json:"evaluated"`
		Errors    []struct {
			ID, Field, Message string
		} `json:"errors"`
		Samples []struct {
			ID     string          `json:"id"`
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
		} `json:"samples"`
	} `json:"patch"`
	Task struct {
		ID    string          `json:"id"`
		Patch json.RawMessage `json:"patch"`
	} `json:"task"`
}

type patchedTask struct {
	State     string `json:"state"`
	Processed int64  `json:"processed"`
	Skipped   struct {
		Count   int64 `json:"count"`
		Records []struct {
			ID, Message string
		} `json:"records"`
	} `json:"skipped"`
}

// A patch over the 10,000 records of an incident: the dry run counts what
// it applies to and what it fails on, with samples and the first errors;
// the task produces exactly the records whose patched payload conforms,
// each encoded with its schema (read back by hamba/avro), and skips and
// lists exactly the others, which stay as they were.
func TestPatchRepairsAnIncident(t *testing.T) {
	sb := setupSchemas(t)
	id := sb.reg.Register("transfers-value", "AVRO", transferAvro)
	sch := avro.MustParse(transferAvro)
	ref := &dlq.SchemaRef{RegistryID: id, Type: "AVRO", Subject: "transfers-value"}
	// Several batches, and more skipped records (118) than a task lists (100).
	const n = 2_000
	const base = int64(1_000_000_000_000_000_000) // 19 digits
	unknown := func(i int) bool { return i%17 == 0 }
	rs := make([]rec, n)
	for i := range rs {
		var fix any
		fixJSON := "null"
		if !unknown(i) {
			fix = base + int64(i)
			fixJSON = fmt.Sprint(base + int64(i))
		}
		body, err := avro.Marshal(sch, map[string]any{"id": fmt.Sprintf("t-%05d", i), "seq": int64(i), "fix": fix})
		if err != nil {
			t.Fatal(err)
		}
		var h sr.ConfluentHeader
		v, _ := h.AppendEncode(nil, id, nil)
		rs[i] = rec{queue: "orders", errType: "transfer.bad_seq", value: string(append(v, body...)), valueSchema: ref,
			payload: fmt.Sprintf(`{"id":"t-%05d","seq":%d,"fix":%s}`, i, i, fixJSON)}
	}
	ids := sb.seed(t, rs...)
	skippedWant := map[string]bool{}
	for i, rid := range ids {
		if unknown(i) {
			skippedWant[rid] = true
		}
	}
	patch := json.RawMessage(`[{"op":"copy","from":"/fix","path":"/seq"}]`)
	body := map[string]any{"filter": map[string]any{"error_type": "transfer.bad_seq"}, "patch": patch}

	var dry patchAnswer
	wantStatus(t, sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &dry), http.StatusOK)
	p := dry.Patch
	if p == nil || p.Applies != n-int64(len(skippedWant)) || p.Fails != int64(len(skippedWant)) || p.Evaluated != n {
		t.Fatalf("dry run %+v, want %d applies, %d fails of %d", p, n-len(skippedWant), len(skippedWant), n)
	}
	if len(p.Errors) != 5 || len(p.Samples) != 3 {
		t.Fatalf("dry run: %d errors, %d samples; want 5 and 3", len(p.Errors), len(p.Samples))
	}
	for _, e := range p.Errors {
		if !skippedWant[e.ID] || e.Field != "/seq" || !strings.Contains(e.Message, "long") {
			t.Errorf("dry-run error %+v: want a skipped record, /seq, expected long", e)
		}
	}
	s := p.Samples[0]
	if s.ID != ids[1] || string(s.Before) != `{"id":"t-00001","seq":1,"fix":1000000000000000001}` ||
		string(s.After) != `{"id":"t-00001","seq":1000000000000000001,"fix":1000000000000000001}` {
		t.Errorf("sample %s: %s -> %s", s.ID, s.Before, s.After)
	}

	body["confirm"] = true
	var created patchAnswer
	wantStatus(t, sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &created), http.StatusAccepted)
	if string(created.Task.Patch) != string(patch) {
		t.Errorf("task patch %s, want %s", created.Task.Patch, patch)
	}
	sb.waitTask(t, created.Task.ID, "completed", 2*time.Minute)
	var task patchedTask
	sb.get(t, "/ojs/v1/tasks/"+created.Task.ID, &task)
	if task.Processed != n-int64(len(skippedWant)) || task.Skipped.Count != int64(len(skippedWant)) || len(task.Skipped.Records) != 100 {
		t.Fatalf("task: processed %d, skipped %d listing %d; want %d, %d listing 100", task.Processed, task.Skipped.Count,
			len(task.Skipped.Records), n-len(skippedWant), len(skippedWant))
	}
	for _, r := range task.Skipped.Records {
		if !skippedWant[r.ID] || !strings.HasPrefix(r.Message, "/seq: expected long") {
			t.Errorf("skipped %+v", r)
		}
	}
	// The skipped records stay as they were: not retried, no edit.
	if got := sb.count(t, "state = 'discarded' AND redelivery IS NULL AND error_type = 'transfer.bad_seq'"); got != len(skippedWant) {
		t.Errorf("%d records left as they were, want %d", got, len(skippedWant))
	}
	// The others are produced, each with its own fix as seq.
	out := kafkatest.Consume(t, sb.brokers, "orders", n-len(skippedWant), 2*time.Minute)
	seen := map[string]bool{}
	for _, r := range out {
		var h sr.ConfluentHeader
		sid, b, err := h.DecodeID(r.Value)
		if err != nil || sid != id {
			t.Fatalf("redelivered value: schema %d, %v", sid, err)
		}
		var v struct {
			ID  string `avro:"id"`
			Seq int64  `avro:"seq"`
			Fix *int64 `avro:"fix"`
		}
		if err := avro.Unmarshal(sch, b, &v); err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscanf(v.ID, "t-%05d", &i)
		if unknown(i) || v.Fix == nil || v.Seq != base+int64(i) || *v.Fix != v.Seq {
			t.Fatalf("redelivered %+v", v)
		}
		seen[v.ID] = true
	}
	if len(seen) != n-len(skippedWant) {
		t.Errorf("%d distinct records redelivered, want %d", len(seen), n-len(skippedWant))
	}
}

// JSON records are patched too (numbers exact); a failing test op names
// its path, a record that is not JSON has no payload, and a malformed
// patch is refused naming the operation's field.
func TestPatchJSONRecords(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{errType: "json.bad", value: `{"n":1,"amount":"bad"}`}, rec{errType: "json.bad", value: `{"n":2,"amount":"bad"}`},
		rec{errType: "json.bad", value: "\x01\x02binary"})
	patch := json.RawMessage(`[{"op":"test","path":"/n","value":1},{"op":"replace","path":"/amount","value":12345678901234567890.10}]`)
	body := map[string]any{"filter": map[string]any{"error_type": "json.bad"}, "patch": patch}
	var dry patchAnswer
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &dry), http.StatusOK)
	p := dry.Patch
	if p == nil || p.Applies != 1 || p.Fails != 2 || len(p.Errors) != 2 || len(p.Samples) != 1 {
		t.Fatalf("dry run %+v", p)
	}
	if e := p.Errors[0]; e.ID != ids[1] || e.Field != "/n" || !strings.Contains(e.Message, "test failed") {
		t.Errorf("error %+v", e)
	}
	if e := p.Errors[1]; e.ID != ids[2] || e.Message != "no decoded payload" {
		t.Errorf("error %+v", e)
	}
	want := `{"n":1,"amount":12345678901234567890.10}`
	if string(p.Samples[0].After) != want {
		t.Errorf("sample after %s, want %s", p.Samples[0].After, want)
	}
	body["confirm"] = true
	var created patchAnswer
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &created), http.StatusAccepted)
	b.waitTask(t, created.Task.ID, "completed", 30*time.Second)
	var task patchedTask
	b.get(t, "/ojs/v1/tasks/"+created.Task.ID, &task)
	if task.Processed != 1 || task.Skipped.Count != 2 {
		t.Errorf("task %+v", task)
	}
	var r editedJSON
	b.get(t, "/ojs/v1/dead-letter/"+ids[0], &r)
	if r.Redelivery == nil || r.Redelivery.Value == nil || *r.Redelivery.Value != want || string(r.Redelivery.Payload) != want {
		t.Errorf("redelivery %+v, want %s", r.Redelivery, want)
	}

	for _, c := range []struct {
		patch any
		field string
	}{
		{[]any{map[string]any{"op": "replace", "path": "/a", "value": 1}, map[string]any{"op": "frobnicate", "path": "/a"}}, "patch[1].op"},
		{[]any{map[string]any{"op": "remove", "path": "a"}}, "patch[0].path"},
		{[]any{map[string]any{"op": "copy", "path": "/a"}}, "patch[0].from"},
		{[]any{map[string]any{"op": "add", "path": "/a"}}, "patch[0].value"},
		{map[string]any{"op": "add"}, "patch"},
	} {
		r := b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry", map[string]any{"patch": c.patch}, nil)
		wantError(t, c.field, r, http.StatusBadRequest, "invalid_request", c.field)
	}
}
