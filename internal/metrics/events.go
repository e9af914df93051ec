package metrics

import "github.com/prometheus/client_golang/prometheus"

// Events counts lifecycle events (internal/events).
type Events struct {
	// Published counts events accepted for delivery, by event type.
	Published *CounterVec
	// Produced counts events the broker acknowledged on the events topic.
	Produced prometheus.Counter
	// Failed counts events lost, by reason: buffer_full (Publish found the
	// queue full), produce (the broker refused or timed out), encode.
	Failed *CounterVec
	// SubscriberDropped counts events an SSE subscriber was too slow to take.
	SubscriberDropped prometheus.Counter
	// Subscribers is the number of subscribers: SSE streams and in-process ones.
	Subscribers prometheus.Gauge
	// Streams is the number of open SSE streams.
	Streams prometheus.Gauge
	// StreamsRefused counts SSE streams refused past a cap, by reason:
	// max_streams (the server's), max_streams_per_key (the key's).
	StreamsRefused *CounterVec
	// StreamsDropped counts SSE streams ended because their client did not
	// keep up, by reason: buffer_full (the stream fell SubscriberBuffer
	// events behind), write_timeout (a write did not complete in time).
	StreamsDropped *CounterVec
}

// NewEvents creates the event collectors and registers them on reg (nil: not
// registered, as in unit tests).
func NewEvents(reg prometheus.Registerer) *Events {
	e := &Events{
		Published: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_events_published_total",
			Help: "Lifecycle events published, by event type.",
		}, []string{"type"}, enum()),
		Produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_events_produced_total",
			Help: "Lifecycle events acknowledged by Kafka on the events topic.",
		}),
		Failed: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_events_failed_total",
			Help: "Lifecycle events lost before reaching the events topic, by reason (buffer_full, produce, encode). Events are notifications; the database stays correct.",
		}, []string{"reason"}, enum()),
		SubscriberDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_events_subscriber_dropped_total",
			Help: "Lifecycle events not delivered to a Server-Sent Events subscriber that was too slow.",
		}),
		Subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_events_subscribers",
			Help: "Subscribers to lifecycle events: Server-Sent Events streams and in-process ones.",
		}),
		Streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_events_streams",
			Help: "Open Server-Sent Events streams (GET /ojs/v1/events).",
		}),
		StreamsRefused: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_events_streams_refused_total",
			Help: "Server-Sent Events streams refused with 503, by reason: max_streams (REDRIVE_EVENTS_MAX_STREAMS), max_streams_per_key (REDRIVE_EVENTS_MAX_STREAMS_PER_KEY).",
		}, []string{"reason"}, enum()),
		StreamsDropped: newCounterVec(prometheus.CounterOpts{
			Name: "redrive_events_streams_dropped_total",
			Help: "Server-Sent Events streams ended because the client did not keep up, by reason: buffer_full (256 events behind), write_timeout (a write did not complete within REDRIVE_EVENTS_WRITE_TIMEOUT).",
		}, []string{"reason"}, enum()),
	}
	for _, r := range []string{"buffer_full", "produce", "encode"} {
		e.Failed.WithLabelValues(r)
	}
	for _, r := range []string{"max_streams", "max_streams_per_key"} {
		e.StreamsRefused.WithLabelValues(r)
	}
	for _, r := range []string{"buffer_full", "write_timeout"} {
		e.StreamsDropped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(e.Published, e.Produced, e.Failed, e.SubscriberDropped, e.Subscribers, e.Streams, e.StreamsRefused, e.StreamsDropped)
	}
	return e
}
