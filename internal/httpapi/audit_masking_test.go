package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// auditMaskingPolicy masks, on every queue: the payload's secret.token,
// the values of the authorization and x-api-* headers, keys cust-*, emails,
// card numbers and Stripe keys.
const auditMaskingPolicy = `_default:
  masking:
    paths: [secret.token]
    headers: [authorization, "x-api-*"]
    keys: ["cust-*"]
    patterns: [email, card_number]
    regexes:
      - {name: stripe_key, pattern: "sk_live_[A-Za-z0-9]+"}
`

// secretMarks are what every secret the test sends holds: found anywhere
// in what a caller without unmask reads of the audit log, a secret leaked.
var secretMarks = []string{"SECRET", "4111111111111111"}

// secretFilter is a filter (a bulk body's, a rule's) with a secret in every
// condition on record content: the text searched for, the key, the value at
// a masked path, the values of masked headers. tag tells the secrets of one
// call from another's.
func secretFilter(tag, queue string) map[string]any {
	f := map[string]any{"q": tag + "-Q-SECRET", "key": "cust-" + tag + "-KEY-SECRET", "path": "secret.token",
		"value": "TOPSECRET-" + tag, "header": []string{"authorization:Bearer " + tag + "-FILTER-HDR-SECRET",
			"x-api-key:sk_live_SECRETTOKEN" + strings.ReplaceAll(tag, "-", "")}}
	if queue != "" {
		f["queue"] = queue
	}
	return f
}

// secretQuery is secretFilter as a query string (an export's).
func secretQuery(tag, queue string) string {
	q := url.Values{}
	for k, v := range secretFilter(tag, queue) {
		switch x := v.(type) {
		case string:
			q.Set(k, x)
		case []string:
			q[k] = x
		}
	}
	return q.Encode()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// auditScene is what the audited calls act on.
type auditScene struct {
	ids      []string // orders records: retried, deleted
	task     string   // a task to cancel
	quiet    string   // an incident to mark quiet and withdraw
	started  string   // an incident whose quiet is over
	exported []byte   // an export of payments, with the write key
}

// auditedCall performs an audited action with secrets in every field of
// the call that can carry record data. keeps: the entry keeps some of
// them (a caller with unmask reads them).
type auditedCall struct {
	action string
	keeps  bool
	do     func(t *testing.T, b *bundle, s *auditScene)
}

// auditedCalls covers every audited action (httpapi.AuditedActions):
// TestAuditMasksEveryAction fails on an action missing here.
var auditedCalls = []auditedCall{
	{"dead_letter.retry", true, func(t *testing.T, b *bundle, s *auditScene) {
		for i, body := range []map[string]any{
			{"headers": []map[string]any{{"key": "authorization", "value": "Bearer OVR-HDR-SECRET"},
				{"key": "X-Api-Key", "value": b64("OVR-B64-HDR-SECRET"), "encoding": "base64"}, {"key": "tenant", "value": "acme"}},
				"payload": map[string]any{"secret": map[string]any{"token": "OVR-PAYLOAD-SECRET"}, "contact": "ovr-SECRET@example.com", "n": 1},
				"meta":    map[string]any{"contact": "meta-SECRET@example.com", "card": "4111111111111111"}},
			{"value": `{"secret":{"token":"OVR-VALUE-SECRET"},"note":"mail value-SECRET@example.com"}`},
			{"value": b64(`{"secret":{"token":"OVR-B64-VALUE-SECRET"}}`), "value_encoding": "base64"},
			{"value": "not JSON: OVR-TEXT-SECRET at a masked path", "value_encoding": "utf8"},
		} {
			wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+s.ids[i]+"/retry", map[string]any{"override": body}, nil), http.StatusOK)
		}
	}},
	{"dead_letter.delete", false, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+s.ids[4], nil, nil), http.StatusOK)
	}},
	{"dead_letter.export", true, func(t *testing.T, b *bundle, s *auditScene) {
		for _, q := range []string{secretQuery("export", "payments"), secretQuery("export-all", "")} {
			wantStatus(t, b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?" + q, key: writeKey}), http.StatusOK)
		}
		r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?queue=payments", key: writeKey})
		wantStatus(t, r, http.StatusOK)
		s.exported = r.body
	}},
	{"dead_letter.import", false, func(t *testing.T, b *bundle, s *auditScene) {
		if !bytes.Contains(s.exported, []byte("SEED-SECRET")) {
			t.Fatalf("the write key's export holds no secret to import: %s", s.exported)
		}
		wantStatus(t, b.importNDJSON(t, "", s.exported), http.StatusOK)
		r := b.importNDJSON(t, "", []byte(`{"id":"IMPORT-SECRET","queue":"payments","key":"cust-IMPORT-SECRET","value":"IMPORT-SECRET"}`+"\n"))
		wantStatus(t, r, http.StatusUnprocessableEntity)
	}},
	{"dead_letter.bulk_retry", true, func(t *testing.T, b *bundle, s *auditScene) {
		patch := []map[string]any{{"op": "replace", "path": "/secret/token", "value": "PATCH-SECRET"},
			{"op": "test", "path": "/contact", "value": "patch-SECRET@example.com"}}
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
			map[string]any{"filter": secretFilter("bulk", "payments"), "patch": patch}, nil), http.StatusOK)
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/retry",
			map[string]any{"filter": secretFilter("bulk-all", ""), "confirm": true}, nil), http.StatusAccepted)
	}},
	{"dead_letter.purge", true, func(t *testing.T, b *bundle, s *auditScene) {
		// The issue's: a header value and a payload value of a purge filter.
		var a struct {
			Task taskJSON `json:"task"`
		}
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", map[string]any{"filter": map[string]any{
			"header": []string{"x-api-key:sk_live_SECRETTOKEN"}, "path": "secret.token", "value": "TOPSECRET-0003"}, "confirm": true}, &a),
			http.StatusAccepted)
		s.task = a.Task.ID
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter", map[string]any{"filter": secretFilter("purge", "payments")}, nil),
			http.StatusOK)
	}},
	{"task.cancel", false, func(t *testing.T, b *bundle, s *auditScene) {
		r := b.send(t, http.MethodPost, "/ojs/v1/tasks/"+s.task+"/cancel", nil, nil)
		if r.status != http.StatusAccepted && r.status != http.StatusConflict { // conflict: it finished first
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
	}},
	{"queue.create", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "invoices", "config": map[string]any{
			"replay_rules": []any{map[string]any{"name": "nightly", "filter": secretFilter("create", ""), "delay": "PT1H", "max_replays": 1}}}}, nil),
			http.StatusCreated)
	}},
	{"queue.config", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config", map[string]any{
			"replay_rules": []any{map[string]any{"name": "nightly", "filter": secretFilter("config", ""), "delay": "PT1H", "max_replays": 1},
				map[string]any{"name": "own", "filter": secretFilter("config-own", "orders"), "delay": "PT2H", "max_replays": 1}}}, nil),
			http.StatusOK)
	}},
	{"queue.pause", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, nil), http.StatusOK)
	}},
	{"queue.drain", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/drain", nil, nil), http.StatusOK)
	}},
	{"queue.resume", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/resume", nil, nil), http.StatusOK)
	}},
	{"queue.delete", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/queues/invoices", nil, nil), http.StatusOK)
	}},
	{"replay_rule.create", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", map[string]any{"name": "audited",
			"filter": secretFilter("rule", ""), "delay": "PT1H", "max_replays": 1}, nil), http.StatusCreated)
	}},
	{"replay_rule.update", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/dead-letter/replay-rules/audited", map[string]any{"name": "audited",
			"filter": secretFilter("rule-2", "payments"), "delay": "PT2H", "max_replays": 1}, nil), http.StatusOK)
	}},
	{"replay_rule.delete", true, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/replay-rules/audited", nil, nil), http.StatusOK)
	}},
	{"incident.redrive_when_quiet", false, func(t *testing.T, b *bundle, s *auditScene) {
		for _, fp := range []string{s.quiet, s.started} {
			wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/incidents/"+fp+"/redrive-when-quiet", map[string]any{"quiet": "PT1M"}, nil), http.StatusOK)
		}
	}},
	{"incident.redrive_when_quiet.withdraw", false, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/incidents/"+s.quiet+"/redrive-when-quiet", nil, nil), http.StatusOK)
	}},
	{"incident.redrive_when_quiet.started", false, func(t *testing.T, b *bundle, s *auditScene) {
		// The request's quiet is over an hour ago: the next pass starts it.
		ctx := context.Background()
		q, err := b.store.QuietRequestOf(ctx, s.started)
		if err != nil {
			t.Fatal(err)
		}
		q.RequestedAt = q.RequestedAt.Add(-time.Hour)
		if _, err := b.store.SetQuietRequest(ctx, q); err != nil {
			t.Fatal(err)
		}
		eventually.Nil(t, "a pass of the quiet redriver that starts the retry", func() error {
			if _, err := b.app.Quiet().RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if q, err := b.store.QuietRequestOf(ctx, s.started); err != nil || q.TaskID == nil {
				return errors.New("not started yet")
			}
			return nil
		})
	}},
	{"compat.requeue", false, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.do(t, compatReq(http.MethodPost, "/api/dlq/requeue/dlq:billing", writeKey)), http.StatusOK)
	}},
	{"compat.requeue_all", false, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.do(t, compatReq(http.MethodPost, "/api/dlq/requeue-all/dlq:billing", writeKey)), http.StatusOK)
	}},
	{"compat.clear", false, func(t *testing.T, b *bundle, s *auditScene) {
		wantStatus(t, b.do(t, compatReq(http.MethodDelete, "/api/dlq/dlq:billing", writeKey)), http.StatusOK)
	}},
}

// leaks are the secrets in an answer: in its bytes, or in one of its JSON
// strings once base64-decoded (a header or value sent base64).
func leaks(body []byte) []string {
	var out []string
	has := func(where string, b []byte) {
		for _, m := range secretMarks {
			for at := 0; ; {
				i := bytes.Index(b[at:], []byte(m))
				if i < 0 {
					break
				}
				i += at
				out = append(out, where+": …"+string(b[max(0, i-60):min(len(b), i+len(m)+20)])+"…")
				at = i + len(m)
			}
		}
	}
	has("body", body)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if d, err := base64.StdEncoding.DecodeString(x); err == nil && len(x) >= 8 {
				has("base64 "+x, d)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var v any
	if json.Unmarshal(body, &v) == nil {
		walk(v)
	}
	return out
}

// The audit log keeps what callers sent: a caller without unmask reads
// every entry masked as the records are, whatever the action; a caller
// with unmask reads it whole. Each audited action (httpapi.AuditedActions:
// the routes with an action and every other AddAudit call) is performed
// with secrets in every field that can carry record data; an action added
// without being in auditedCalls fails here.
func TestAuditMasksEveryAction(t *testing.T) {
	var want, table []string
	want = httpapi.AuditedActions(t)
	for _, c := range auditedCalls {
		table = append(table, c.action)
	}
	slices.Sort(table)
	for _, a := range want {
		if !slices.Contains(table, a) {
			t.Errorf("audited action %s is not in auditedCalls: perform it there with secrets in every field that can carry record data", a)
		}
	}
	for _, a := range table {
		if !slices.Contains(want, a) {
			t.Errorf("auditedCalls lists %s, which nothing audits", a)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Parallel()
	b := start(t, options{policy: auditMaskingPolicy})
	secret := map[string]string{"authorization": "Bearer SEED-HDR-SECRET"}
	s := &auditScene{ids: b.seed(t, rec{queue: "orders"}, rec{queue: "orders"}, rec{queue: "orders"}, rec{queue: "orders"}, rec{queue: "orders"},
		rec{queue: "payments", key: "cust-SEED-SECRET", value: `{"secret":{"token":"SEED-SECRET"},"contact":"seed-SECRET@example.com"}`, headers: secret},
		rec{queue: "billing"}, rec{queue: "billing"}, rec{queue: "billing"})}
	s.quiet, s.started = "00a0d17a00a0d17a", "00a0d17b00a0d17b"
	for _, fp := range []string{s.quiet, s.started} {
		if _, err := b.store.RecordIncidents(context.Background(), []store.IncidentSeen{{Fingerprint: fp, ErrorType: "db.timeout",
			Signature: "boom", Queue: "orders", SeenAt: testdate.Now().Add(-time.Hour), SampleID: s.ids[0], SampleMessage: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range auditedCalls {
		t.Run(c.action, func(t *testing.T) { c.do(t, b, s) })
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, c := range auditedCalls {
		for _, key := range []string{readKey, botKey, writeKey} {
			var page struct {
				Items []struct {
					Action string          `json:"action"`
					Filter json.RawMessage `json:"filter"`
					Before json.RawMessage `json:"before"`
					After  json.RawMessage `json:"after"`
				} `json:"items"`
			}
			r := b.getAs(t, key, "/ojs/v1/audit?limit=100&action="+url.QueryEscape(c.action), &page)
			if len(page.Items) == 0 {
				t.Errorf("%s: no audit entry", c.action)
				continue
			}
			found := leaks(r.body)
			switch {
			case key != writeKey && len(found) > 0:
				t.Errorf("%s read with %s (no unmask) shows secrets:\n  %s", c.action, key, strings.Join(found, "\n  "))
			case key == writeKey && c.keeps && len(found) == 0:
				t.Errorf("%s read with unmask shows no secret: the entry kept none, or unmask is not honoured: %s", c.action, r.body)
			}
		}
	}
	// The whole log at once, as a read key reads it.
	r := b.getAs(t, readKey, "/ojs/v1/audit?limit=500", nil)
	if found := leaks(r.body); len(found) > 0 {
		t.Errorf("the audit log shows a read key secrets:\n  %s", strings.Join(found, "\n  "))
	}
}
