package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// The ingest-side rules (issue 22) against the real app: kfake, Postgres,
// policy files, the API and /metrics.

// ruleFailure is a failure of a record with the given key, value and headers.
func ruleFailure(queue, typ, key, value string, headers ...kgo.RecordHeader) *kgo.Record {
	src := &kgo.Record{Topic: queue, Key: []byte(key), Value: []byte(value), Headers: headers}
	return envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, Group: "svc", Type: typ,
		ErrorType: "db.down", Message: "boom", Code: dlq.CodeRetry, FailedAt: testdate.Now()})
}

// metricValue returns the value of one sample on /metrics, 0 when absent.
func metricValue(t *testing.T, base, sample string) float64 {
	t.Helper()
	for l := range strings.SplitSeq(scrapeMetrics(t, base), "\n") {
		if rest, ok := strings.CutPrefix(l, sample+" "); ok {
			var v float64
			_, _ = fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

// byKey fetches every record of a list query, whole, by key.
func (b *bundle) byKey(t *testing.T, query string, n int) map[string]record {
	t.Helper()
	out := map[string]record{}
	for _, it := range b.waitFor(t, query, n).Items {
		var r record
		b.get(t, "/ojs/v1/dead-letter/"+it.ID, &r)
		out[r.Key] = r
	}
	return out
}

const retryLater = `
_default:
  retry: {max_attempts: 5, initial_interval: PT1H, max_interval: PT2H, on_exhaustion: dead_letter}
`

// A filter that discards test events in production, one that only applies
// in staging, and a skip_retry filter: every record is stored, the turned
// away ones say which filter and why, none of them is ever scheduled — not
// even by a replay rule that replays every dead letter — and an operator can
// still retry the skip_retry one.
func TestIngestFiltersDiscardTestEventsAndSkipRetry(t *testing.T) {
	dir := policyDir(t, `
replay_rules:
  - {name: everything, filter: {}, delay: PT1S, max_replays: 1}
`+retryLater+`
  filters:
    - name: drop-test-events
      match: {header_equals: {name: x-test, value: "true"}}
      action: discard
      when_env: ["prod*"]
    - name: drop-staging-noise
      match: {key_prefix: "noise-"}
      action: discard
      when_env: [staging]
topics:
  orders:
    filters:
      - name: manual-review
        match: {payload: {path: order.review, value: 1.0}, type: "order.*"}
        action: skip_retry
`)
	b := setup(t, "REDRIVE_POLICIES_DIR", dir, "REDRIVE_ENVIRONMENT", "production", "REDRIVE_REPLAY_INTERVAL", "200ms")
	test := kgo.RecordHeader{Key: "x-test", Value: []byte("true")}
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers),
		ruleFailure("orders", "order.created", "test-1", `{"n":1}`, test),
		ruleFailure("orders", "order.created", "noise-1", `{"n":2}`),
		ruleFailure("orders", "order.created", "review-1", `{"order":{"review":1,"id":7}}`),
		ruleFailure("orders", "user.created", "review-2", `{"order":{"review":1}}`), // type does not match
		ruleFailure("orders", "order.created", "plain", `{"order":{"review":0}}`),
		failure(testdate.Now(), "orders", "order.created", "db.down", dlq.CodeDeadLetter, "control"), // a dead letter
	)
	all := b.byKey(t, "queue=orders", 6)
	filtered := b.byKey(t, "error_type=filtered", 2)
	for key, want := range map[string]struct{ exhaustion, filter, action string }{
		"test-1":   {"discard", "drop-test-events", "discard"},
		"review-1": {"dead_letter", "manual-review", "skip_retry"},
	} {
		r, ok := filtered[key]
		if !ok {
			t.Fatalf("%s not filtered: %+v", key, filtered)
		}
		last := r.Errors[len(r.Errors)-1]
		if r.State != "discarded" || r.NextRetryAt != nil || len(r.Errors) != 2 || r.Errors[0].Type != "db.down" ||
			last.Type != "filtered" || last.Code != "FILTERED" || !strings.Contains(last.Message, `"`+want.filter+`"`) ||
			!strings.Contains(last.Message, want.action) {
			t.Errorf("%s: state %s next %v errors %+v; want discarded by filter %s", key, r.State, r.NextRetryAt, r.Errors, want.filter)
		}
		var exh struct {
			Exhaustion string `json:"exhaustion"`
		}
		b.get(t, "/ojs/v1/dead-letter/"+r.ID, &exh)
		if exh.Exhaustion != want.exhaustion {
			t.Errorf("%s: exhaustion %q, want %q", key, exh.Exhaustion, want.exhaustion)
		}
	}
	for _, key := range []string{"noise-1", "review-2", "plain"} {
		if r := all[key]; r.State != "retryable" || r.NextRetryAt == nil {
			t.Errorf("%s: %s, want retryable (no filter applies to it here)", key, r.State)
		}
	}
	m := &mApp{base: b.base}
	m.wantMetric(t, `redrive_ingest_filter_matches_total{action="discard",filter="drop-test-events"}`, 1)
	m.wantMetric(t, `redrive_ingest_filter_matches_total{action="skip_retry",filter="manual-review"}`, 1)
	m.wantMetric(t, `redrive_ingest_turned_away_total{queue="orders",reason="filtered"}`, 1)
	m.wantMetric(t, `redrive_ingest_turned_away_total{queue="orders",reason="skip_retry"}`, 1)
	if v := metricValue(t, b.base, `redrive_ingest_filter_matches_total{action="discard",filter="drop-staging-noise"}`); v != 0 {
		t.Errorf("the staging filter matched %v records in production", v)
	}

	// The replay rule replays the control dead letter (and nothing else
	// waits less than an hour), but not the skip_retry one.
	eventually.Nil(t, "the control dead letter replayed", func() error {
		var r record
		b.get(t, "/ojs/v1/dead-letter/"+all["control"].ID, &r)
		if r.State == "discarded" {
			return fmt.Errorf("state %s", r.State)
		}
		return nil
	})
	b.waitFor(t, "error_type=filtered&state=discarded", 2)
	m.wantMetric(t, `ojs_dead_letter_replayed_total{queue="orders",rule="everything"}`, 1)
	// An operator may still retry the skip_retry record.
	status, body := m.do(t, http.MethodPost, "/ojs/v1/dead-letter/"+filtered["review-1"].ID+"/retry", "{}")
	if status != http.StatusOK {
		t.Fatalf("retry of the skip_retry record: %d %s", status, body)
	}
	eventually.Nil(t, "the skip_retry record redelivered on the operator's retry", func() error {
		var r record
		b.get(t, "/ojs/v1/dead-letter/"+filtered["review-1"].ID, &r)
		if r.State != "completed" {
			return fmt.Errorf("state %s", r.State)
		}
		return nil
	})
}

// A topic over max_size under reject keeps the records past the limit,
// discarded with QUEUE_FULL; one over max_size_bytes likewise, by the bytes of
// key and value; under drop_oldest the oldest retryable records make room,
// discarded with the error type overflow, announced as job.discarded. The
// counts are exact across batches.
func TestCapacityRejectDropOldestAndBytes(t *testing.T) {
	dir := policyDir(t, retryLater+`
topics:
  orders: {max_size: 3}
  big: {max_size_bytes: 50}
  clicks: {max_size: 3, overflow_policy: drop_oldest}
`)
	b := setup(t, "REDRIVE_POLICIES_DIR", dir)
	m := &mApp{base: b.base}
	events := m.sse(t, "/ojs/v1/events?type=job.discarded")
	cl := kafkatest.Client(t, b.brokers)
	var recs []*kgo.Record
	for i := range 5 {
		// Each record of big weighs 2 + 12 = 14 bytes: three fit in 50.
		recs = append(recs, failure(testdate.Now(), "orders", "t", "db.down", dlq.CodeRetry, fmt.Sprintf("o%d", i)),
			failure(testdate.Now(), "big", "t", "db.down", dlq.CodeRetry, fmt.Sprintf("b%d", i)))
	}
	kafkatest.Produce(t, cl, recs...)
	for _, q := range []string{"orders", "big"} {
		// The records past the limit are turned away once the batch is
		// stored: wait for them before counting the others.
		full := b.byKey(t, "queue="+q+"&error_type=queue_full", 2)
		b.waitFor(t, "queue="+q, 5)
		b.waitFor(t, "queue="+q+"&state=retryable", 3)
		for key, r := range full {
			last := r.Errors[len(r.Errors)-1]
			if r.State != "discarded" || r.NextRetryAt != nil || last.Code != "QUEUE_FULL" || !strings.Contains(last.Message, "is full") {
				t.Errorf("%s: %s %+v; want discarded, QUEUE_FULL", key, r.State, last)
			}
		}
		m.wantMetric(t, `redrive_ingest_turned_away_total{queue="`+q+`",reason="queue_full"}`, 2)
	}
	// drop_oldest, in two rounds: 5 records, then 2 more.
	var ids []string
	for round, keys := range [][]string{{"c0", "c1", "c2", "c3", "c4"}, {"c5", "c6"}} {
		var rs []*kgo.Record
		for _, k := range keys {
			rs = append(rs, failure(testdate.Now(), "clicks", "t", "db.down", dlq.CodeRetry, k))
		}
		kafkatest.Produce(t, cl, rs...)
		total := 5 + 2*round
		dropped := b.waitFor(t, "queue=clicks&error_type=overflow", total-3)
		b.waitFor(t, "queue=clicks", total)
		kept := b.waitFor(t, "queue=clicks&state=retryable", 3)
		// The dropped ones are the oldest: stored before any kept one.
		for _, d := range dropped.Items {
			for _, k := range kept.Items {
				if d.ID > k.ID {
					t.Errorf("round %d: dropped %s (%s) is newer than kept %s (%s)", round, d.ID, d.Key, k.ID, k.Key)
				}
			}
		}
		m.wantMetric(t, `redrive_ingest_turned_away_total{queue="clicks",reason="overflow"}`, float64(total-3))
		ids = ids[:0]
		for _, d := range dropped.Items {
			ids = append(ids, d.ID)
		}
	}
	got := collect(t, events, len(ids))
	slices.Sort(got)
	var want []string
	for _, id := range ids {
		want = append(want, "job.discarded "+id)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	var r record
	b.get(t, "/ojs/v1/dead-letter/"+ids[0], &r)
	if last := r.Errors[len(r.Errors)-1]; r.State != "discarded" || last.Type != "overflow" || !strings.Contains(last.Message, "drop_oldest") {
		t.Errorf("dropped record: %s %+v", r.State, last)
	}
}

// strict_queues turns away the records of topics nothing declares (a file
// by name or glob, or an API config declares one); allowed_job_types those
// of other types, by glob.
func TestStrictQueuesAndAllowedJobTypes(t *testing.T) {
	dir := policyDir(t, retryLater+`
  strict_queues: true
topics:
  orders: {allowed_job_types: ["order.*", "refund"]}
  "pay.*": {}
`)
	b := setup(t, "REDRIVE_POLICIES_DIR", dir)
	m := &mApp{base: b.base}
	if status, body := m.do(t, http.MethodPut, "/ojs/v1/queues/apiq/config", `{"max_size": 100, "allowed_job_types": ["a.*"]}`); status != http.StatusOK {
		t.Fatalf("PUT apiq config: %d %s", status, body)
	}
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers),
		failure(testdate.Now(), "orders", "order.created", "db.down", dlq.CodeRetry, "ok-1"),
		failure(testdate.Now(), "orders", "refund", "db.down", dlq.CodeRetry, "ok-2"),
		failure(testdate.Now(), "orders", "refund.partial", "db.down", dlq.CodeRetry, "type-1"),
		failure(testdate.Now(), "orders", "", "db.down", dlq.CodeRetry, "type-2"),
		failure(testdate.Now(), "pay.eu", "x", "db.down", dlq.CodeRetry, "ok-3"),
		failure(testdate.Now(), "apiq", "a.b", "db.down", dlq.CodeRetry, "ok-4"),
		failure(testdate.Now(), "apiq", "b", "db.down", dlq.CodeRetry, "type-3"),
		failure(testdate.Now(), "stray", "x", "db.down", dlq.CodeRetry, "strict-1"),
	)
	b.waitFor(t, "", 8)
	for key := range b.byKey(t, "state=retryable", 4) {
		if !strings.HasPrefix(key, "ok-") {
			t.Errorf("%s is retryable", key)
		}
	}
	for key, r := range b.byKey(t, "error_type=job_type_not_allowed", 3) {
		if last := r.Errors[len(r.Errors)-1]; !strings.HasPrefix(key, "type-") || r.State != "discarded" || last.Code != "JOB_TYPE_NOT_ALLOWED" ||
			!strings.Contains(last.Message, "allowed_job_types") {
			t.Errorf("%s: %s %+v", key, r.State, last)
		}
	}
	strict := b.byKey(t, "error_type=queue_not_found", 1)
	if r, ok := strict["strict-1"]; !ok || r.Errors[len(r.Errors)-1].Code != "QUEUE_NOT_FOUND" || !strings.Contains(r.Errors[len(r.Errors)-1].Message, `"stray"`) {
		t.Errorf("strict: %+v", strict)
	}
	m.wantMetric(t, `redrive_ingest_turned_away_total{queue="orders",reason="job_type_not_allowed"}`, 2)
	m.wantMetric(t, `redrive_ingest_turned_away_total{queue="apiq",reason="job_type_not_allowed"}`, 1)
	m.wantMetric(t, `redrive_ingest_turned_away_total{queue="stray",reason="queue_not_found"}`, 1)
}

// overflow_policy block is refused with a message that says why, from the
// API as from a policy file (serve would not start on it); so are the other
// rules' mistakes.
func TestIngestRuleConfigsAreValidated(t *testing.T) {
	b := setup(t)
	m := &mApp{base: b.base}
	for _, c := range []struct{ path, body, field, msg string }{
		{"/ojs/v1/queues/orders/config", `{"overflow_policy":"block"}`, "overflow_policy", "stall"},
		{"/ojs/v1/queues/orders/config", `{"max_size":-1}`, "max_size", "must be >= 0"},
		{"/ojs/v1/queues/orders/config", `{"max_size_bytes":"1GB"}`, "max_size_bytes", "must be an integer"},
		{"/ojs/v1/queues/orders/config", `{"allowed_job_types":[]}`, "allowed_job_types", "at least one"},
		{"/ojs/v1/queues/orders/config", `{"allowed_job_types":[""]}`, "allowed_job_types[0]", "must not be empty"},
		{"/ojs/v1/queues/orders/config", `{"strict_queues":true}`, "strict_queues", "_default setting"},
		{"/ojs/v1/queues/_default/config", `{"strict_queues":"yes"}`, "strict_queues", "must be a boolean"},
		{"/ojs/v1/queues/orders/config", `{"filters":[{"name":"x","match":{"type":"t"},"action":"discard"}]}`, "filters", "policy files only"},
	} {
		status, body := m.do(t, http.MethodPut, c.path, c.body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Details struct {
					Fields []struct{ Field, Message string } `json:"fields"`
				} `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if status != http.StatusUnprocessableEntity || len(e.Error.Details.Fields) == 0 || e.Error.Details.Fields[0].Field != c.field ||
			!strings.Contains(e.Error.Details.Fields[0].Message, c.msg) {
			t.Errorf("PUT %s %s: %d %s; want 422 on %s saying %q", c.path, c.body, status, body, c.field, c.msg)
		}
	}
	// The _default layer takes strict_queues.
	if status, body := m.do(t, http.MethodPut, "/ojs/v1/queues/_default/config", `{"strict_queues":true}`); status != http.StatusOK {
		t.Errorf("PUT _default strict_queues: %d %s", status, body)
	}
}
