package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/redrive/redrive/internal/metrics"
)

// family gathers reg and returns the family name, or nil.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// labelsOf is a series' labels.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// The metric names of ojs-observability §8, as Prometheus writes the OTel
// names (ojs.job.enqueued is ojs_job_enqueued_total), with their types and
// labels, and the recommended buckets of §8.2.
func TestOJSJobMetricNamesTypesAndBuckets(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	o := metrics.NewOJS(reg, nil)
	o.JobEnqueued("email", "email.send")
	o.JobCompleted("email", "email.send")
	o.JobFailed("email", "email.send")
	o.JobRetried("email", "email.send")
	o.JobCancelled("email", "email.send")
	o.AttemptEnded("email", "email.send", "completed", 750*time.Millisecond)
	o.JobStarted("email", "email.send", 2*time.Second)
	o.SetDepthSource(func(context.Context) (map[string]map[string]int64, error) {
		return map[string]map[string]int64{"email": {"available": 42, "active": 8, "scheduled": 15}}, nil
	}, nil)

	want := map[string]struct {
		typ    dto.MetricType
		labels []string
	}{
		"ojs_job_enqueued_total":     {dto.MetricType_COUNTER, []string{"queue", "type"}},
		"ojs_job_completed_total":    {dto.MetricType_COUNTER, []string{"queue", "type"}},
		"ojs_job_failed_total":       {dto.MetricType_COUNTER, []string{"queue", "type"}},
		"ojs_job_retried_total":      {dto.MetricType_COUNTER, []string{"queue", "type"}},
		"ojs_job_cancelled_total":    {dto.MetricType_COUNTER, []string{"queue", "type"}},
		"ojs_job_duration_seconds":   {dto.MetricType_HISTOGRAM, []string{"queue", "state", "type"}},
		"ojs_job_queue_time_seconds": {dto.MetricType_HISTOGRAM, []string{"queue", "type"}},
		"ojs_queue_depth":            {dto.MetricType_GAUGE, []string{"queue", "state"}},
	}
	for name, w := range want {
		mf := family(t, reg, name)
		if mf == nil {
			t.Errorf("%s is not exported", name)
			continue
		}
		if mf.GetType() != w.typ {
			t.Errorf("%s is a %v, want %v", name, mf.GetType(), w.typ)
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for l := range labelsOf(m) {
				got = append(got, l)
			}
			slices.Sort(got)
			if !slices.Equal(got, w.labels) {
				t.Errorf("%s labels %v, want %v", name, got, w.labels)
			}
		}
	}
	buckets := func(name string) []float64 {
		mf := family(t, reg, name)
		var out []float64
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			out = append(out, b.GetUpperBound())
		}
		return out
	}
	if got := buckets("ojs_job_duration_seconds"); !slices.Equal(got, []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {
		t.Errorf("ojs_job_duration_seconds buckets %v, want §8.2's", got)
	}
	if got := buckets("ojs_job_queue_time_seconds"); !slices.Equal(got, []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}) {
		t.Errorf("ojs_job_queue_time_seconds buckets %v, want §8.2's", got)
	}
	h := family(t, reg, "ojs_job_duration_seconds").GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.75 {
		t.Errorf("duration: %d observations, sum %v; want 1, 0.75", h.GetSampleCount(), h.GetSampleSum())
	}
	// Negative durations (clocks apart) count as 0, never below.
	o.AttemptEnded("email", "email.send", "completed", -time.Second)
	if h := family(t, reg, "ojs_job_duration_seconds").GetMetric()[0].GetHistogram(); h.GetSampleSum() != 0.75 || h.GetSampleCount() != 2 {
		t.Errorf("after a negative duration: sum %v of %d", h.GetSampleSum(), h.GetSampleCount())
	}

	// A nil *OJS records nothing and does not panic (records without metrics).
	var none *metrics.OJS
	none.JobEnqueued("q", "t")
	none.JobStarted("q", "t", time.Second)
	none.AttemptEnded("q", "t", "completed", time.Second)
	none.JobCompleted("q", "t")
	none.JobFailed("q", "t")
	none.JobRetried("q", "t")
	none.JobCancelled("q", "t")
}

// §8.4: "Metric labels MUST have bounded cardinality" — types and queues
// come from whoever publishes jobs: 20,000 distinct types and 2,000 queues
// leave MaxJobTypes types (plus "other") and the queue limit (plus
// "other"), sums stay exact, and a type a policy file declares keeps its
// name even when it comes last.
func TestOJSJobLabelsAreBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	l := metrics.NewLabels(20)
	l.SetDeclared(metrics.Declared{Type: func(typ string) bool { return typ == "declared.type" }})
	o := metrics.NewOJS(reg, l)
	const n = 20_000
	for i := range n {
		o.JobEnqueued("q", fmt.Sprintf("type-%05d", i))
		o.AttemptEnded("q", fmt.Sprintf("type-%05d", i), "completed", time.Second)
	}
	o.JobEnqueued("q", "declared.type")

	enq := family(t, reg, "ojs_job_enqueued_total").GetMetric()
	if len(enq) != metrics.MaxJobTypes+2 { // the first MaxJobTypes, other, declared.type
		t.Errorf("%d distinct types made %d series, want %d", n, len(enq), metrics.MaxJobTypes+2)
	}
	var sum float64
	types := map[string]float64{}
	for _, m := range enq {
		sum += m.GetCounter().GetValue()
		types[labelsOf(m)["type"]] = m.GetCounter().GetValue()
	}
	if sum != n+1 {
		t.Errorf("ojs_job_enqueued_total sums to %v, want %d", sum, n+1)
	}
	if types["other"] != n-metrics.MaxJobTypes || types["declared.type"] != 1 || types["type-00000"] != 1 {
		t.Errorf("other %v, declared.type %v, type-00000 %v", types["other"], types["declared.type"], types["type-00000"])
	}
	if got := testutil.CollectAndCount(o.Duration); got != metrics.MaxJobTypes+1 {
		t.Errorf("ojs_job_duration_seconds has %d series, want %d", got, metrics.MaxJobTypes+1)
	}

	for i := range 2_000 {
		o.JobCompleted(fmt.Sprintf("queue-%04d", i), "t")
	}
	// Queue q took one of the 20 labels: 19 of these get one, the rest are other.
	if got := testutil.CollectAndCount(o.Completed); got != 20 {
		t.Errorf("2,000 queues made %d series of ojs_job_completed_total, want 20 (19 and other)", got)
	}
}

// §8.3 ojs.queue.depth is read at scrape time (nothing before the first
// read succeeds); queues past the limit are summed as "other", the largest
// queues getting their own label first; a queue gone reads 0; a failed read
// keeps the last values and is reported.
func TestOJSQueueDepth(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	o := metrics.NewOJS(reg, metrics.NewLabels(2))
	if mf := family(t, reg, "ojs_queue_depth"); mf != nil {
		t.Fatalf("ojs_queue_depth before any source: %v", mf)
	}
	depth := map[string]map[string]int64{
		"small": {"available": 1},
		"big":   {"available": 500, "active": 3},
		"mid":   {"available": 50, "scheduled": 7},
		"tiny":  {"retryable": 2},
	}
	var fail error
	var failures []error
	o.SetDepthSource(func(context.Context) (map[string]map[string]int64, error) {
		return depth, fail
	}, func(err error) { failures = append(failures, err) })

	read := func() map[[2]string]float64 {
		out := map[[2]string]float64{}
		for _, m := range family(t, reg, "ojs_queue_depth").GetMetric() {
			l := labelsOf(m)
			out[[2]string{l["queue"], l["state"]}] = m.GetGauge().GetValue()
		}
		return out
	}
	want := map[[2]string]float64{{"big", "available"}: 500, {"big", "active"}: 3, {"mid", "available"}: 50,
		{"mid", "scheduled"}: 7, {"other", "available"}: 1, {"other", "retryable"}: 2}
	if got := read(); !mapsEqual(got, want) {
		t.Fatalf("depth %v, want %v", got, want)
	}

	delete(depth, "mid")
	depth["big"] = map[string]int64{"available": 10, "active": 0}
	want = map[[2]string]float64{{"big", "available"}: 10, {"big", "active"}: 0, {"mid", "available"}: 0,
		{"mid", "scheduled"}: 0, {"other", "available"}: 1, {"other", "retryable"}: 2}
	if got := read(); !mapsEqual(got, want) {
		t.Fatalf("after mid emptied: %v, want %v", got, want)
	}

	fail = errors.New("postgres down")
	if got := read(); !mapsEqual(got, want) || len(failures) != 1 {
		t.Fatalf("a failed read shows %v (failures %v), want the last values and one failure", got, failures)
	}

	// Scrapes at once each get the values (those that come while a read
	// runs share it).
	fail = nil
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			mfs, err := reg.Gather()
			if err == nil && (len(mfs) != 1 || len(mfs[0].GetMetric()) != len(want)) {
				err = fmt.Errorf("a concurrent scrape got %v", mfs)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func mapsEqual(a, b map[[2]string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
