package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Every field of a canary is checked, each mistake a 400 naming the field,
// before anything is counted or created; a good one is sized from the
// records the retry selects (a percentage rounds up) and shows on the task.
func TestCanaryFieldsAreValidated(t *testing.T) {
	b := setup(t)
	b.seed(t, make([]rec, 25)...)
	retry := func(canary string) resp {
		return b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/retry", key: writeKey,
			body: `{"filter":{"queue":"orders"},"confirm":true,"canary":` + canary + `}`})
	}
	for _, c := range []struct{ canary, field string }{
		{`5`, "canary"},
		{`[]`, "canary"},
		{`"sample"`, "canary"},
		{`{"sample":1,"watch":"PT1M","extra":1}`, "canary.extra"},
		{`{"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":null,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":0,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":-3,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":10001,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":1.5,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":1e400,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":true,"watch":"PT1M"}`, "canary.sample"},
		{`{"sample":"abc","watch":"PT1M"}`, "canary.sample"},
		{`{"sample":"5","watch":"PT1M"}`, "canary.sample"},
		{`{"sample":"0%","watch":"PT1M"}`, "canary.sample"},
		{`{"sample":"101%","watch":"PT1M"}`, "canary.sample"},
		{`{"sample":"NaN%","watch":"PT1M"}`, "canary.sample"},
		{`{"sample":10}`, "canary.watch"},
		{`{"sample":10,"watch":600}`, "canary.watch"},
		{`{"sample":10,"watch":"10m"}`, "canary.watch"},
		{`{"sample":10,"watch":"PT0.5S"}`, "canary.watch"},
		{`{"sample":10,"watch":"P2D"}`, "canary.watch"},
		{`{"sample":10,"watch":"P1M"}`, "canary.watch"},
		{`{"sample":10,"watch":"PT1M","abort_if_refail":-0.1}`, "canary.abort_if_refail"},
		{`{"sample":10,"watch":"PT1M","abort_if_refail":1.5}`, "canary.abort_if_refail"},
		{`{"sample":10,"watch":"PT1M","abort_if_refail":"0.5"}`, "canary.abort_if_refail"},
		{`{"sample":10,"watch":"PT1M","abort_if_refail":true}`, "canary.abort_if_refail"},
		{`{"sample":10,"watch":"PT1M","on_inconclusive":"maybe"}`, "canary.on_inconclusive"},
		{`{"sample":10,"watch":"PT1M","on_inconclusive":true}`, "canary.on_inconclusive"},
	} {
		wantError(t, c.canary, retry(c.canary), http.StatusBadRequest, "invalid_request", c.field)
	}
	// A purge has no canary.
	wantError(t, "purge", b.do(t, req{method: "DELETE", path: "/ojs/v1/dead-letter", key: writeKey,
		body: `{"filter":{"queue":"orders"},"canary":{"sample":1,"watch":"PT1M"}}`}), http.StatusBadRequest, "invalid_request", "canary")
	var tasks int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM redrive_task").Scan(&tasks); err != nil || tasks != 0 {
		t.Fatalf("%d tasks created by refused requests (%v)", tasks, err)
	}
	if n := b.count(t, "state = 'available'"); n != 0 {
		t.Fatalf("%d records retried by refused requests", n)
	}

	// The dry run sizes the sample: 10% of 25 is 3 (rounded up).
	var dry struct {
		WouldAffect int64 `json:"would_affect"`
		Canary      struct {
			Sample        json.RawMessage `json:"sample"`
			SampleSize    int64           `json:"sample_size"`
			Watch         string          `json:"watch"`
			AbortIfRefail float64         `json:"abort_if_refail"`
		} `json:"canary"`
	}
	r := b.do(t, req{method: "POST", path: "/ojs/v1/dead-letter/retry", key: writeKey,
		body: `{"filter":{"queue":"orders"},"canary":{"sample":"10%","watch":"PT10M"}}`})
	wantStatus(t, r, http.StatusOK)
	r.json(t, &dry)
	if dry.WouldAffect != 25 || string(dry.Canary.Sample) != `"10%"` || dry.Canary.SampleSize != 3 || dry.Canary.Watch != "PT10M" ||
		dry.Canary.AbortIfRefail != 0.1 {
		t.Errorf("dry run: %s", r.body)
	}
	// Confirmed: the task carries it, in its sample phase.
	r = retry(`{"sample":5,"watch":"PT1M","abort_if_refail":0}`)
	wantStatus(t, r, http.StatusAccepted)
	var created struct {
		Task struct {
			ID     string `json:"id"`
			Canary struct {
				SampleSize    int64   `json:"sample_size"`
				AbortIfRefail float64 `json:"abort_if_refail"`
				Phase         string  `json:"phase"`
				Verdict       *string `json:"verdict"`
				Report        struct {
					Sample int64 `json:"sample"`
				} `json:"report"`
			} `json:"canary"`
		} `json:"task"`
	}
	r.json(t, &created)
	if c := created.Task.Canary; c.SampleSize != 5 || c.AbortIfRefail != 0 || c.Phase != "sample" || c.Verdict != nil {
		t.Errorf("task: %s", r.body)
	}
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/tasks?state=aborted", key: readKey}), http.StatusOK)
}

// An incident is marked "resolved, redrive when quiet" with a quiet time
// and a canary (each field checked), shows its request, and withdraws it.
func TestRedriveWhenQuietIsValidatedShownAndWithdrawn(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{})
	const fp = "00c0ffee00c0ffee"
	if _, err := b.store.RecordIncidents(context.Background(), []store.IncidentSeen{{Fingerprint: fp, ErrorType: "db.timeout",
		Signature: "boom", Queue: "orders", SeenAt: testdate.Now(), SampleID: ids[0], SampleMessage: "boom"}}); err != nil {
		t.Fatal(err)
	}
	path := "/ojs/v1/incidents/" + fp + "/redrive-when-quiet"
	mark := func(body string) resp { return b.do(t, req{method: "POST", path: path, key: writeKey, body: body}) }
	for _, c := range []struct{ body, field string }{
		{`{}`, "quiet"},
		{`{"quiet":"15m"}`, "quiet"},
		{`{"quiet":"PT30S"}`, "quiet"},
		{`{"quiet":"P8D"}`, "quiet"},
		{`{"quiet":900}`, "quiet"},
		{`{"quiet":"PT15M","canary":{"sample":0,"watch":"PT1M"}}`, "canary.sample"},
		{`{"quiet":"PT15M","canary":{"sample":10}}`, "canary.watch"},
		{`{"quiet":"PT15M","canary":{"sample":10,"watch":"PT1M","abort_if_refail":2}}`, "canary.abort_if_refail"},
		{`{"quiet":"PT15M","rate_limit":-1}`, "rate_limit"},
		{`{"quiet":"PT15M","colour":"red"}`, "colour"},
	} {
		wantError(t, c.body, mark(c.body), http.StatusBadRequest, "invalid_request", c.field)
	}
	wantError(t, "malformed id", b.do(t, req{method: "POST", path: "/ojs/v1/incidents/NOT-HEX/redrive-when-quiet", key: writeKey,
		body: `{"quiet":"PT15M"}`}), http.StatusBadRequest, "invalid_request", "id")
	wantError(t, "unknown incident", b.do(t, req{method: "POST", path: "/ojs/v1/incidents/ffffffff/redrive-when-quiet", key: writeKey,
		body: `{"quiet":"PT15M"}`}), http.StatusNotFound, "not_found", "")
	wantError(t, "read key", b.do(t, req{method: "POST", path: path, key: readKey, body: `{"quiet":"PT15M"}`}),
		http.StatusForbidden, "forbidden", "")

	type quiet struct {
		State       string  `json:"state"`
		Quiet       string  `json:"quiet"`
		RequestedBy string  `json:"requested_by"`
		QuietSince  string  `json:"quiet_since"`
		QuietUntil  string  `json:"quiet_until"`
		TaskID      *string `json:"task_id"`
		Canary      struct {
			SampleSize    int64   `json:"sample_size"`
			Watch         string  `json:"watch"`
			AbortIfRefail float64 `json:"abort_if_refail"`
		} `json:"canary"`
	}
	r := mark(`{"quiet":"PT15M"}`)
	wantStatus(t, r, http.StatusOK)
	var q quiet
	r.json(t, &q)
	since, _ := time.Parse(time.RFC3339Nano, q.QuietSince)
	until, _ := time.Parse(time.RFC3339Nano, q.QuietUntil)
	if q.State != "waiting" || q.Quiet != "PT15M" || q.RequestedBy != "ops-write" || q.TaskID != nil || until.Sub(since) != 15*time.Minute ||
		q.Canary.SampleSize != 100 || q.Canary.Watch != "PT10M" || q.Canary.AbortIfRefail != 0.1 {
		t.Errorf("request (the default canary): %s", r.body)
	}
	var in struct {
		RedriveWhenQuiet *quiet `json:"redrive_when_quiet"`
	}
	b.get(t, "/ojs/v1/incidents/"+fp, &in)
	if in.RedriveWhenQuiet == nil || in.RedriveWhenQuiet.State != "waiting" {
		t.Errorf("the incident does not show its request: %+v", in)
	}
	var audit struct {
		Items []struct {
			Action  string `json:"action"`
			KeyName string `json:"key_name"`
			Status  int    `json:"status"`
		} `json:"items"`
	}
	b.get(t, "/ojs/v1/audit?action=incident.redrive_when_quiet&target="+fp, &audit)
	if len(audit.Items) == 0 || audit.Items[0].Status != http.StatusOK || audit.Items[0].KeyName != "ops-write" {
		t.Errorf("audit: %+v", audit)
	}

	wantStatus(t, b.do(t, req{method: "DELETE", path: path, key: writeKey}), http.StatusOK)
	wantError(t, "withdrawn twice", b.do(t, req{method: "DELETE", path: path, key: writeKey}), http.StatusNotFound, "not_found", "")
	in.RedriveWhenQuiet = &quiet{}
	b.get(t, "/ojs/v1/incidents/"+fp, &in)
	if in.RedriveWhenQuiet != nil {
		t.Errorf("withdrawn, the incident still shows %+v", in.RedriveWhenQuiet)
	}
}
