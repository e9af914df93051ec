package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The OJS envelope and worker protocol as the specs word them (issue 45):
// the options wrapper of HTTP binding §9.1, unknown attributes kept (core
// §5.5), job.error (core §5.3), an optional worker_id on fetch and the lease
// holder's check on ack and nack (worker protocol §5.6).

// publishRaw publishes body and returns the answer's job as a map.
func (w *workerBundle) publishRaw(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	var out struct{ Job map[string]any }
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/jobs", body, &out), http.StatusCreated)
	return out.Job
}

func (w *workerBundle) jobRaw(t *testing.T, id string) map[string]any {
	t.Helper()
	var out struct{ Job map[string]any }
	wantStatus(t, w.get(t, "/ojs/v1/jobs/"+id, &out), http.StatusOK)
	return out.Job
}

func TestWorkerOptionsWrapper(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "email.send", "args": []any{"a"},
		"options": map[string]any{"queue": "opt-q", "retry": map[string]any{"max_attempts": 2}, "priority": 0,
			"pending": false, "timeout_ms": nil}})
	if j.Queue != "opt-q" || j.MaxAttempts != 2 {
		t.Fatalf("options.queue and options.retry not applied: %+v", j)
	}
	w.fetchOne(t, "opt-q", j.ID)
	// Sent in both places, they must agree.
	same := w.publish(t, map[string]any{"type": "t", "args": []any{}, "queue": "opt-q", "options": map[string]any{"queue": "opt-q"}})
	if same.Queue != "opt-q" {
		t.Fatalf("queue %q", same.Queue)
	}
	withTags := w.publishRaw(t, map[string]any{"type": "t", "args": []any{}, "options": map[string]any{"tags": []string{"a", "b"}}})
	if tags, _ := withTags["tags"].([]any); len(tags) != 2 || tags[0] != "a" {
		t.Fatalf("options.tags not returned as tags: %v", withTags["tags"])
	}
	for name, c := range map[string]struct {
		body   map[string]any
		status int
		code   string
		field  string
	}{
		"queues disagree":  {map[string]any{"queue": "a", "options": map[string]any{"queue": "b"}}, 400, "invalid_request", "options.queue"},
		"retry twice":      {map[string]any{"retry": map[string]any{"max_attempts": 1}, "options": map[string]any{"retry": map[string]any{"max_attempts": 2}}}, 400, "invalid_request", "options.retry"},
		"bad options q":    {map[string]any{"options": map[string]any{"queue": "a b"}}, 400, "invalid_request", "options.queue"},
		"queue uppercase":  {map[string]any{"options": map[string]any{"queue": "Default"}}, 400, "invalid_request", "options.queue"},
		"queue underscore": {map[string]any{"queue": "my_queue"}, 400, "invalid_request", "queue"},
		"queue hyphen 1st": {map[string]any{"queue": "-q"}, 400, "invalid_request", "queue"},
		"options array":    {map[string]any{"options": []any{}}, 400, "invalid_request", "options"},
		"unknown option":   {map[string]any{"options": map[string]any{"colour": "red"}}, 400, "invalid_request", "options.colour"},
		"priorities":       {map[string]any{"priority": 3, "options": map[string]any{"priority": 5}}, 400, "invalid_request", "options.priority"},
		"pending":          {map[string]any{"options": map[string]any{"pending": true}}, 422, "unsupported", "options.pending"},
		"expires_at":       {map[string]any{"expires_at": "2030-01-01T00:00:00Z"}, 422, "unsupported", "expires_at"},
		"unique malformed": {map[string]any{"options": map[string]any{"unique": map[string]any{"key": "k"}}}, 400, "invalid_request", "unique"},
		"tags not list":    {map[string]any{"options": map[string]any{"tags": "a"}}, 400, "invalid_request", "options.tags"},
	} {
		body := map[string]any{"type": "t", "args": []any{}}
		for k, v := range c.body {
			body[k] = v
		}
		wantError(t, name, w.send(t, http.MethodPost, "/ojs/v1/jobs", body, nil), c.status, c.code, c.field)
	}
	// Malformed JSON is OJS errors §4.1's INVALID_PAYLOAD.
	wantError(t, "malformed JSON", w.do(t, req{method: http.MethodPost, path: "/ojs/v1/jobs", key: writeKey, rawBody: true,
		header: http.Header{"Content-Type": {"application/openjobspec+json"}}, body: `{ invalid json }`}),
		http.StatusBadRequest, "invalid_payload", "body")
	wantError(t, "empty body", w.do(t, req{method: http.MethodPost, path: "/ojs/v1/jobs", key: writeKey, rawBody: true,
		header: http.Header{"Content-Type": {"application/json"}}, body: ``}),
		http.StatusBadRequest, "invalid_payload", "body")
	// A bad retry in options is refused as at the top level.
	r := w.send(t, http.MethodPost, "/ojs/v1/jobs", map[string]any{"type": "t", "args": []any{},
		"options": map[string]any{"retry": map[string]any{"max_attempts": -1}}}, nil)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("negative options.retry.max_attempts: %d %s", r.status, r.body)
	}
}

func TestWorkerUnknownAttributesKept(t *testing.T) {
	w := setupWorkers(t)
	j := w.publishRaw(t, map[string]any{"type": "email.send", "args": []any{1}, "queue": "keep",
		"x_custom": "v", "x_nested": map[string]any{"n": true, "big": json.Number("12345678901234567890")},
		"schema": "urn:ojs:schema:email.send:v1",
		// System-managed (core §5.3) and Redrive's own fields: ignored. The
		// id is the client's to choose (core §5.1), a UUIDv7.
		"id": "019539a4-0000-7000-8000-000000000000", "state": "completed", "attempt": 7,
		"error": map[string]any{"type": "x"}, "source": "forged", "max_attempts": 99})
	id, _ := j["id"].(string)
	// HTTP binding §4.3: answers are application/openjobspec+json, errors too.
	if r := w.get(t, "/ojs/v1/jobs/"+id, nil); r.header.Get("Content-Type") != "application/openjobspec+json" {
		t.Errorf("GET job: Content-Type %q", r.header.Get("Content-Type"))
	}
	if r := w.get(t, "/ojs/v1/jobs/019539a4-0000-7000-8000-eeeeeeeeeeee", nil); r.status != http.StatusNotFound ||
		r.header.Get("Content-Type") != "application/openjobspec+json" {
		t.Errorf("GET unknown job: %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
	}
	check := func(where string, got map[string]any) {
		t.Helper()
		nested, _ := got["x_nested"].(map[string]any)
		if got["x_custom"] != "v" || nested["n"] != true || got["schema"] != "urn:ojs:schema:email.send:v1" {
			t.Errorf("%s: unknown attributes not kept: %v", where, got)
		}
		if got["source"] != "http" || got["max_attempts"] == float64(99) {
			t.Errorf("%s: Redrive's own fields taken from the envelope: %v", where, got)
		}
	}
	if id != "019539a4-0000-7000-8000-000000000000" || j["state"] != "available" || j["attempt"] != float64(0) || j["error"] != nil {
		t.Fatalf("system-managed attributes not ignored: %v", j)
	}
	check("publish", j)
	check("get", w.jobRaw(t, id))
	var out struct{ Jobs []map[string]any }
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"keep"}}, &out), http.StatusOK)
	if len(out.Jobs) != 1 {
		t.Fatalf("fetch: %v", out.Jobs)
	}
	check("fetch", out.Jobs[0])
	// Numbers are kept exactly.
	if r := w.get(t, "/ojs/v1/jobs/"+id, nil); !strings.Contains(string(r.body), "12345678901234567890") {
		t.Errorf("number not kept exactly: %s", r.body)
	}
	// Bounded: a hostile envelope cannot store megabytes beside its args.
	big := strings.Repeat("x", 64<<10)
	wantError(t, "attributes over 64 KiB", w.send(t, http.MethodPost, "/ojs/v1/jobs",
		map[string]any{"type": "t", "args": []any{}, "x_big": big}, nil), http.StatusRequestEntityTooLarge, "invalid_request", "attributes")
}

func TestWorkerJobErrorIsTheLatest(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "t", "queue": "err-q", "args": []any{},
		"retry": map[string]any{"max_attempts": 3, "initial_interval": "PT1S", "jitter": false}})
	if got := w.jobRaw(t, j.ID); got["error"] != nil {
		t.Fatalf("error before any failure: %v", got["error"])
	}
	w.fetchOne(t, "err-q", j.ID)
	w.nack(t, j.ID, map[string]any{"code": "first", "message": "m1"})
	w.clk.Advance(2 * time.Second)
	w.fetchOne(t, "err-q", j.ID)
	w.nack(t, j.ID, map[string]any{"code": "second", "message": "m2"})
	got := w.jobRaw(t, j.ID)
	e, _ := got["error"].(map[string]any)
	if e["type"] != "second" || e["message"] != "m2" || e["attempt"] != float64(2) {
		t.Fatalf("error %v, want the latest (second, attempt 2)", got["error"])
	}
	// Core §5.3: "cleared when the job succeeds".
	w.clk.Advance(5 * time.Second)
	w.fetchOne(t, "err-q", j.ID)
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": j.ID}, nil), http.StatusOK)
	if got := w.jobRaw(t, j.ID); got["error"] != nil || got["state"] != "completed" {
		t.Fatalf("after ack: state %v, error %v", got["state"], got["error"])
	}
}

func TestWorkerIDOptionalAndChecked(t *testing.T) {
	w := setupWorkers(t)
	// No worker_id: the lease has no named holder; any ack ends it.
	a := w.publish(t, map[string]any{"type": "t", "queue": "anon", "args": []any{}})
	var out struct{ Jobs []jobView }
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"anon"}}, &out), http.StatusOK)
	if len(out.Jobs) != 1 || out.Jobs[0].ID != a.ID || out.Jobs[0].State != "active" || out.Jobs[0].Lease == nil || out.Jobs[0].Lease.WorkerID != "" {
		t.Fatalf("anonymous fetch: %+v", out.Jobs)
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": a.ID, "worker_id": "anyone"}, nil), http.StatusOK)

	// A named holder: another worker's ack or nack is refused (worker
	// protocol §5.6), and changes nothing.
	b := w.publish(t, map[string]any{"type": "t", "queue": "named", "args": []any{}})
	w.fetchOne(t, "named", b.ID) // leased to w-1
	wantError(t, "ack by another worker", w.send(t, http.MethodPost, "/ojs/v1/workers/ack",
		map[string]any{"job_id": b.ID, "worker_id": "w-2"}, nil), http.StatusConflict, "conflict", "")
	r := w.send(t, http.MethodPost, "/ojs/v1/workers/nack",
		map[string]any{"job_id": b.ID, "worker_id": "w-2", "error": map[string]any{"code": "c"}}, nil)
	wantError(t, "nack by another worker", r, http.StatusConflict, "conflict", "")
	if d := r.err(t).Error.Details; d["worker_id"] != "w-2" || d["state"] != "active" || d["job_id"] != b.ID {
		t.Errorf("details %v", d)
	}
	if got := w.job(t, b.ID); got.State != "active" || len(got.Errors) != 0 {
		t.Fatalf("a refused call changed the job: %+v", got)
	}
	wantError(t, "empty worker_id", w.send(t, http.MethodPost, "/ojs/v1/workers/ack",
		map[string]any{"job_id": b.ID, "worker_id": ""}, nil), http.StatusBadRequest, "invalid_request", "worker_id")
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/nack",
		map[string]any{"job_id": b.ID, "worker_id": "w-1", "error": map[string]any{"code": "c"}}, nil), http.StatusOK)

	// The holder's ack is taken; so is one that does not name itself.
	c := w.publish(t, map[string]any{"type": "t", "queue": "named2", "args": []any{}})
	w.fetchOne(t, "named2", c.ID)
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/ack", map[string]any{"job_id": c.ID, "worker_id": "w-1"}, nil), http.StatusOK)
}

func TestWorkerFetchVisibilityTimeoutMs(t *testing.T) {
	w := setupWorkers(t)
	j := w.publish(t, map[string]any{"type": "t", "queue": "vt-ms", "args": []any{}})
	var out struct {
		Jobs []struct {
			Lease struct {
				ExpiresAt time.Time `json:"expires_at"`
			} `json:"lease"`
		}
	}
	wantStatus(t, w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
		map[string]any{"queues": []string{"vt-ms"}, "worker_id": "w", "visibility_timeout_ms": 1500}, &out), http.StatusOK)
	if len(out.Jobs) != 1 {
		t.Fatalf("fetched %d jobs, want %s", len(out.Jobs), j.ID)
	}
	if got, want := out.Jobs[0].Lease.ExpiresAt, w.clk.Now().Add(1500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("lease expires %s, want %s", got, want)
	}
	wantError(t, "both timeouts", w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
		map[string]any{"queues": []string{"vt-ms"}, "visibility_timeout": 1, "visibility_timeout_ms": 1000}, nil),
		http.StatusBadRequest, "invalid_request", "visibility_timeout_ms")
	wantError(t, "timeout 0 ms", w.send(t, http.MethodPost, "/ojs/v1/workers/fetch",
		map[string]any{"queues": []string{"vt-ms"}, "visibility_timeout_ms": 0}, nil),
		http.StatusBadRequest, "invalid_request", "visibility_timeout_ms")
}
