package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/pgtest"
)

// mApp is one running processor of the maintenance scenario.
type mApp struct {
	app  *app.App
	base string
}

// startApp runs a processor on dbURL and brokers with the clock; it stops at
// the end of the test or when stop is called.
func startApp(t *testing.T, dbURL string, brokers []string, policies string, clk *clock.Fake) (*mApp, func()) {
	t.Helper()
	a, stop := apptest.Start(t, brokers, dbURL, app.Options{Clock: clk},
		"REDRIVE_POLICIES_DIR", policies,
		// The test drives passes with RunOnce: the services' own passes wait
		// longer than the test ever advances clk (181 days and 2 hours), or
		// one could run first and leave RunOnce nothing to do.
		"REDRIVE_PRUNE_INTERVAL", "10000h",
		"REDRIVE_REPLAY_INTERVAL", "10000h")
	return &mApp{app: a, base: "http://" + a.Addr()}, stop
}

// metric returns the value of the sample `name{labels}` on /metrics, or -1.
func (m *mApp) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get(m.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return -1
}

// wantMetric waits (up to 10 s) for sample to read want: components count
// just after the change they count becomes visible.
func (m *mApp) wantMetric(t *testing.T, sample string, want float64) {
	t.Helper()
	eventually.Nil(t, fmt.Sprintf("%s = %v", sample, want), func() error {
		if got := m.metric(t, sample); got != want {
			return fmt.Errorf("it is %v", got)
		}
		return nil
	}, eventually.Within(10*time.Second))
}

func (m *mApp) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, m.base+path, strings.NewReader(body))
	if body != "" || method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sse reads the event stream at path into a channel of "type subject" strings.
func (m *mApp) sse(t *testing.T, path string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the reader goroutine closes it
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	out := make(chan string, 100)
	sc := bufio.NewScanner(resp.Body)
	// The server subscribes before it writes this line: events published from
	// now on reach the stream.
	if !sc.Scan() || sc.Text() != ": connected" {
		t.Fatalf("GET %s: first line %q", path, sc.Text())
	}
	go func() {
		defer resp.Body.Close()
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev struct {
					Type    string `json:"type"`
					Subject string `json:"subject"`
				}
				_ = json.Unmarshal([]byte(data), &ev)
				out <- ev.Type + " " + ev.Subject
			}
		}
	}()
	return out
}

func collect(t *testing.T, ch <-chan string, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case s := <-ch:
			out = append(out, s)
		case <-timeout:
			t.Fatalf("got %d of %d events: %v", len(out), n, out)
		}
	}
	return out
}

func failure(at time.Time, queue, typ, errType string, code dlq.Code, key string) *kgo.Record {
	src := &kgo.Record{Topic: queue, Key: []byte(key), Value: []byte(`{"key":"` + key + `"}`)}
	return envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, Group: "billing-svc", Type: typ,
		ErrorType: errType, Message: "boom", Code: code, FailedAt: at})
}

func recordIDs(t *testing.T, m *mApp, query string, n int) []string {
	t.Helper()
	var ids []string
	eventually.Nil(t, fmt.Sprintf("%d records at ?%s", n, query), func() error {
		var l struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		status, body := m.do(t, http.MethodGet, "/ojs/v1/dead-letter?"+query, "")
		_ = json.Unmarshal(body, &l)
		if status != http.StatusOK || len(l.Items) != n {
			return fmt.Errorf("GET: %d %s", status, body)
		}
		ids = make([]string, n)
		for i, it := range l.Items {
			ids[i] = it.ID
		}
		return nil
	})
	return ids
}

// TestDeadLetterMetricsEventsAndMaintenance scripts a scenario end to end and
// checks /metrics, the SSE stream and the events topic after each step:
// failures arrive, a replay rule replays one, a second replica (a restart)
// reports the same DLQ sizes without having seen anything, an operator purges
// one queue and retries a record, and the pruner archives and removes the rest.
func TestDeadLetterMetricsEventsAndMaintenance(t *testing.T) {
	t.Parallel()
	const eventsTopic = dlqTopic + ".events"
	brokers := kafkatest.New(t, dlqTopic, "orders", "billing", eventsTopic, dlqTopic+".archive")
	dbURL := pgtest.URL(t)
	policies := policyDir(t, `
topics:
  orders:
    pruning_policy: archive
    types:
      order.created: {}
replay_rules:
  - {name: policy-timeouts, filter: {error_type: db.never}, delay: PT1H, max_replays: 1}
`)
	clk := clock.NewPinned(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) // the test moves it; the app keeps running
	a, stopA := startApp(t, dbURL, brokers, policies, clk)
	all := a.sse(t, "/ojs/v1/events")
	billingOnly := a.sse(t, "/ojs/v1/events?topic=billing&type=dead_letter.replayed,dead_letter.added")

	// 1. Three dead letters on orders, two on billing.
	producer := kafkatest.Client(t, brokers)
	kafkatest.Produce(t, producer,
		failure(clk.Now(), "orders", "order.created", "db.timeout", dlq.CodeDeadLetter, "o1"),
		failure(clk.Now(), "orders", "order.created", "db.timeout", dlq.CodeDeadLetter, "o2"),
		failure(clk.Now(), "orders", "order.created", "db.timeout", dlq.CodeDeadLetter, "o3"),
		failure(clk.Now(), "billing", "invoice.retry", "db.timeout", dlq.CodeDeadLetter, "b1"),
		failure(clk.Now(), "billing", "invoice.send", "smtp.down", dlq.CodeDeadLetter, "b2"),
	)
	orderIDs := recordIDs(t, a, "queue=orders&state=discarded", 3)
	billing := recordIDs(t, a, "queue=billing&state=discarded", 2)
	mustOK(t, a.app.Gauges().RunOnce(context.Background()))
	a.wantMetric(t, `ojs_dead_letter_total{queue="orders"}`, 3)
	a.wantMetric(t, `ojs_dead_letter_total{queue="billing"}`, 2)
	// A type keeps its label only when a policy file names it; others are "other".
	a.wantMetric(t, `ojs_dead_letter_added_total{queue="orders",type="order.created"}`, 3)
	a.wantMetric(t, `ojs_dead_letter_added_total{queue="billing",type="other"}`, 2)
	a.wantMetric(t, `redrive_dead_letter_oldest_age_seconds{queue="orders"}`, 0)
	a.wantMetric(t, `redrive_records{exhaustion="dead_letter",queue="orders",state="discarded"}`, 3)
	a.wantMetric(t, `redrive_dead_letter_error_types{error_type="db.timeout",queue="orders"}`, 3)
	a.wantMetric(t, `redrive_dead_letter_error_types{error_type="smtp.down",queue="billing"}`, 1)
	// The consumer group's lag on the DLQ topic (kadm) reaches 0 once ingest commits.
	eventually.Nil(t, "the consumer lag to reach 0", func() error {
		if lag := a.metric(t, `redrive_consumer_lag{topic="dead_letter_queue"}`); lag != 0 {
			mustOK(t, a.app.Gauges().RunOnce(context.Background()))
			return fmt.Errorf("it is %v", lag)
		}
		return nil
	}, eventually.Within(15*time.Second))
	// Five records, and two incidents opened: db.timeout and smtp.down.
	byType := map[string]int{}
	for _, e := range collect(t, all, 7) {
		typ, _, _ := strings.Cut(e, " ")
		byType[typ]++
	}
	if byType["dead_letter.added"] != 5 || byType["incident.opened"] != 2 {
		t.Errorf("events %v, want 5 dead_letter.added and 2 incident.opened", byType)
	}
	if got := collect(t, billingOnly, 2); !strings.HasPrefix(got[0], "dead_letter.added") {
		t.Errorf("billing stream %v", got)
	}

	// 2. A replay rule through the API replays the invoice.retry one after its delay.
	status, body := a.do(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules",
		`{"name":"invoices","filter":{"queue":"billing","type":"invoice.retry"},"delay":"PT1H","max_replays":1}`)
	if status != http.StatusCreated {
		t.Fatalf("create rule: %d %s", status, body)
	}
	status, body = a.do(t, http.MethodGet, "/ojs/v1/dead-letter/replay-rules", "")
	if status != http.StatusOK || !bytes.Contains(body, []byte(`"name":"invoices"`)) || !bytes.Contains(body, []byte(`"name":"policy-timeouts","filter":{"error_type":"db.never"}`)) {
		t.Errorf("list rules: %d %s", status, body)
	}
	if status, body := a.do(t, http.MethodPut, "/ojs/v1/dead-letter/replay-rules/policy-timeouts", `{"filter":{},"delay":"PT1M","max_replays":1}`); status != http.StatusConflict {
		t.Errorf("changing a policy-file rule: %d %s", status, body)
	}
	if status, body := a.do(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", `{"name":"x","filter":{"colour":"red"},"delay":"PT1H","max_replays":1}`); status != http.StatusBadRequest ||
		!bytes.Contains(body, []byte("filter.colour")) {
		t.Errorf("bad filter: %d %s", status, body)
	}
	if status, body := a.do(t, http.MethodPut, "/ojs/v1/dead-letter/replay-rules/paused-rule",
		`{"filter":{"queue":"billing"},"delay":"PT1M","max_replays":2,"enabled":false,"rate_limit":2,"window":{"start":"02:00","end":"04:00","time_zone":"Europe/Berlin"}}`); status != http.StatusCreated ||
		!bytes.Contains(body, []byte(`"window":{"start":"02:00","end":"04:00","time_zone":"Europe/Berlin"}`)) {
		t.Errorf("put rule: %d %s", status, body)
	}
	if status, body := a.do(t, http.MethodGet, "/ojs/v1/dead-letter/replay-rules/paused-rule", ""); status != http.StatusOK ||
		!bytes.Contains(body, []byte(`"enabled":false`)) || !bytes.Contains(body, []byte(`"delay":"PT1M"`)) {
		t.Errorf("get rule: %d %s", status, body)
	}
	if status, body := a.do(t, http.MethodDelete, "/ojs/v1/dead-letter/replay-rules/paused-rule", ""); status != http.StatusOK {
		t.Errorf("delete rule: %d %s", status, body)
	}
	if status, _ := a.do(t, http.MethodGet, "/ojs/v1/dead-letter/replay-rules/paused-rule", ""); status != http.StatusNotFound {
		t.Errorf("deleted rule: %d", status)
	}
	if status, body := a.do(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", `{"name":"invoices","filter":{},"delay":"PT1H","max_replays":1}`); status != http.StatusConflict {
		t.Errorf("duplicate rule: %d %s", status, body)
	}
	if status, body := a.do(t, http.MethodPost, "/ojs/v1/dead-letter/replay-rules", `{"name":"w","filter":{},"delay":"PT1H","max_replays":1,"window":{"start":"2am","end":"04:00"}}`); status != http.StatusBadRequest ||
		!bytes.Contains(body, []byte("window.start")) {
		t.Errorf("bad window: %d %s", status, body)
	}
	// Rule changes trigger passes of the app's own; whichever pass comes after
	// the clock moves does the replay.
	clk.Advance(2 * time.Hour)
	runReplay(t, a)
	// Replayed, it is redelivered, and its redelivery completes it
	// (completion: redelivered).
	replayed := recordIDs(t, a, "queue=billing&type=invoice.retry&state=completed", 1)[0]
	mustOK(t, a.app.Gauges().RunOnce(context.Background()))
	a.wantMetric(t, `ojs_dead_letter_replayed_total{queue="billing",rule="invoices"}`, 1)
	a.wantMetric(t, `ojs_dead_letter_total{queue="billing"}`, 1)
	a.wantMetric(t, `redrive_dead_letter_oldest_age_seconds{queue="orders"}`, 7200)
	if got := collect(t, all, 1)[0]; got != "dead_letter.replayed "+replayed {
		t.Errorf("event %q", got)
	}
	if got := collect(t, billingOnly, 1)[0]; got != "dead_letter.replayed "+replayed {
		t.Errorf("billing stream event %q", got)
	}

	// Woken by the replay, the scheduler redelivers the record at once.
	eventually.True(t, "the replayed record redelivered", func() bool {
		return a.metric(t, `redrive_redelivered_total{queue="billing"}`) >= 1
	}, eventually.Within(15*time.Second))
	if v := a.metric(t, `redrive_kafka_connects_total{client="redeliver",node_id="0"}`); v < 1 {
		t.Errorf("kprom connects for client redeliver = %v", v)
	}

	// 3. A restart: a fresh replica on the same database reports the same sizes.
	stopA()
	b, _ := startApp(t, dbURL, brokers, policies, clk)
	mustOK(t, b.app.Gauges().RunOnce(context.Background()))
	b.wantMetric(t, `ojs_dead_letter_total{queue="orders"}`, 3)
	b.wantMetric(t, `ojs_dead_letter_total{queue="billing"}`, 1)
	all = b.sse(t, "/ojs/v1/events")

	// 4. An operator purges billing's dead letters (a bulk task): its size drops to 0.
	other := billing[0]
	if other == replayed {
		other = billing[1]
	}
	status, body = b.do(t, http.MethodDelete, "/ojs/v1/dead-letter", `{"filter":{"queue":"billing","state":"discarded"},"confirm":true}`)
	var purge struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if err := json.Unmarshal(body, &purge); status != http.StatusAccepted || err != nil {
		t.Fatalf("purge: %d %s", status, body)
	}
	eventually.Nil(t, "the purge task to complete", func() error {
		var task struct {
			State string `json:"state"`
		}
		_, body := b.do(t, http.MethodGet, "/ojs/v1/tasks/"+purge.Task.ID, "")
		_ = json.Unmarshal(body, &task)
		if task.State != "completed" {
			return fmt.Errorf("the task: %s", body)
		}
		return nil
	}, eventually.Within(15*time.Second))
	// and retries one of orders' (the API announces it; the app counts it).
	retried := recordIDs(t, b, "queue=orders&state=discarded", 3)[0]
	if status, body := b.do(t, http.MethodPost, "/ojs/v1/dead-letter/"+retried+"/retry", ""); status != http.StatusOK {
		t.Fatalf("retry: %d %s", status, body)
	}
	mustOK(t, b.app.Gauges().RunOnce(context.Background()))
	b.wantMetric(t, `ojs_dead_letter_total{queue="billing"}`, 0)
	b.wantMetric(t, `ojs_dead_letter_total{queue="orders"}`, 2)
	b.wantMetric(t, `ojs_dead_letter_retried_total{queue="orders"}`, 1)
	if got := collect(t, all, 2); got[0] != "dead_letter.deleted "+other || got[1] != "dead_letter.retried "+retried {
		t.Errorf("events %q", got)
	}
	b.wantMetric(t, `redrive_dead_letter_error_types{error_type="smtp.down",queue="billing"}`, 0)

	// 5. 181 days later the pruner archives and removes orders' dead letters,
	// and the replayed billing record its redelivery completed (past
	// retention.completed).
	// The pass this replica's pruner makes at start must be over first, or it
	// could run after the clock moved and leave RunOnce nothing to prune.
	b.wantMetric(t, `redrive_pruner_runs_total{result="ok"}`, 1)
	clk.Advance(181 * 24 * time.Hour)
	pres := runPrune(t, b)
	if pres.Total() != 3 || !slices.Contains(pres.Pruned, maintenance.PruneCount{Queue: "billing", Reason: maintenance.ReasonRetentionCompleted,
		State: dlq.StateCompleted, Count: 1}) {
		t.Fatalf("pruned %+v", pres.Pruned)
	}
	mustOK(t, b.app.Gauges().RunOnce(context.Background()))
	b.wantMetric(t, `ojs_dead_letter_total{queue="orders"}`, 0)
	b.wantMetric(t, `ojs_dead_letter_pruned_total{queue="orders"}`, 2)
	b.wantMetric(t, `redrive_pruned_records_total{queue="orders",reason="max_age",state="discarded"}`, 2)
	b.wantMetric(t, `redrive_pruner_runs_total{result="ok"}`, 2) // at start, and this one
	b.wantMetric(t, `redrive_dead_letter_oldest_age_seconds{queue="orders"}`, 0)
	if got := collect(t, all, 2); !slices.Contains(got, "dead_letter.pruned orders") || !slices.Contains(got, "dead_letter.pruned billing") {
		t.Errorf("events %q", got)
	}
	// Both pruned records are on the archive topic: the archiver copied them
	// when they were discarded, and the pruner waited for that copy.
	pruned := map[string]bool{}
	for _, id := range orderIDs {
		if id != retried {
			pruned[id] = false
		}
	}
	archive := kafkatest.Client(t, brokers, kgo.ConsumeTopics(dlqTopic+".archive"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	for found := 0; found < len(pruned); {
		fs := archive.PollFetches(actx)
		if actx.Err() != nil {
			t.Fatalf("pruned records on the archive topic: %v", pruned)
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if seen, ok := pruned[string(h.Value)]; h.Key == envelope.HeaderID && ok && !seen {
					pruned[string(h.Value)] = true
					found++
				}
			}
		})
	}
	var next struct {
		Retention struct {
			NextPruneAt *time.Time `json:"next_prune_at"`
		} `json:"retention"`
	}
	_, body = b.do(t, http.MethodGet, "/ojs/v1/dead-letter/stats", "")
	if err := json.Unmarshal(body, &next); err != nil || next.Retention.NextPruneAt == nil {
		t.Errorf("stats next_prune_at: %s", body)
	}

	// The events topic got every event the scenario caused, from both replicas.
	got := kafkatest.Consume(t, brokers, eventsTopic, 5+1+1+1+1, 10*time.Second)
	counts := map[string]int{}
	for _, r := range got {
		var ev struct {
			SpecVersion string `json:"specversion"`
			Type        string `json:"type"`
			Source      string `json:"source"`
		}
		_ = json.Unmarshal(r.Value, &ev)
		if ev.SpecVersion != "1.0" || ev.Source != "redrive" {
			t.Errorf("event %s", r.Value)
		}
		counts[ev.Type]++
	}
	if want := fmt.Sprint(map[string]int{"dead_letter.added": 5, "dead_letter.deleted": 1, "dead_letter.pruned": 2,
		"dead_letter.replayed": 1, "dead_letter.retried": 1, "incident.opened": 2}); fmt.Sprint(counts) != want {
		t.Errorf("events topic: %v, want %v", counts, want)
	}
	// kprom client metrics are exported for every client.
	for _, client := range []string{"ingest", "events"} {
		if v := b.metric(t, `redrive_kafka_connects_total{client="`+client+`",node_id="0"}`); v < 1 {
			_, body := b.do(t, http.MethodGet, "/metrics", "")
			var lines []string
			for _, l := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(l, "redrive_kafka_connects_total") {
					lines = append(lines, l)
				}
			}
			t.Errorf("kprom connects for client %s = %v; %v", client, v, lines)
		}
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runReplay runs a replay pass, waiting out a pass the app runs itself (a
// rule change triggers one).
func runReplay(t *testing.T, m *mApp) *maintenance.ReplayResult {
	t.Helper()
	var res *maintenance.ReplayResult
	eventually.True(t, "the replay lock", func() bool {
		var err error
		res, err = m.app.Replayer().RunOnce(context.Background())
		mustOK(t, err)
		return res.Leader
	}, eventually.Within(5*time.Second))
	return res
}

func runPrune(t *testing.T, m *mApp) *maintenance.PruneResult {
	t.Helper()
	var res *maintenance.PruneResult
	eventually.True(t, "the pruner lock", func() bool {
		var err error
		res, err = m.app.Pruner().RunOnce(context.Background())
		mustOK(t, err)
		return res.Leader
	}, eventually.Within(5*time.Second))
	return res
}
