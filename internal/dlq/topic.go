package dlq

import "sort"

// TopicNameProblem says what keeps name from being a legal Kafka topic name
// (1 to 249 characters of a-z, A-Z, 0-9, '.', '_', '-', and not "." or
// ".."), or "" when it is one.
func TopicNameProblem(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > 249:
		return "is longer than Kafka's limit of 249 characters"
	case name == "." || name == "..":
		return `is not a legal Kafka topic name ("." and ".." are reserved)`
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "may only contain letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}

// ReservedTopics are the topics Redrive never produces a redelivery to: its
// own (the DLQ topics it consumes, its archive and events topics) and Kafka's
// internal ones (named "__…", such as __consumer_offsets). A redelivery
// produced to a DLQ topic comes straight back as a failure of itself, to the
// events topic it forges a lifecycle event, and to an internal topic it
// corrupts the cluster's own state. The zero value reserves only the
// internal topics.
type ReservedTopics struct {
	own map[string]struct{}
}

// NewReservedTopics reserves Redrive's own topics, named by own.
func NewReservedTopics(own ...string) ReservedTopics {
	r := ReservedTopics{own: make(map[string]struct{}, len(own))}
	for _, name := range own {
		r.own[name] = struct{}{}
	}
	return r
}

// Own reports whether topic is one of Redrive's own topics.
func (r ReservedTopics) Own(topic string) bool {
	_, ok := r.own[topic]
	return ok
}

// Internal reports whether topic is named as Kafka's internal topics are.
func Internal(topic string) bool { return len(topic) >= 2 && topic[:2] == "__" }

// Problem says why a redelivery cannot be produced to topic (not a legal
// topic name, Redrive's own topic, a Kafka internal topic), or "" when it can.
func (r ReservedTopics) Problem(topic string) string {
	if p := TopicNameProblem(topic); p != "" {
		return p
	}
	if r.Own(topic) {
		return "is one of Redrive's own topics (DLQ, archive or events)"
	}
	if Internal(topic) {
		return `is a Kafka internal topic (named "__…")`
	}
	return ""
}

// Names lists Redrive's own topics, sorted.
func (r ReservedTopics) Names() []string {
	out := make([]string, 0, len(r.own))
	for name := range r.own {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
