package metrics

import "github.com/prometheus/client_golang/prometheus"

// Events counts lifecycle events (internal/events).
type Events struct {
	// Published counts events accepted for delivery, by event type.
	Published *prometheus.CounterVec
	// Produced counts events the broker acknowledged on the events topic.
	Produced prometheus.Counter
	// Failed counts events lost, by reason: buffer_full (Publish found the
	// queue full), produce (the broker refused or timed out), encode.
	Failed *prometheus.CounterVec
	// SubscriberDropped counts events an SSE subscriber was too slow to take.
	SubscriberDropped prometheus.Counter
	// Subscribers is the number of connected SSE subscribers.
	Subscribers prometheus.Gauge
}

// NewEvents creates the event collectors and registers them on reg (nil: not
// registered, as in unit tests).
func NewEvents(reg prometheus.Registerer) *Events {
	e := &Events{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_events_published_total",
			Help: "Lifecycle events published, by event type.",
		}, []string{"type"}),
		Produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_events_produced_total",
			Help: "Lifecycle events acknowledged by Kafka on the events topic.",
		}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_events_failed_total",
			Help: "Lifecycle events lost before reaching the events topic, by reason (buffer_full, produce, encode). Events are notifications; the database stays correct.",
		}, []string{"reason"}),
		SubscriberDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_events_subscriber_dropped_total",
			Help: "Lifecycle events not delivered to a Server-Sent Events subscriber that was too slow.",
		}),
		Subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_events_subscribers",
			Help: "Connected Server-Sent Events subscribers.",
		}),
	}
	for _, r := range []string{"buffer_full", "produce", "encode"} {
		e.Failed.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(e.Published, e.Produced, e.Failed, e.SubscriberDropped, e.Subscribers)
	}
	return e
}
