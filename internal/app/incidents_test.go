package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
)

// Failures whose messages differ only in ids, numbers and hosts group into
// one incident each; the list counts them; a bulk retry by incident dry-runs
// and then retries exactly that incident's records.
func TestIncidentsGroupFailuresAndRetryByIncident(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders", "billing", dlqTopic+".events", dlqTopic+".archive")
	policies := policyDir(t, "_default:\n  retry: {max_attempts: 1}\n")
	clk := clock.NewPinned(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) // the test moves it; the app keeps running
	a, _ := startApp(t, pgtest.URL(t), brokers, policies, clk)

	fail := func(queue, errType, msg string, i int) *kgo.Record {
		src := &kgo.Record{Topic: queue, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)}
		return envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: errType, Message: msg, FailedAt: clk.Now()})
	}
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs,
			fail("orders", "db.down", fmt.Sprintf("dial tcp 10.0.%d.5:%d: connect: connection refused", i, 5432+i), i),
			fail("orders", "order.missing", fmt.Sprintf("order %s not found", uuid.NewString()), 100+i),
			fail("billing", "http.timeout", fmt.Sprintf(`Get "https://pay-%d.example.com/v1/charges/%d": context deadline exceeded`, i, 9000+i), 200+i))
	}
	recs = append(recs, fail("billing", "db.down", "dial tcp 10.9.9.9:6432: connect: connection refused", 300))
	kafkatest.Produce(t, kafkatest.Client(t, brokers), recs...)
	recordIDs(t, a, "state=discarded&limit=100", len(recs))

	type incident struct {
		ID        string         `json:"id"`
		ErrorType string         `json:"error_type"`
		Signature string         `json:"signature"`
		Count     int            `json:"count"`
		Queues    []string       `json:"queues"`
		States    map[string]int `json:"states"`
	}
	var list struct{ Items []incident }
	status, body := a.do(t, http.MethodGet, "/ojs/v1/incidents", "")
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
		t.Fatalf("GET /incidents: %d %s", status, body)
	}
	got := map[string]incident{}
	for _, in := range list.Items {
		got[in.ErrorType] = in
	}
	if len(list.Items) != 3 || got["db.down"].Count != 7 || got["order.missing"].Count != 6 || got["http.timeout"].Count != 6 {
		t.Fatalf("incidents: %s", body)
	}
	db := got["db.down"]
	if db.Signature != "dial tcp <ip>:<port>: connect: connection refused" || fmt.Sprint(db.Queues) != "[billing orders]" ||
		db.States["discarded"] != 7 || list.Items[0].ID != db.ID {
		t.Errorf("db.down incident (first: most records): %+v", db)
	}
	if status, body := a.do(t, http.MethodGet, "/ojs/v1/incidents?queue=billing&sort=last_seen", ""); status != http.StatusOK ||
		bytes.Count(body, []byte(`"error_type"`)) != 2 {
		t.Errorf("billing incidents: %d %s", status, body)
	}
	status, body = a.do(t, http.MethodGet, "/ojs/v1/incidents/"+db.ID, "")
	var one incident
	if err := json.Unmarshal(body, &one); status != http.StatusOK || err != nil || one.Count != 7 {
		t.Errorf("GET /incidents/{id}: %d %s", status, body)
	}
	if status, _ := a.do(t, http.MethodGet, "/ojs/v1/incidents/ffffffffffffffff", ""); status != http.StatusNotFound {
		t.Errorf("unknown incident: %d, want 404", status)
	}
	if status, body := a.do(t, http.MethodGet, "/ojs/v1/incidents/not-hex", ""); status != http.StatusBadRequest {
		t.Errorf("malformed incident id: %d %s, want 400", status, body)
	}
	dbIDs := recordIDs(t, a, "incident="+db.ID+"&limit=100", 7)

	// The bulk retry by incident: the dry run counts exactly it, then it retries exactly it.
	filter := `{"filter":{"incident":"` + db.ID + `"}`
	status, body = a.do(t, http.MethodPost, "/ojs/v1/dead-letter/retry", filter+`}`)
	if status != http.StatusOK || !bytes.Contains(body, []byte(`"would_affect":7`)) {
		t.Fatalf("dry run: %d %s", status, body)
	}
	if status, body = a.do(t, http.MethodPost, "/ojs/v1/dead-letter/retry", filter+`,"confirm":true}`); status != http.StatusAccepted {
		t.Fatalf("bulk retry: %d %s", status, body)
	}
	retried := recordIDs(t, a, "state=available&limit=100", 7)
	if fmt.Sprint(slices.Sorted(slices.Values(retried))) != fmt.Sprint(slices.Sorted(slices.Values(dbIDs))) {
		t.Errorf("retried %v, want the incident's %v", retried, dbIDs)
	}
	recordIDs(t, a, "state=discarded&limit=100", len(recs)-7)
	mustOK(t, a.app.Gauges().RunOnce(t.Context()))
	a.wantMetric(t, `redrive_incidents{queue="orders"}`, 2)
	a.wantMetric(t, `redrive_incidents{queue="billing"}`, 2)
}

// Panics with one message at two code sites are two incidents, told apart
// by their frames (in the API); the same site's panics — other goroutines,
// argument values and line numbers — are one.
func TestIncidentsOfOneMessageShowTheirFrames(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders", dlqTopic+".events", dlqTopic+".archive")
	policies := policyDir(t, "_default:\n  retry: {max_attempts: 1}\n")
	clk := clock.NewPinned(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) // the test moves it; the app keeps running
	a, _ := startApp(t, pgtest.URL(t), brokers, policies, clk)
	stack := func(goroutine int, site string, line int, arg string) []string {
		return []string{
			fmt.Sprintf("goroutine %d [running]:", goroutine),
			"main." + site + "(" + arg + ")",
			fmt.Sprintf("\t/app/%s.go:%d +0x1d", site, line),
			"main.handle({0x5d4a40, 0xc0001a2000})",
			"\t/app/main.go:10 +0x2a",
		}
	}
	var recs []*kgo.Record
	for i, bt := range [][]string{
		stack(7, "charge", 42, "0xc000012345, 0x1"), stack(19, "charge", 57, "0xc0000a6000, 0x3"),
		stack(7, "refund", 42, "0xc000012345, 0x1"),
	} {
		src := &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)}
		recs = append(recs, envelope.Encode(src, envelope.FailureInfo{DLQTopic: dlqTopic, ErrorType: "panic",
			Message: "runtime error: invalid memory address or nil pointer dereference", Backtrace: bt, FailedAt: clk.Now()}))
	}
	kafkatest.Produce(t, kafkatest.Client(t, brokers), recs...)
	recordIDs(t, a, "state=discarded&limit=100", len(recs))

	want := []string{
		`2 runtime error: invalid memory address or nil pointer dereference ["main.charge(...)" "/app/charge.go" "main.handle(...)"]`,
		`1 runtime error: invalid memory address or nil pointer dereference ["main.refund(...)" "/app/refund.go" "main.handle(...)"]`,
	}
	// Ingest notes a batch's incidents just after its records are committed:
	// the incidents may trail the records by a moment.
	eventually.Nil(t, "the incidents of the three failures", func() error {
		var list struct {
			Items []struct {
				Signature string   `json:"signature"`
				Count     int      `json:"count"`
				Frames    []string `json:"frames"`
			}
		}
		status, body := a.do(t, http.MethodGet, "/ojs/v1/incidents", "")
		if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
			t.Fatalf("GET /incidents: %d %s", status, body)
		}
		var got []string
		for _, in := range list.Items {
			got = append(got, fmt.Sprintf("%d %s %q", in.Count, in.Signature, in.Frames))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("incidents:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return nil
	})
}
