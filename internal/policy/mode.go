package policy

// Mode is how a topic's due records are delivered (redelivery.mode).
type Mode string

const (
	// ModeKafka: the scheduler produces due records back to their topic
	// (or redelivery.target_topic). The default.
	ModeKafka Mode = "kafka"
	// ModePull: the scheduler leaves the topic's records alone; workers
	// fetch them over HTTP (POST /ojs/v1/workers/fetch) with a lease, then
	// ack or nack them. For consumers that cannot take a redelivery on Kafka.
	ModePull Mode = "pull"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { return m == ModeKafka || m == ModePull }

// Pulled reports whether the topic's due records wait for workers to fetch
// them instead of being produced by the scheduler.
func (t Topic) Pulled() bool { return t.Redelivery.Mode == ModePull }
