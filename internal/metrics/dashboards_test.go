package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/testdate"
)

const (
	dashboardFile = "../../deploy/grafana/redrive-dlq.json"
	alertsFile    = "../../deploy/prometheus/redrive-alerts.yaml"
	kedaFile      = "../../deploy/kubernetes/components/keda/scaledobject.yaml"
)

// exported builds the registry the app builds (metrics.New plus kprom on a
// real client), touches every vector so that it has series, and returns every
// metric family name a scrape shows.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.IngestRecords.WithLabelValues("dlq", "redrive").Inc()
	m.IngestDuplicates.WithLabelValues("dlq").Inc()
	r := m.Redelivery
	r.Redelivered.WithLabelValues("q").Inc()
	r.Failures.WithLabelValues("q", "broker").Inc()
	r.Rescued.WithLabelValues("q").Inc()
	r.ArchiveFailures.WithLabelValues("q", "broker").Inc()
	r.Archived.WithLabelValues("q").Inc()
	r.Joined.WithLabelValues("q").Inc()
	r.Completed.WithLabelValues("q").Inc()
	r.Unacknowledged.WithLabelValues("q").Inc()
	d := m.DeadLetter
	d.Added("q", "t", 1)
	d.Retried("q", 1)
	d.PrunedTotal.WithLabelValues("q").Inc()
	d.ReplayedTotal.WithLabelValues("q", "rule").Inc()
	d.RecordsPruned.WithLabelValues("q", "discarded", "max_age").Inc()
	d.ConsumerLag.WithLabelValues("dlq").Set(1)
	d.SetDepth(map[string]metrics.QueueDepth{"q": {Count: 1, Oldest: testdate.Now()}})
	d.SetRecordCounts([]metrics.RecordCount{{Queue: "q", State: "discarded", Exhaustion: "dead_letter", ErrorType: "e", N: 1}})
	d.SetRedeliveryDue(map[string]int64{"q": 1})
	m.Events.Published.WithLabelValues("dead_letter.added").Inc()

	brokers := kafkatest.New(t, "t")
	cl := kafkatest.Client(t, brokers, metrics.KafkaClientOpts(m.Registry, "ingest"), kgo.ConsumeTopics("t"))
	kafkatest.Produce(t, cl, &kgo.Record{Topic: "t", Value: []byte("v")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(cl.PollFetches(ctx).Records()) == 0 && ctx.Err() == nil {
	}

	// kprom counts a produced batch in a hook that may run after ProduceSync
	// returns: wait for the client series to show up.
	var mfs []*dto.MetricFamily
	eventually.True(t, "the client series", func() bool {
		var err error
		if mfs, err = m.Registry.Gather(); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "redrive_kafka_produce_records_total" }) ||
			ctx.Err() != nil
	})
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	return names
}

var (
	strLit    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces    = regexp.MustCompile(`\{[^}]*\}`)
	brackets  = regexp.MustCompile(`\[[^\]]*\]`)
	grouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	functions = regexp.MustCompile(`^[a-z_]+$`)
)

// keywords are PromQL words that are not metric names.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}

// metricNames extracts the metric names a PromQL expression selects.
func metricNames(expr string) []string {
	e := strLit.ReplaceAllString(expr, `""`)
	e = braces.ReplaceAllString(e, " ")
	e = brackets.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range ident.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") && functions.MatchString(name) {
			continue // a function or aggregation
		}
		if keywords[name] || (loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.')) {
			continue // a keyword, or a unit suffix of a number/duration
		}
		out = append(out, name)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	got := metricNames(`sum by (queue) (rate(ojs_dead_letter_added_total{queue=~"$queue"}[5m])) / clamp_min(sum(x_total offset 1h), 1) > 7 * 86400 and on (queue) up`)
	want := []string{"ojs_dead_letter_added_total", "x_total", "up"}
	if !slices.Equal(got, want) {
		t.Errorf("metricNames = %v, want %v", got, want)
	}
}

func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			exprs[p.Title+"#"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if m := regexp.MustCompile(`label_values\((\w+)`).FindStringSubmatch(v.Definition); m != nil {
			exprs["variable "+v.Name] = m[1]
		}
	}
	return exprs
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// kedaQueries are the PromQL queries of the KEDA ScaledObject's Prometheus
// triggers, by trigger index.
func kedaQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(kedaFile)
	if err != nil {
		t.Fatal(err)
	}
	var so struct {
		Spec struct {
			Triggers []struct {
				Type     string            `yaml:"type"`
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &so); err != nil {
		t.Fatalf("%s: %v", kedaFile, err)
	}
	out := map[string]string{}
	for i, tr := range so.Spec.Triggers {
		if tr.Type == "prometheus" {
			out[fmt.Sprint(i)] = tr.Metadata["query"]
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no prometheus trigger", kedaFile)
	}
	return out
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// Every metric a dashboard panel or an alert rule uses must be one Redrive
// exports: a renamed metric would otherwise silently blank a panel or
// disarm an alert.
func TestDashboardsAndAlertsUseExportedMetrics(t *testing.T) {
	t.Parallel()
	names := exported(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		ms := metricNames(expr)
		if len(ms) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, m := range ms {
			used[m] = true
			if !names[m] {
				t.Errorf("%s uses %s, which Redrive does not export (expr %q)", where, m, expr)
			}
		}
	}
	for where, expr := range dashboardExprs(t) {
		check("dashboard "+where, expr)
	}
	for where, expr := range kedaQueries(t) {
		check("KEDA trigger "+where, expr)
	}
	rules := alertRules(t)
	if len(rules) < 6 {
		t.Fatalf("%d alert rules", len(rules))
	}
	for _, r := range rules {
		check("alert "+r.Alert, r.Expr)
		if r.Annotations["runbook"] == "" || !strings.Contains(r.Annotations["runbook_url"], "docs/operations.md#") || r.Annotations["summary"] == "" {
			t.Errorf("alert %s lacks summary, runbook or runbook_url", r.Alert)
		}
		if r.Labels["severity"] == "" || r.For == "" {
			t.Errorf("alert %s lacks severity or for", r.Alert)
		}
	}
	// The OJS dead-letter metrics (spec §11.2) all appear on the dashboard or in a rule.
	for _, m := range []string{"ojs_dead_letter_total", "ojs_dead_letter_added_total", "ojs_dead_letter_retried_total",
		"ojs_dead_letter_pruned_total", "ojs_dead_letter_replayed_total", "redrive_consumer_lag", "redrive_dead_letter_oldest_age_seconds"} {
		if !used[m] {
			t.Errorf("%s is not on the dashboard nor in an alert", m)
		}
	}
}

// The runbook anchors the alerts link to exist in docs/operations.md.
func TestAlertRunbooksExist(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			a := strings.ToLower(strings.TrimSpace(h))
			a = regexp.MustCompile(`[^a-z0-9 -]`).ReplaceAllString(a, "")
			anchors[strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	for _, r := range alertRules(t) {
		_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#")
		if !anchors[anchor] {
			t.Errorf("alert %s links to #%s, which docs/operations.md lacks", r.Alert, anchor)
		}
	}
}
