package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// Through the real ingest path, producers cannot choose metric labels: past
// REDRIVE_METRICS_MAX_QUEUES queues every other one is reported as "other",
// a queue a policy file declares keeps its label even when it comes last,
// and record types keep their name only when a policy file declares them;
// strict_queues turning away the records of 200 undeclared topics counts
// them under the same bounded queue labels.
func TestMetricLabelsAreBoundedThroughIngest(t *testing.T) {
	t.Parallel()
	dir := policyDir(t, `_default: {strict_queues: true}
topics:
  payments:
    retry: {max_attempts: 1, on_exhaustion: dead_letter}
  "orders.*":
    types:
      order.refund: {retry: {max_attempts: 1}}
`)
	b := start(t, kafkatest.New(t, dlqTopic, dlqTopic+".archive", dlqTopic+".events"), nil,
		"REDRIVE_POLICIES_DIR", dir, "REDRIVE_METRICS_MAX_QUEUES", "20")
	// 200 source topics and 250 record types nobody declared, then the
	// declared queue and type.
	var recs []*kgo.Record
	add := func(queue, typ string, i int) {
		recs = append(recs, &kgo.Record{Topic: dlqTopic, Value: []byte(`{"n":1}`), Headers: []kgo.RecordHeader{
			{Key: "redrive.source.topic", Value: []byte(queue)}, {Key: "redrive.type", Value: []byte(typ)},
			{Key: "redrive.error.type", Value: []byte(fmt.Sprintf("error-%d", i))}, {Key: "redrive.error.message", Value: []byte("boom")}}})
	}
	for i := range 250 {
		add(fmt.Sprintf("q-%03d", i%200), fmt.Sprintf("type-%d", i), i)
	}
	for i := range 5 {
		add("orders.eu", "order.refund", i)
		add("payments", "payment.failed", i)
	}
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), recs...)

	var out string
	eventually.Nil(t, "every record ingested", func() error {
		if out = scrapeMetrics(t, b.base); sumOf(out, "redrive_ingest_records_total") != float64(len(recs)) {
			return fmt.Errorf("the metrics say:\n%s", out)
		}
		return nil
	})
	if err := b.app.Gauges().RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	out = scrapeMetrics(t, b.base)

	queues := labelValues(out, "queue")
	if len(queues) > 22 || !queues["payments"] || !queues["other"] {
		t.Errorf("%d queue label values %v; want at most 20 first seen, payments (declared) and other", len(queues), queues)
	}
	types := labelValues(grepLines(out, "ojs_dead_letter_added_total{"), "type")
	if len(types) != 2 || !types["order.refund"] || !types["other"] {
		t.Errorf("type label values %v, want order.refund (declared) and other", types)
	}
	for _, want := range []string{`ojs_dead_letter_added_total{queue="payments",type="other"} 5`, `ojs_dead_letter_total{queue="payments"} 5`} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(out, "payments"))
		}
	}
	if v := sumOf(out, "ojs_dead_letter_added_total"); v != float64(len(recs)) {
		t.Errorf("ojs_dead_letter_added_total sums to %v, want %d: nothing is lost by bounding", v, len(recs))
	}
	if v := sumOf(out, "redrive_ingest_turned_away_total"); v != 250 {
		t.Errorf("redrive_ingest_turned_away_total sums to %v, want 250 (the records of the undeclared topics)", v)
	}
	if strings.Contains(out, `topic="q-`) {
		t.Errorf("a series is labelled by a source topic:\n%s", grepLines(out, `topic="q-`))
	}
}

func scrapeMetrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// sumOf sums every series of a metric family.
func sumOf(out, family string) float64 {
	var sum float64
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, family+"{") || strings.HasPrefix(l, family+" ") {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// labelValues collects the values a label takes across the scrape.
func labelValues(out, label string) map[string]bool {
	vs := map[string]bool{}
	for _, m := range regexp.MustCompile(`[{,]`+label+`="([^"]*)"`).FindAllStringSubmatch(out, -1) {
		vs[m[1]] = true
	}
	return vs
}

func grepLines(s, substr string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
