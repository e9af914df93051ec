package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

func TestListEveryFilter(t *testing.T) {
	b := setup(t)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := b.seed(t,
		rec{queue: "orders", typ: "order.created", errType: "db.timeout", key: "order-1", value: `{"customer":{"id":17,"tier":"gold"}}`,
			headers: map[string]string{"traceparent": "00-abc", "tenant": "acme"}},
		rec{queue: "orders", typ: "order.refund", errType: "payment.declined", key: "order-2", value: `{"customer":{"id":"17"}}`,
			state: dlq.StateRetryable},
		rec{queue: "billing", typ: "invoice.generate", errType: "db.timeout", value: `{"customer":{"id":18}}`, createdAt: old,
			exhaustion: dlq.ExhaustionDiscard},
		rec{queue: "billing", typ: "invoice.generate", errType: "validation.bad", value: "not json at all, needle inside",
			state: dlq.StateCompleted, headers: map[string]string{"tenant": "globex"}},
	)
	cases := []struct {
		query string
		want  []int // indexes into ids, newest first
	}{
		{"", []int{3, 2, 1, 0}},
		{"queue=orders", []int{1, 0}},
		{"type=invoice.generate", []int{3, 2}},
		{"error_type=db.timeout", []int{2, 0}},
		{"state=retryable", []int{1}},
		{"state=discarded&exhaustion=discard", []int{2}},
		{"exhaustion=dead_letter", []int{0}},
		{"since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00Z", []int{2}},
		{"since=2026-02-01T00:00:00Z", []int{3, 1, 0}},
		{"key=order-2", []int{1}},
		{"q=needle", []int{3}},
		{"q=" + url.QueryEscape(`"tier":"gold"`), []int{0}},
		{"path=customer.id&value=17", []int{1, 0}}, // 17 and "17"
		{"path=customer.id&value=18", []int{2}},
		{"path=customer.tier&value=gold", []int{0}},
		{"header=tenant", []int{3, 0}},
		{"header=tenant:acme", []int{0}},
		{"header=tenant:acme&header=traceparent", []int{0}},
		{"queue=billing&error_type=db.timeout&type=invoice.generate", []int{2}},
		{"queue=nope", nil},
	}
	for _, c := range cases {
		var l listJSON
		wantStatus(t, b.get(t, "/ojs/v1/dead-letter?"+c.query, &l), http.StatusOK)
		got, want := l.itemIDs(), pick(ids, c.want)
		if strings.Join(got, ",") != strings.Join(want, ",") || l.Pagination.Total != len(want) {
			t.Errorf("?%s: got %v (total %d), want %v", c.query, got, l.Pagination.Total, c.want)
		}
	}

	// Keyset paging and offset.
	var p1, p2, off listJSON
	b.get(t, "/ojs/v1/dead-letter?limit=3", &p1)
	if len(p1.Items) != 3 || !p1.Pagination.HasMore || p1.Pagination.NextCursor == "" || p1.Pagination.Total != 4 {
		t.Fatalf("page 1 = %+v", p1.Pagination)
	}
	b.get(t, "/ojs/v1/dead-letter?limit=3&cursor="+p1.Pagination.NextCursor, &p2)
	if len(p2.Items) != 1 || p2.Items[0].ID != ids[0] || p2.Pagination.HasMore {
		t.Errorf("page 2 = %+v", p2)
	}
	b.get(t, "/ojs/v1/dead-letter?limit=2&offset=2", &off)
	if len(off.Items) != 2 || off.Items[0].ID != ids[1] {
		t.Errorf("offset page = %+v", off.Items)
	}
}

func TestGetShowsFullRecordAndDeleteRemovesIt(t *testing.T) {
	b := setup(t)
	id := b.seed(t, rec{key: "k1", value: `{"a":1}`, headers: map[string]string{"h": "v"}})[0]
	var r recordJSON
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/"+id, &r), http.StatusOK)
	if r.ID != id || len(r.Errors) != 2 || *r.Key != "k1" || r.Redelivery != nil || len(r.Headers) != 1 {
		t.Errorf("record = %+v", r)
	}
	var del map[string]any
	wantStatus(t, b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+id, nil, &del), http.StatusOK)
	if del["deleted"] != true || del["id"] != id {
		t.Errorf("delete = %v", del)
	}
	wantError(t, "get deleted", b.get(t, "/ojs/v1/dead-letter/"+id, nil), 404, "not_found", "")
	wantError(t, "delete again", b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/"+id, nil, nil), 404, "not_found", "")
	wantError(t, "delete bad id", b.send(t, http.MethodDelete, "/ojs/v1/dead-letter/x", nil, nil), 400, "invalid_request", "id")
}

func TestRetryResetsAttemptKeepsHistoryAndRecordsTheOverride(t *testing.T) {
	b := setup(t)
	// Paused, so that the scheduler leaves the record alone and its state can be read.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/billing/pause", nil, nil), http.StatusOK)
	ids := b.seed(t, rec{queue: "billing", value: `{"amount":1}`, headers: map[string]string{"trace": "t1"}},
		rec{queue: "billing", state: dlq.StateCompleted})
	var r recordJSON
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry", map[string]any{"override": map[string]any{
		"queue":   "orders.retry",
		"meta":    map[string]any{"retry_source": "manual_dlq_retry"},
		"headers": []map[string]any{{"key": "x-fixed", "value": "yes"}, {"key": "bin", "value": "AAE=", "encoding": "base64"}},
		"value":   `{"amount":2}`,
		"retry":   map[string]any{"max_attempts": 1, "initial_interval": "PT5S"},
	}}, &r), http.StatusOK)
	if r.State != "available" || r.Attempt != 0 || r.EnqueuedAt == nil || r.NextRetryAt == nil || r.DiscardedAt != nil ||
		r.Exhaustion != nil || len(r.Errors) != 2 || r.MaxAttempts != 1 || r.Retry["max_attempts"] != float64(1) ||
		r.Retry["initial_interval"] != "PT5S" || r.Meta["retry_source"] != "manual_dlq_retry" {
		t.Errorf("retried record = %+v", r)
	}
	if *r.Value != `{"amount":1}` || len(r.Headers) != 1 {
		t.Errorf("the original value and headers changed: %q %v", *r.Value, r.Headers)
	}
	rd := r.Redelivery
	if rd == nil || *rd.Queue != "orders.retry" || *rd.Value != `{"amount":2}` || len(rd.Headers) != 2 ||
		rd.Headers[1]["encoding"] != "base64" || rd.Headers[1]["value"] != "AAE=" {
		t.Errorf("redelivery = %+v", rd)
	}
	// Retrying again while it waits for redelivery is allowed (it is
	// neither in flight nor completed): a new override replaces the edit.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry",
		map[string]any{"override": map[string]any{"value": `{"amount":2}`, "queue": "orders.retry", "headers": []map[string]any{
			{"key": "x-fixed", "value": "yes"}, {"key": "bin", "value": "AAE=", "encoding": "base64"}}}}, nil), http.StatusOK)
	wantError(t, "retry completed", b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[1]+"/retry", nil, nil), 409, "conflict", "")
	wantError(t, "retry unknown", b.send(t, http.MethodPost, "/ojs/v1/dead-letter/01a20107-bc72-7d07-a136-944382c24f6e/retry", nil, nil),
		404, "not_found", "")

	// Bad overrides name the field and change nothing.
	fresh := b.seed(t, rec{queue: "billing"})[0]
	bad := []struct {
		body   string
		status int
		code   string
		field  string
	}{
		{`{"override":{"queue":"bad topic!"}}`, 400, "invalid_request", "override.queue"},
		{`{"override":{"colour":"red"}}`, 400, "invalid_request", "colour"},
		{`{"override":{"meta":[1]}}`, 400, "invalid_request", "override.meta"},
		{`{"override":{"value":"!!","value_encoding":"base64"}}`, 400, "invalid_request", "override.value"},
		{`{"override":{"value":"x","value_encoding":"rot13"}}`, 400, "invalid_request", "override.value_encoding"},
		{`{"override":{"value_encoding":"utf8"}}`, 400, "invalid_request", "override.value_encoding"},
		{`{"override":{"headers":[{"key":"","value":"v"}]}}`, 400, "invalid_request", "override.headers[0].key"},
		{`{"override":{"headers":[{"key":"redrive.id","value":"v"}]}}`, 400, "invalid_request", "override.headers[0].key"},
		{`{"override":{"retry":{"max_attempts":-1}}}`, 422, "validation_error", "override.retry.max_attempts"},
		{`{"override":{"retry":{"initial_interval":"5 seconds"}}}`, 422, "validation_error", "override.retry.initial_interval"},
		{`{"override":{"retry":{"initial_interval":"PT2H"}}}`, 422, "validation_error", ""},
		// An operator's policy is held to the limits policy files are.
		{`{"override":{"retry":{"max_attempts":2000000000}}}`, 422, "validation_error", "override.retry.max_attempts"},
		{`{"override":{"retry":{"initial_interval":"PT0.001S"}}}`, 422, "validation_error", "override.retry.initial_interval"},
		{`{"override":{"queue":17}}`, 400, "invalid_request", "override.queue"},
		{`{"override":`, 400, "invalid_request", "body"},
	}
	for _, c := range bad {
		r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/" + fresh + "/retry", key: writeKey, body: c.body})
		wantError(t, c.body, r, c.status, c.code, c.field)
	}
	var still recordJSON
	b.get(t, "/ojs/v1/dead-letter/"+fresh, &still)
	if still.State != "discarded" || still.Redelivery != nil {
		t.Errorf("a refused retry changed the record: %+v", still)
	}
	// No body at all is a plain retry.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+fresh+"/retry", nil, &still), http.StatusOK)
	if still.State != "available" || still.Redelivery != nil {
		t.Errorf("plain retry = %+v", still)
	}
}

func TestEditedValueRetryArrivesOnTheSourceTopic(t *testing.T) {
	b := setup(t)
	id := b.seed(t, rec{queue: "orders", key: "order-9", value: `{"amount":"9,99"}`,
		headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})[0]
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", map[string]any{"override": map[string]any{
		"value": `{"amount":9.99}`, "headers": []map[string]any{{"key": "x-edited-by", "value": "ops"}},
	}}, nil), http.StatusOK)

	got := kafkatest.Consume(t, b.brokers, "orders", 1, 30*time.Second)[0]
	if string(got.Value) != `{"amount":9.99}` || string(got.Key) != "order-9" {
		t.Errorf("redelivered %q/%q, want the edited value", got.Key, got.Value)
	}
	hs := map[string]string{}
	for _, h := range got.Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs["redrive.id"] != id || hs["x-edited-by"] != "ops" || !strings.HasPrefix(hs["traceparent"], "00-4bf9") {
		t.Errorf("headers = %v", hs)
	}
	// The original stays recorded next to the edit.
	var r recordJSON
	eventually.True(t, "redelivered_at", func() bool {
		b.get(t, "/ojs/v1/dead-letter/"+id, &r)
		return r.RedeliveredAt != nil
	}, eventually.Within(10*time.Second))
	if *r.Value != `{"amount":"9,99"}` || r.Redelivery == nil || *r.Redelivery.Value != `{"amount":9.99}` {
		t.Errorf("record after redelivery = %+v", r)
	}
}

func TestStatsCountsAndRetention(t *testing.T) {
	b := setup(t)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.seed(t, rec{queue: "orders", errType: "db.timeout", createdAt: old}, rec{queue: "orders", errType: "db.timeout"},
		rec{queue: "billing", errType: "validation.bad", state: dlq.StateRetryable},
		rec{queue: "billing", errType: "validation.bad", exhaustion: dlq.ExhaustionDiscard})
	var st struct {
		Total        int64            `json:"total"`
		ByQueue      map[string]int64 `json:"by_queue"`
		ByErrorType  map[string]int64 `json:"by_error_type"`
		ByState      map[string]int64 `json:"by_state"`
		ByExhaustion map[string]int64 `json:"by_exhaustion"`
		OldestAt     string           `json:"oldest_at"`
		NewestAt     string           `json:"newest_at"`
		Retention    map[string]any   `json:"retention"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/stats", &st), http.StatusOK)
	if st.Total != 4 || st.ByQueue["orders"] != 2 || st.ByQueue["billing"] != 2 || st.ByErrorType["db.timeout"] != 2 ||
		st.ByState["discarded"] != 3 || st.ByState["retryable"] != 1 || st.ByExhaustion["discard"] != 1 ||
		st.OldestAt != "2026-01-01T00:00:00.000Z" || st.NewestAt == "" {
		t.Errorf("stats = %+v", st)
	}
	if st.Retention["max_age"] != "P180D" || st.Retention["max_count"] != float64(10000) || st.Retention["next_prune_at"] == "" {
		t.Errorf("retention = %v", st.Retention)
	}
	// Compaction keeps the figures.
	if err := b.store.CompactCounts(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.ByQueue, st.ByErrorType = nil, nil
	b.get(t, "/ojs/v1/dead-letter/stats?queue=billing", &st)
	if st.Total != 2 || len(st.ByQueue) != 1 || st.ByErrorType["validation.bad"] != 2 {
		t.Errorf("billing stats = %+v", st)
	}
	wantError(t, "unknown param", b.get(t, "/ojs/v1/dead-letter/stats?colour=red", nil), 400, "invalid_request", "colour")
}

func TestRecordsIngestedFromKafkaAreListed(t *testing.T) {
	b := setup(t)
	producer := kafkatest.Client(t, b.brokers)
	kafkatest.Produce(t, producer, &kgo.Record{Topic: dlqTopic, Value: []byte(`{"junk":true}`)})
	var l listJSON
	eventually.True(t, "ingested record", func() bool {
		b.get(t, "/ojs/v1/dead-letter?error_type=redrive.unparseable", &l)
		return len(l.Items) == 1
	}, eventually.Within(30*time.Second))
}
