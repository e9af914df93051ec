package httpapi_test

import (
	"net/http"
	"testing"
)

type scheduleJSON struct {
	Strategy string `json:"strategy"`
	Rows     []struct {
		Attempt     int    `json:"attempt"`
		NextAttempt int    `json:"next_attempt"`
		Delay       string `json:"delay"`
		Cumulative  string `json:"cumulative"`
		Note        string `json:"note"`
	} `json:"rows"`
	Notes []string `json:"notes"`
}

// One queue shows the retry schedule of its effective config; the list does not.
func TestQueueShowsItsRetrySchedule(t *testing.T) {
	b := setup(t)
	var q struct {
		Schedule *scheduleJSON `json:"schedule"`
	}
	// payments: max_attempts 7 in the policy file.
	wantStatus(t, b.get(t, "/ojs/v1/queues/payments", &q), http.StatusOK)
	s := q.Schedule
	if s == nil || s.Strategy != "exponential" || len(s.Rows) != 6 || len(s.Notes) != 1 {
		t.Fatalf("payments schedule = %+v", s)
	}
	if r := s.Rows[5]; r.Attempt != 6 || r.NextAttempt != 7 || r.Delay != "PT32S" || r.Cumulative != "PT1M3S" || r.Note != "" {
		t.Errorf("payments row 6 = %+v", r)
	}
	if s.Notes[0] != "attempt 7 fails: exhausted, kept as discard; PT1M3S from the first failure to exhaustion without jitter" {
		t.Errorf("payments notes = %q", s.Notes)
	}
	// An API config changes it at once.
	b.oneAttempt(t, "billing")
	q.Schedule = nil
	wantStatus(t, b.get(t, "/ojs/v1/queues/billing", &q), http.StatusOK)
	if s := q.Schedule; s == nil || len(s.Rows) != 0 || len(s.Notes) != 1 || s.Notes[0] != "no retries: a failure is final and kept as dead_letter" {
		t.Errorf("billing schedule = %+v", s)
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues", &list), http.StatusOK)
	for _, it := range list.Items {
		if _, ok := it["schedule"]; ok {
			t.Errorf("the list shows a schedule for %v", it["name"])
		}
	}
}

// One record shows the schedule of its own retry policy (which an override
// changes) with its topic's current max_age; the list does not.
func TestRecordShowsItsRetrySchedule(t *testing.T) {
	b := setup(t)
	// The topic retries 9 times and gives up after 90 s; its records keep
	// the retry policy they came with.
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
		map[string]any{"max_age": "PT90S", "retry": map[string]any{"max_attempts": 9}}, nil), http.StatusOK)
	id := b.seed(t, rec{queue: "orders"})[0] // the default retry policy: 3 attempts, 1 s doubling
	var r struct {
		Schedule *scheduleJSON `json:"schedule"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+id, &r), http.StatusOK)
	if s := r.Schedule; s == nil || len(s.Rows) != 2 || s.Rows[1].Cumulative != "PT3S" ||
		s.Notes[0] != "attempt 3 fails: exhausted, kept as discard; PT3S from the first failure to exhaustion without jitter" {
		t.Fatalf("record schedule = %+v", s)
	}
	// An operator's retry override becomes the record's policy, and its schedule.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry",
		map[string]any{"override": map[string]any{"retry": map[string]any{"max_attempts": 4, "initial_interval": "PT1M",
			"on_exhaustion": "dead_letter"}}}, nil), http.StatusOK)
	r.Schedule = nil
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+id, &r), http.StatusOK)
	s := r.Schedule
	if s == nil || len(s.Rows) != 3 {
		t.Fatalf("overridden schedule = %+v", s)
	}
	if s.Rows[0].Delay != "PT1M" || s.Rows[0].Note != "" ||
		s.Rows[1].Delay != "PT2M" || s.Rows[1].Cumulative != "PT3M" || s.Rows[1].Note != "past max_age: if attempt 3 fails, it is not retried" {
		t.Errorf("overridden rows = %+v", s.Rows)
	}
	if s.Notes[0] != "attempt 4 fails: exhausted, kept as dead_letter; PT7M from the first failure to exhaustion without jitter" {
		t.Errorf("overridden notes = %q", s.Notes)
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter", &list), http.StatusOK)
	if len(list.Items) != 1 {
		t.Fatalf("list = %+v", list.Items)
	}
	if _, ok := list.Items[0]["schedule"]; ok {
		t.Error("the list shows a schedule")
	}
}
