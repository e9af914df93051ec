package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	env "github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

type activityJSON struct {
	Name     string  `json:"name"`
	OldestAt *string `json:"oldest_at"`
	LastHour struct {
		Added   int `json:"added"`
		Retried int `json:"retried"`
	} `json:"last_hour"`
}

func (q activityJSON) String() string {
	at := "null"
	if q.OldestAt != nil {
		at = *q.OldestAt
	}
	return fmt.Sprintf("%s oldest_at %s, %d added, %d retried", q.Name, at, q.LastHour.Added, q.LastHour.Retried)
}

// A queue shows when its oldest record was created and, over the last hour,
// the failures ingest stored (new records and repeat failures) and the
// records the scheduler redelivered — through the real ingest and
// redelivery paths, in the list and for one queue alike.
func TestQueueShowsItsAgeAndLastHour(t *testing.T) {
	b := setup(t)
	// One attempt: failures are final, so only operators' retries redeliver.
	b.oneAttempt(t, "orders", "billing")
	cl := kafkatest.Client(t, b.brokers)
	fail := func(src *kgo.Record) *kgo.Record {
		return env.Encode(src, env.FailureInfo{DLQTopic: dlqTopic, ErrorType: "db.down", Message: "down"})
	}
	for i := range 3 {
		kafkatest.Produce(t, cl, fail(&kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)}))
	}
	kafkatest.Produce(t, cl, fail(&kgo.Record{Topic: "billing", Key: []byte("b"), Value: []byte(`{}`)}))
	var l listJSON
	eventually.True(t, "4 records stored", func() bool {
		l = listJSON{}
		b.get(t, "/ojs/v1/dead-letter?state=discarded&limit=10", &l)
		return len(l.Items) == 4
	}, eventually.Within(30*time.Second))
	var orders []recordJSON
	for _, r := range l.Items {
		if r.Queue == "orders" {
			orders = append(orders, r)
		}
	}
	// Newest first: the last is the oldest.
	var oldest struct {
		CreatedAt string `json:"created_at"`
	}
	b.get(t, "/ojs/v1/dead-letter/"+orders[2].ID, &oldest)

	// An operator retries two orders records; the scheduler redelivers them.
	for _, r := range orders[:2] {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+r.ID+"/retry", nil, nil), http.StatusOK)
	}
	redelivered := kafkatest.Consume(t, b.brokers, "orders", 2, 30*time.Second)
	// The consumer fails one of them again: a repeat failure.
	kafkatest.Produce(t, cl, fail(redelivered[0]))

	queue := func(name string) activityJSON {
		t.Helper()
		var q activityJSON
		wantStatus(t, b.get(t, "/ojs/v1/queues/"+name, &q), http.StatusOK)
		return q
	}
	eventually.True(t, "orders: 4 added, 2 retried", func() bool {
		q := queue("orders")
		return q.LastHour.Added == 4 && q.LastHour.Retried == 2
	}, eventually.Within(30*time.Second))
	check := func(when string) {
		t.Helper()
		byName := itemsBy(t, b, "/ojs/v1/queues", func(x activityJSON) string { return x.Name })
		for _, name := range []string{"orders", "billing", "payments"} {
			if one := queue(name); one.String() != byName[name].String() {
				t.Errorf("%s: %s alone = %v, in the list %v", when, name, one, byName[name])
			}
		}
		o, bl, p := byName["orders"], byName["billing"], byName["payments"]
		if o.OldestAt == nil || *o.OldestAt != oldest.CreatedAt || o.LastHour.Added != 4 || o.LastHour.Retried != 2 {
			t.Errorf("%s: orders = %v, want oldest_at %s, 4 added, 2 retried", when, o, oldest.CreatedAt)
		}
		if bl.OldestAt == nil || bl.LastHour.Added != 1 || bl.LastHour.Retried != 0 {
			t.Errorf("%s: billing = %v, want 1 added", when, bl)
		}
		// payments has a policy file entry and no records.
		if p.Name != "payments" || p.OldestAt != nil || p.LastHour.Added != 0 || p.LastHour.Retried != 0 {
			t.Errorf("%s: payments = %v, want no records and no activity", when, p)
		}
	}
	check("as written")
	if err := b.store.CompactActivity(context.Background(), testdate.Now()); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}

type seriesJSON struct {
	Since  string `json:"since"`
	Step   string `json:"step"`
	Points []struct {
		At      string `json:"at"`
		Added   int64  `json:"added"`
		Retried *int64 `json:"retried"`
	} `json:"points"`
	Queues []struct {
		Name   string  `json:"name"`
		Added  int64   `json:"added"`
		Points []int64 `json:"points"`
	} `json:"queues"`
}

func (s seriesJSON) added() (n int64) {
	for _, p := range s.Points {
		n += p.Added
	}
	return n
}

func (s seriesJSON) queues() string {
	var out []string
	for _, q := range s.Queues {
		var sum int64
		for _, n := range q.Points {
			sum += n
		}
		out = append(out, fmt.Sprintf("%s %d/%d", q.Name, q.Added, sum))
	}
	return strings.Join(out, ", ")
}

// Failures over time, through the real ingest: every queue's (with the top
// queues' own series), one queue's, and one incident's (per queue, without
// retried); the range and step are checked, naming the field at fault.
func TestActivityOverTimeByQueueAndIncident(t *testing.T) {
	b := setup(t)
	b.oneAttempt(t, "orders", "billing")
	cl := kafkatest.Client(t, b.brokers)
	fail := func(topic, errType, msg string, i int) *kgo.Record {
		src := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)}
		return env.Encode(src, env.FailureInfo{DLQTopic: dlqTopic, ErrorType: errType, Message: msg})
	}
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, fail("orders", "db.down", fmt.Sprintf("dial tcp 10.0.%d.5:5432: connect: connection refused", i), i))
	}
	recs = append(recs, fail("billing", "db.down", "dial tcp 10.9.9.9:6432: connect: connection refused", 10),
		fail("orders", "http.timeout", "POST https://api/v1/charges/0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b: context deadline exceeded", 20),
		fail("orders", "http.timeout", "POST https://api/v1/charges/4f6c1d2e-9b8a-4c3d-8e7f-1a2b3c4d5e6f: context deadline exceeded", 21))
	kafkatest.Produce(t, cl, recs...)
	var all seriesJSON
	eventually.True(t, "6 failures in the last 10 minutes", func() bool {
		all = seriesJSON{}
		wantStatus(t, b.get(t, "/ojs/v1/activity?last=PT10M&step=PT1M", &all), http.StatusOK)
		return all.added() == 6
	}, eventually.Within(30*time.Second))
	if all.Step != "PT1M" || len(all.Points) != 11 || all.queues() != "orders 5/5, billing 1/1" || all.Points[10].Retried == nil {
		t.Errorf("every queue: step %s, %d points, queues %q; want PT1M, 11 (10 minutes and this one), orders 5, billing 1, with retried",
			all.Step, len(all.Points), all.queues())
	}
	var orders seriesJSON
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders/activity?last=PT10M", &orders), http.StatusOK)
	if orders.added() != 5 || orders.Queues != nil {
		t.Errorf("orders: %d added, queues %q; want 5 and no per-queue series", orders.added(), orders.queues())
	}
	var list struct {
		Items []struct {
			ID        string `json:"id"`
			ErrorType string `json:"error_type"`
		} `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/incidents", &list), http.StatusOK)
	ids := map[string]string{}
	for _, in := range list.Items {
		ids[in.ErrorType] = in.ID
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d incidents, want 2 (db.down and the timeout, whatever its UUID)", len(list.Items))
	}
	var db seriesJSON
	wantStatus(t, b.get(t, "/ojs/v1/incidents/"+ids["db.down"]+"/activity?last=PT10M", &db), http.StatusOK)
	if db.added() != 4 || db.queues() != "orders 3/3, billing 1/1" || db.Points[0].Retried != nil {
		t.Errorf("db.down: %d added, queues %q; want 4: orders 3, billing 1, without retried", db.added(), db.queues())
	}
	var timeout seriesJSON
	wantStatus(t, b.get(t, "/ojs/v1/incidents/"+ids["http.timeout"]+"/activity?queues=0", &timeout), http.StatusOK)
	if timeout.added() != 2 || len(timeout.Queues) != 0 || timeout.Step != "PT1M" || len(timeout.Points) != 61 {
		t.Errorf("timeout by default: %d added, %d queue series, step %s, %d points; want 2, none, PT1M, 61 (the last hour)",
			timeout.added(), len(timeout.Queues), timeout.Step, len(timeout.Points))
	}
	var day seriesJSON
	wantStatus(t, b.get(t, "/ojs/v1/activity?last=P1D", &day), http.StatusOK)
	if day.Step != "PT1H" || len(day.Points) != 25 || day.added() != 6 {
		t.Errorf("a day: step %s, %d points, %d added; want PT1H, 25, 6", day.Step, len(day.Points), day.added())
	}
	for _, tc := range []struct{ path, field string }{
		{"/ojs/v1/activity?step=PT30S", "step"},
		{"/ojs/v1/activity?step=1m", "step"},
		{"/ojs/v1/activity?last=PT3H&step=PT5M", "step"},
		{"/ojs/v1/activity?last=P8D", "last"},
		{"/ojs/v1/activity?last=-PT1H", "last"},
		{"/ojs/v1/activity?since=2020-01-01T00:00:00Z", "since"},
		{"/ojs/v1/activity?since=yesterday", "since"},
		{"/ojs/v1/activity?since=2026-01-01T00:00:00Z&last=PT1H", "last"},
		{"/ojs/v1/activity?until=2999-01-01T00:00:00Z", "until"},
		{"/ojs/v1/activity?last=PT1H&until=2000-01-01T00:00:00Z", "last"},
		{"/ojs/v1/activity?queues=21", "queues"},
		{"/ojs/v1/activity?queue=orders", "queue"},
		{"/ojs/v1/activity?step=PT1M&step=PT5M", "step"},
		{"/ojs/v1/queues/orders/activity?queues=3", "queues"},
		{"/ojs/v1/incidents/NOTHEX/activity", "id"},
	} {
		wantError(t, tc.path, b.get(t, tc.path, nil), http.StatusBadRequest, "invalid_request", tc.field)
	}
	wantError(t, "unknown incident", b.get(t, "/ojs/v1/incidents/ffffffffffffffff/activity", nil), http.StatusNotFound, "not_found", "")
}
