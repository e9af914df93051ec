package metrics

import "github.com/prometheus/client_golang/prometheus"

// MaxFilters bounds the ingest filter names with their own label.
const MaxFilters = 100

// IngestRules holds the metrics of the ingest-side rules: capacity, access
// and ingest filters. Their labels are bounded: queues as everywhere
// (Labels.Queue), reasons by Redrive's code, filter names (from policy
// files) to the first MaxFilters seen.
type IngestRules struct {
	// TurnedAway counts records a rule kept from being retried, by queue and
	// reason: queue_full (reject past max_size or max_size_bytes), overflow
	// (discarded by drop_oldest), job_type_not_allowed, queue_not_found,
	// filtered (a discard filter) and skip_retry (a skip_retry filter).
	TurnedAway *CounterVec
	// FilterMatches counts the records each ingest filter matched, by filter
	// name and action.
	FilterMatches *CounterVec
}

func newIngestRules(reg prometheus.Registerer, l *Labels) *IngestRules {
	r := &IngestRules{
		TurnedAway: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_ingest_turned_away_total",
			Help: "New records an ingest-side rule kept from being retried (stored all the same, discarded, with the reason as error type), by queue and reason: queue_full, overflow, job_type_not_allowed, queue_not_found, filtered, skip_retry.",
		}, []string{"queue", "reason"}, l.Queue, enum()),
		FilterMatches: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_ingest_filter_matches_total",
			Help: "New records each ingest filter matched, by filter (its name in the policy files; \"other\" past 100 names) and action (discard, skip_retry).",
		}, []string{"filter", "action"}, newFirstSeen(MaxFilters).value, enum()),
	}
	if reg != nil {
		reg.MustRegister(r.TurnedAway, r.FilterMatches)
	}
	return r
}
