package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/testdate"
)

// Declared queues always get their own label (up to the limit); others get
// one when first seen while fewer than the limit have one; the rest are
// "other". Types keep their name only when a policy file declares them.
func TestLabels(t *testing.T) {
	t.Parallel()
	l := metrics.NewLabels(3)
	declared := map[string]bool{"payments": true, "billing": true, "d1": true, "d2": true}
	l.SetDeclared(metrics.Declared{Queue: func(q string) bool { return declared[q] }, Type: func(t string) bool { return t == "order.refund" }})
	got := func(qs ...string) string {
		var out []string
		for _, q := range qs {
			out = append(out, l.Queue(q))
		}
		return strings.Join(out, ",")
	}
	if g := got("a", "b", "c", "d", "a"); g != "a,b,c,other,a" {
		t.Errorf("first seen: %s", g)
	}
	// Declared after the limit was reached: labelled anyway, up to the limit.
	if g := got("payments", "billing", "d1", "d2", "payments", "e"); g != "payments,billing,d1,other,payments,other" {
		t.Errorf("declared: %s", g)
	}
	for typ, want := range map[string]string{"order.refund": "order.refund", "order.created": "other", "": ""} {
		if g := l.Type(typ); g != want {
			t.Errorf("Type(%q) = %q, want %q", typ, g, want)
		}
	}
	for i := range metrics.MaxRules + 5 {
		r := fmt.Sprintf("rule-%d", i)
		want := r
		if i >= metrics.MaxRules {
			want = "other"
		}
		if g := l.Rule(r); g != want {
			t.Fatalf("Rule(%q) = %q, want %q", r, g, want)
		}
	}
}

// seriesOf counts the series of a scrape, by metric family.
func seriesOf(out string) (total int, byFamily map[string]int) {
	byFamily = map[string]int{}
	for l := range strings.SplitSeq(out, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		byFamily[name]++
		total++
	}
	return total, byFamily
}

// Producer data cannot choose metric labels: after 50,000 distinct record
// types and 20,000 source topics go through every recording function of
// ingest, the scheduler, the archiver, the pruner, the replayer, the API and
// the gauges read from Postgres, /metrics holds a bounded number of series.
func TestCardinalityIsBoundedWhateverProducersSend(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	const topics, types = 20_000, 50_000
	queue := func(i int) string { return fmt.Sprintf("topic-%05d", i%topics) }
	depth := map[string]metrics.QueueDepth{}
	var counts []metrics.RecordCount
	incidents := map[string]int64{}
	now := testdate.Now()
	for i := range max(topics, types) {
		q, typ := queue(i), fmt.Sprintf("type-%05d", i)
		// ingest
		m.IngestRecords.WithLabelValues("dead_letter_queue", "redrive").Inc()
		m.DeadLetter.Added(q, typ, 1)
		m.IngestDuplicates.WithLabelValues("dead_letter_queue").Inc()
		m.Redelivery.Completed.WithLabelValues(q).Inc()
		m.Redelivery.Joined.WithLabelValues(q).Inc()
		// scheduler and archiver
		m.Redelivery.Redelivered.WithLabelValues(q).Inc()
		m.Redelivery.Failures.WithLabelValues(q, "unknown_topic").Inc()
		m.Redelivery.Rescued.WithLabelValues(q).Inc()
		m.Redelivery.Archived.WithLabelValues(q).Inc()
		m.Redelivery.ArchiveFailures.WithLabelValues(q, "broker").Inc()
		// pruner, replayer, API
		m.DeadLetter.PrunedTotal.WithLabelValues(q).Inc()
		m.DeadLetter.RecordsPruned.WithLabelValues(q, "discarded", "max_age").Inc()
		m.DeadLetter.ReplayedTotal.WithLabelValues(q, fmt.Sprintf("rule-%d", i%1000)).Inc()
		m.DeadLetter.Retried(q, 1)
		// gauges read from Postgres
		depth[q] = metrics.QueueDepth{Count: int64(i%7 + 1), Oldest: now.Add(-time.Duration(i) * time.Second)}
		counts = append(counts, metrics.RecordCount{Queue: q, State: "discarded", Exhaustion: "dead_letter", ErrorType: fmt.Sprintf("err-%d", i), N: 1})
		incidents[q]++
	}
	m.DeadLetter.SetDepth(depth)
	m.DeadLetter.SetRecordCounts(counts)
	m.DeadLetter.SetIncidents(incidents)
	m.DeadLetter.SetRedeliveryDue(incidents)
	for i := range 1000 {
		m.DeadLetter.ConsumerLag.WithLabelValues(fmt.Sprintf("dlq-%d", i)).Set(1)
	}

	out := scrape(t, m.Registry)
	total, byFamily := seriesOf(out)
	t.Logf("%d series, %d bytes of /metrics after %d types and %d topics", total, len(out), types, topics)
	// Per family, at most: every queue label (300 + "other") times the other
	// labels' values; error types: 20 largest + "other" per queue label.
	queues := metrics.DefaultMaxQueues + 1
	for family, limit := range map[string]int{
		"ojs_dead_letter_added_total":            queues * 2, // "" or "other" types: none is declared
		"ojs_dead_letter_total":                  queues,
		"ojs_dead_letter_replayed_total":         queues * (metrics.MaxRules + 1),
		"redrive_redelivered_total":              queues,
		"redrive_dead_letter_error_types":        queues * (metrics.MaxErrorTypesPerQueue + 1),
		"redrive_consumer_lag":                   metrics.MaxTopics + 1,
		"redrive_incidents":                      queues,
		"redrive_redelivery_due":                 queues,
		"redrive_records":                        queues,
		"redrive_dead_letter_oldest_age_seconds": queues,
	} {
		if byFamily[family] > limit {
			t.Errorf("%s has %d series, more than %d", family, byFamily[family], limit)
		}
	}
	if total > 10_000 || len(out) > 1<<20 {
		t.Errorf("/metrics holds %d series in %d bytes", total, len(out))
	}
	for _, want := range []string{`ojs_dead_letter_added_total{queue="other",type="other"}`, `ojs_dead_letter_total{queue="other"}`,
		`ojs_dead_letter_added_total{queue="topic-00000",type="other"} 3`} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(out, `type="type-`) {
		t.Error("a record type has its own label")
	}
}

// The Kafka client metrics are labelled by client and broker, never by
// topic: the scheduler produces to whatever source topics records name.
func TestKafkaClientMetricsHaveNoTopicLabel(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("source-%d", i))
	}
	brokers := kafkatest.New(t, names...)
	reg := prometheus.NewRegistry()
	cl := kafkatest.Client(t, brokers, metrics.KafkaClientOpts(reg, "redeliver"))
	var recs []*kgo.Record
	for _, n := range names {
		recs = append(recs, &kgo.Record{Topic: n, Value: []byte("v")})
	}
	kafkatest.Produce(t, cl, recs...)
	var out string
	eventually.True(t, "the produce series", func() bool {
		out = scrape(t, reg)
		return strings.Contains(out, "redrive_kafka_produce_records_total")
	}, eventually.Within(10*time.Second))
	if !strings.Contains(out, `redrive_kafka_produce_records_total{client="redeliver",node_id="`) {
		t.Fatalf("no produce records by node:\n%s", out)
	}
	if strings.Contains(out, `topic="`) {
		t.Errorf("a Kafka client series is labelled by topic:\n%s", grepLines(out, `topic="`))
	}
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
