package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Schema holds the Schema Registry decoding metrics. Every label value is
// from a fixed set.
type Schema struct {
	// Decodes counts values and keys in the wire format, by format (AVRO,
	// PROTOBUF, JSON, or unknown while the schema is not held) and result
	// (decoded, pending, error).
	Decodes *prometheus.CounterVec
	// Requests counts registry requests by op (schema, subjects, reference)
	// and result (ok, error); RequestSeconds times them.
	Requests       *prometheus.CounterVec
	RequestSeconds *prometheus.HistogramVec
}

// Decode results.
const (
	DecodeDecoded = "decoded"
	DecodePending = "pending"
	DecodeError   = "error"
)

func newSchema(reg prometheus.Registerer) *Schema {
	s := &Schema{
		Decodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_schema_decodes_total",
			Help: "Values and keys in the Schema Registry wire format, by format (unknown while the schema is not held) and result: decoded, pending (stored raw, decoded in the background) or error.",
		}, []string{"format", "result"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_schema_registry_requests_total",
			Help: "Schema Registry requests by what was asked (schema, subjects, reference) and result (ok, error).",
		}, []string{"op", "result"}),
		RequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "redrive_schema_registry_request_duration_seconds",
			Help:    "Schema Registry request latency by what was asked.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 14),
		}, []string{"op"}),
	}
	reg.MustRegister(s.Decodes, s.Requests, s.RequestSeconds)
	return s
}

// Decoded counts one decode of format ("" when unknown) with result.
func (s *Schema) Decoded(format, result string) {
	switch format {
	case "AVRO", "PROTOBUF", "JSON":
	default:
		format = "unknown"
	}
	s.Decodes.WithLabelValues(format, result).Inc()
}

// Observe is schema.Config's Observe hook: it counts and times one
// registry request.
func (s *Schema) Observe(op string, took time.Duration, err error) {
	switch op {
	case "schema", "subjects", "reference":
	default:
		op = "other"
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.Requests.WithLabelValues(op, result).Inc()
	s.RequestSeconds.WithLabelValues(op).Observe(took.Seconds())
}
