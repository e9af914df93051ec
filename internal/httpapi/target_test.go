package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// A retry's override.target and a bulk retry's target are group or topic:
// anything else is a 400 naming the field, nothing changed; a valid one is
// kept on the record (redelivery.target) and on the task, and the record
// shows its trace id from its traceparent.
type targetRecordJSON struct {
	TraceID    *string `json:"trace_id"`
	Redelivery *struct {
		Target *string `json:"target"`
	} `json:"redelivery"`
}

type targetTaskJSON struct {
	ID     string  `json:"id"`
	Target *string `json:"target"`
}

func TestRetryTargetAndTraceID(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter,
		headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		rec{queue: "orders", state: dlq.StateDiscarded, exhaustion: dlq.ExhaustionDeadLetter,
			headers: map[string]string{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}})

	wantError(t, "override.target groups", b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry",
		map[string]any{"override": map[string]any{"target": "groups"}}, nil), http.StatusBadRequest, "invalid_request", "override.target")
	wantError(t, "bulk target 1", b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"target": 1}, nil), http.StatusBadRequest, "invalid_request", "")
	wantError(t, "bulk target everyone", b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"target": "everyone", "confirm": true}, nil), http.StatusBadRequest, "invalid_request", "target")
	wantError(t, "purge target", b.send(t, http.MethodDelete, "/ojs/v1/dead-letter",
		map[string]any{"target": "topic"}, nil), http.StatusBadRequest, "invalid_request", "target")
	if n := b.count(t, "state = 'discarded'"); n != 2 {
		t.Fatalf("%d records still discarded, want 2: a refused request changes nothing", n)
	}

	var got targetRecordJSON
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry",
		map[string]any{"override": map[string]any{"target": "topic"}}, &got), http.StatusOK)
	if got.Redelivery == nil || got.Redelivery.Target == nil || *got.Redelivery.Target != "topic" {
		t.Errorf("redelivery %+v, want target topic", got.Redelivery)
	}
	if got.TraceID == nil || *got.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace_id %v, want the traceparent's", got.TraceID)
	}
	var other targetRecordJSON
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+ids[1], &other), http.StatusOK)
	if other.TraceID != nil {
		t.Errorf("trace_id %q of an all-zero (invalid) traceparent, want null", *other.TraceID)
	}

	var ans struct {
		Task targetTaskJSON `json:"task"`
	}
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
		map[string]any{"filter": map[string]any{"ids": []string{ids[1]}}, "target": "group", "confirm": true}, &ans), http.StatusAccepted)
	if ans.Task.Target == nil || *ans.Task.Target != "group" {
		t.Errorf("task target %v, want group", ans.Task.Target)
	}
	b.waitTask(t, ans.Task.ID, "completed", 10*time.Second)
	var task targetTaskJSON
	wantStatus(t, b.get(t, "/ojs/v1/tasks/"+ans.Task.ID, &task), http.StatusOK)
	if task.Target == nil || *task.Target != "group" {
		t.Errorf("stored task target %v, want group", task.Target)
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+ids[1], &other), http.StatusOK)
	if other.Redelivery == nil || other.Redelivery.Target == nil || *other.Redelivery.Target != "group" {
		t.Errorf("bulk-retried record's redelivery %+v, want target group", other.Redelivery)
	}
}
