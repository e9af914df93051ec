package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/redrive/redrive/internal/recreate"
	"github.com/redrive/redrive/internal/service"
)

// Fetch errors that franz-go hands to the poll loop are the ones it does not
// retry away by itself: while one lasts, the topic is not being consumed.
// Some repeat on every poll (a recreated topic answers UNKNOWN_TOPIC_ID to
// each fetch, over a million times a minute), so they are logged once a
// minute per topic and reason, with how many there were in between.
const (
	// stallWindow is how long after its last fetch error a topic still
	// counts as not being consumed (readiness).
	stallWindow = 10 * time.Second
	// fetchErrLogEvery is how often one topic's fetch errors of one reason
	// are logged.
	fetchErrLogEvery = time.Minute
	// readoptEvery is how often one topic is purged and added back at most:
	// each time is a rebalance of the group.
	readoptEvery = 10 * time.Second
)

// topicHealth follows the fetch errors of each DLQ topic, and the topic ids
// the brokers give them.
type topicHealth struct {
	log *slog.Logger

	mu     sync.Mutex
	topics map[string]*topicState
	logs   map[[3]string]*errLog // by what, topic and reason
	// The id watch (watchTopicIDs): every id seen of each topic, the latest,
	// and the topics whose id changed, for the poll loop to take up anew.
	ids     map[string]map[[16]byte]bool
	current map[string][16]byte
	flagged []string
	wake    context.CancelFunc // ends the poll in progress; nil between polls
}

type topicState struct {
	since, last time.Time // the first and the latest fetch error of the current run of them
	err         string    // the latest
	readopted   time.Time // when the topic was last purged and added back
}

// errLog is the rate limit of one kind of log line.
type errLog struct {
	at     time.Time
	missed int
}

func newTopicHealth(log *slog.Logger) *topicHealth {
	return &topicHealth{log: log, topics: map[string]*topicState{}, logs: map[[3]string]*errLog{},
		ids: map[string]map[[16]byte]bool{}, current: map[string][16]byte{}}
}

// reason names an error in logs: its Kafka error code, or "client".
func reason(err error) string {
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return ke.Message
	}
	return "client"
}

// logLimited logs msg unless the same what, topic and reason was logged
// within fetchErrLogEvery; then it only counts it, and the next line says
// how many there were. The caller holds h.mu.
func (h *topicHealth) logLimited(now time.Time, what, topic string, err error, msg string, attrs ...any) func() {
	key := [3]string{what, topic, reason(err)}
	l := h.logs[key]
	switch {
	case l == nil:
		h.logs[key] = &errLog{at: now}
	case now.Sub(l.at) >= fetchErrLogEvery:
		attrs = append(attrs, "errors_since_last_log", l.missed)
		l.at, l.missed = now, 0
	default:
		l.missed++
		return func() {}
	}
	attrs = append(attrs, "reason", key[2], "err", err)
	return func() { h.log.Warn(msg, attrs...) }
}

// commitFailed logs a failed offset commit of a batch of topics, at most
// once a minute per reason. A commit refused with UNKNOWN_TOPIC_ID is often
// the first sign that a topic was deleted and created again (franz-go will
// not commit the old topic's offsets to the new one): the topics are flagged
// for the poll loop to take up anew, as a fetch error would.
func (h *topicHealth) commitFailed(topics []string, err error, now time.Time) {
	h.mu.Lock()
	log := h.logLimited(now, "commit", "", err,
		"commit offsets failed; the batch will be re-consumed and deduplicated (repeats are logged once a minute per reason)")
	if recreate.Is(err) {
		for _, topic := range topics {
			st := h.topics[topic]
			if st == nil {
				st = &topicState{}
				h.topics[topic] = st
			}
			if now.Sub(st.readopted) >= readoptEvery && !slices.Contains(h.flagged, topic) {
				h.flagged = append(h.flagged, topic)
			}
		}
		if h.wake != nil {
			h.wake()
		}
	}
	h.mu.Unlock()
	log()
}

// sawID notes the id the brokers give topic. A new id of a topic whose id
// was known means the topic was deleted and created again: the topic is
// flagged for the poll loop, and the poll in progress ends. An id seen before
// (a broker with stale metadata) changes nothing.
func (h *topicHealth) sawID(topic string, id [16]byte) {
	if id == [16]byte{} {
		return // a broker without topic ids
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := h.ids[topic]
	if seen == nil {
		seen = map[[16]byte]bool{}
		h.ids[topic] = seen
	}
	if seen[id] {
		return
	}
	seen[id] = true
	_, known := h.current[topic]
	h.current[topic] = id
	if !known {
		return
	}
	if !slices.Contains(h.flagged, topic) {
		h.flagged = append(h.flagged, topic)
	}
	if h.wake != nil {
		h.wake()
	}
}

// adopted notes id as the id of topic, without flagging the topic.
func (h *topicHealth) adopted(topic string, id [16]byte) {
	if id == [16]byte{} {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids[topic] == nil {
		h.ids[topic] = map[[16]byte]bool{}
	}
	h.ids[topic][id] = true
	h.current[topic] = id
	h.flagged = slices.DeleteFunc(h.flagged, func(t string) bool { return t == topic })
}

// polling registers the cancel of the poll about to start (nil when it
// ended). A topic flagged meanwhile ends the poll at once.
func (h *topicHealth) polling(wake context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wake = wake
	if wake != nil && len(h.flagged) > 0 {
		wake()
	}
}

// takeFlagged returns the topics the id watch found recreated since the last call.
func (h *topicHealth) takeFlagged() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.flagged
	h.flagged = nil
	return out
}

// watchTopicIDs asks the brokers for the DLQ topics' ids every interval
// until ctx ends: a topic deleted and created again is noticed within it,
// even while its fetches do not fail yet (franz-go retries UNKNOWN_TOPIC_ID
// a few times, with backoff, before it reports it). A failed request is
// skipped: the kafka readiness check says when the brokers cannot be reached.
func (in *Ingester) watchTopicIDs(ctx context.Context, interval time.Duration) {
	loop := &service.Loop{Clock: in.cfg.Clock, Interval: interval, Pass: func(ctx context.Context) (service.Next, error) {
		rctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		if ids, err := recreate.TopicIDs(rctx, in.client, in.cfg.Topics); err == nil {
			for topic, id := range ids {
				if id.Err == nil {
					in.topics.sawID(topic, id.ID)
				}
			}
		}
		return service.Next{}, nil
	}}
	_ = loop.Run(ctx)
}

// failed notes a fetch error of topic (empty for an error of no topic) and
// logs it unless the same reason was logged within the last minute. It
// reports whether the error says the topic was deleted and created again
// and it is time to purge it and add it back (readopted).
func (h *topicHealth) failed(topic string, partition int32, err error, now time.Time) (readopt bool) {
	h.mu.Lock()
	st := h.topics[topic]
	if st == nil {
		st = &topicState{}
		h.topics[topic] = st
	}
	if st.last.IsZero() || now.Sub(st.last) > stallWindow {
		st.since = now
	}
	st.last, st.err = now, err.Error()
	readopt = topic != "" && recreate.Is(err) && now.Sub(st.readopted) >= readoptEvery
	log := h.logLimited(now, "fetch", topic, err, "fetch error (repeats are logged once a minute per topic and reason)",
		"topic", topic, "partition", partition)
	h.mu.Unlock()
	log()
	return readopt
}

// readopted notes that topic was purged and added back at now.
func (h *topicHealth) readopted(topic string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.topics[topic]; st != nil {
		st.readopted = now
	}
}

// problems describes, sorted, each topic that had a fetch error within the
// last stallWindow.
func (h *topicHealth) problems(now time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, topic := range h.flagged {
		out = append(out, fmt.Sprintf("DLQ topic %q is not being consumed: it was deleted and created again, and is being taken up anew", topic))
	}
	for topic, st := range h.topics {
		// Errors of no topic (the group, the connection) are the kafka
		// check's, not a topic's.
		if topic == "" || st.last.IsZero() || now.Sub(st.last) > stallWindow {
			continue
		}
		out = append(out, fmt.Sprintf("DLQ topic %q is not being consumed: %s (since %s)", topic, st.err,
			st.since.UTC().Format(time.RFC3339)))
	}
	slices.Sort(out)
	return out
}

// TopicProblems describes each DLQ topic ingest is not consuming right now:
// its fetches keep failing (a topic deleted and created again until it is
// taken up anew, an authorization error). Nil while every topic is consumed.
func (in *Ingester) TopicProblems() error {
	if p := in.topics.problems(in.cfg.Clock.Now()); len(p) > 0 {
		return errors.New(strings.Join(p, "; "))
	}
	return nil
}

// readopt takes up DLQ topics that were deleted and created again: franz-go
// keeps the id a topic had when it was first consumed and answers every
// fetch of the new topic with UNKNOWN_TOPIC_ID until the topic is purged
// from the client and added back. The group then consumes the new topic from
// its committed offsets — none, since Kafka drops a deleted topic's offsets —
// that is, from its start.
//
// Every batch already polled is committed first: an offset of the old topic
// committed after the purge would be taken for one of the new topic, and
// skip its records. (Before the purge, franz-go refuses to commit a recreated
// topic's offsets at all; the rows are stored, so nothing is lost.)
func (in *Ingester) readopt(ctx context.Context, w *writer, topics []string, log *slog.Logger) error {
	if err := w.drain(ctx); err != nil {
		return err
	}
	// The ids the topics have now are the ones the client adopts: the id
	// watch must not take them for another recreation.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if ids, err := recreate.TopicIDs(rctx, in.client, topics); err == nil {
		for topic, id := range ids {
			if id.Err == nil {
				in.topics.adopted(topic, id.ID)
			}
		}
	}
	cancel()
	in.client.AllowRebalance() // the purge is a rebalance
	in.client.PurgeTopicsFromClient(topics...)
	in.client.AddConsumeTopics(topics...)
	now := in.cfg.Clock.Now()
	for _, t := range topics {
		in.topics.readopted(t, now)
	}
	log.Warn("DLQ topic was deleted and created again: consuming the new topic from its committed offsets, or its start",
		"topics", topics)
	return nil
}
