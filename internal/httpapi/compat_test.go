package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
)

func compatReq(method, path, key string) req {
	h := http.Header{}
	if key != "" {
		h.Set("X-API-Key", key)
	}
	return req{method: method, path: path, header: h}
}

func TestCompatibilityRoutes(t *testing.T) {
	b := setup(t)
	b.seed(t, rec{queue: "orders", value: `{"camera_id":"front_door"}`, errType: "ConnectionRefusedError"},
		rec{queue: "orders", value: `{"camera_id":"back_door"}`},
		rec{queue: "orders", value: `{"camera_id":"garage"}`},
		rec{queue: "orders", state: dlq.StateRetryable},
		rec{queue: "billing"})

	var stats map[string]int
	r := b.do(t, compatReq("GET", "/api/dlq/stats", readKey))
	wantStatus(t, r, http.StatusOK)
	r.json(t, &stats)
	if stats["orders_count"] != 3 || stats["billing_count"] != 1 || stats["total_count"] != 4 {
		t.Errorf("stats = %v", stats)
	}

	var jobs struct {
		QueueName string `json:"queue_name"`
		Items     []struct {
			OriginalJob  map[string]any `json:"original_job"`
			Error        string         `json:"error"`
			ErrorType    string         `json:"error_type"`
			AttemptCount int            `json:"attempt_count"`
			QueueName    string         `json:"queue_name"`
			StackTrace   string         `json:"stack_trace"`
		} `json:"items"`
		Pagination map[string]any `json:"pagination"`
	}
	r = b.do(t, compatReq("GET", "/api/dlq/jobs/dlq:orders?start=0&limit=2", readKey))
	wantStatus(t, r, http.StatusOK)
	r.json(t, &jobs)
	if jobs.QueueName != "dlq:orders" || len(jobs.Items) != 2 || jobs.Pagination["total"] != float64(3) ||
		jobs.Pagination["has_more"] != true || jobs.Items[0].QueueName != "orders" || jobs.Items[0].Error != "boom" ||
		jobs.Items[0].StackTrace == "" || jobs.Items[0].OriginalJob["camera_id"] == nil {
		t.Errorf("jobs = %+v", jobs)
	}
	wantError(t, "bad limit", b.do(t, compatReq("GET", "/api/dlq/jobs/orders?limit=0", readKey)), 400, "invalid_request", "limit")

	// Requeue answers once the record reached the topic.
	var res struct {
		Success bool           `json:"success"`
		Message string         `json:"message"`
		Job     map[string]any `json:"job"`
	}
	r = b.do(t, compatReq("POST", "/api/dlq/requeue/dlq:orders", writeKey))
	wantStatus(t, r, http.StatusOK)
	r.json(t, &res)
	if !res.Success || res.Job["camera_id"] != "front_door" || !strings.Contains(res.Message, "dlq:orders to orders") {
		t.Errorf("requeue = %+v", res)
	}
	first := kafkatest.Consume(t, b.brokers, "orders", 1, 10*time.Second)
	if string(first[0].Value) != `{"camera_id":"front_door"}` {
		t.Errorf("requeued %q", first[0].Value)
	}
	r = b.do(t, compatReq("POST", "/api/dlq/requeue-all/orders", writeKey))
	wantStatus(t, r, http.StatusOK)
	r.json(t, &res)
	if !res.Success || res.Message != "Requeued 2 jobs from dlq:orders to orders" {
		t.Errorf("requeue-all = %+v", res)
	}
	kafkatest.Consume(t, b.brokers, "orders", 3, 10*time.Second)
	r = b.do(t, compatReq("POST", "/api/dlq/requeue/dlq:orders", writeKey))
	wantStatus(t, r, http.StatusOK)
	r.json(t, &res)
	if res.Success {
		t.Errorf("requeue of an empty queue = %+v", res)
	}

	var cleared map[string]any
	r = b.do(t, compatReq("DELETE", "/api/dlq/dlq:billing", writeKey))
	wantStatus(t, r, http.StatusOK)
	r.json(t, &cleared)
	if cleared["message"] != "Cleared 1 jobs from dlq:billing" || cleared["queue_name"] != "dlq:billing" || b.count(t, "queue = 'billing'") != 0 {
		t.Errorf("clear = %v", cleared)
	}
	wantError(t, "bad queue", b.do(t, compatReq("DELETE", "/api/dlq/dlq:bad%20name", writeKey)), 400, "invalid_request", "queue_name")
}

// When Kafka does not take the records in time, requeue answers 503, not a
// fake success, and the records stay queued.
func TestCompatRequeueOutageIs503(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK) // nothing goes out
	id := b.seed(t, rec{queue: "billing"})[0]
	r := b.do(t, compatReq("POST", "/api/dlq/requeue/billing", writeKey))
	wantError(t, "requeue while stuck", r, 503, "backend_error", "")
	var rec recordJSON
	b.get(t, "/ojs/v1/dead-letter/"+id, &rec)
	if rec.State != "available" || rec.NextRetryAt == nil {
		t.Errorf("the record is not queued: %+v", rec)
	}
}
