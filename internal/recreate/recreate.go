// Package recreate keeps Redrive's Kafka producers working when a topic is
// deleted and created again under them.
//
// franz-go holds on to the id a topic had when a client first used it: once
// the topic is deleted and created again, every produce to it fails with
// UNKNOWN_TOPIC_ID until the topic is purged from the client, after which the
// next produce adopts the new topic. A Resetter does that purge, once per
// recreation however many records see the error.
//
// The ingest consumer has the same problem and its own answer (a purge, then
// the topic added back), in internal/ingest: a consumer group must not purge
// while a batch of the old topic is still being committed.
package recreate

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Is reports whether err says that the client's id of a topic is not the
// topic's id any more: the topic was deleted (and, usually, created again).
func Is(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.InconsistentTopicID)
}

// Resetter purges topics from one producing client when produces to them fail
// because the topic was recreated. Safe for concurrent use.
//
// Producers read a topic's Epoch before they produce to it and pass it to
// Reset when a record failed with an error Is matches: of many batches that
// fail together, only the first purges; the others see that the topic was
// purged since they produced, and simply produce again. A record that failed
// because a purge dropped it from the client's buffer (a batch of the same
// topic in flight while another one purged) is recognised the same way: the
// epoch moved while it was being produced.
type Resetter struct {
	log *slog.Logger

	mu      sync.Mutex
	cl      *kgo.Client
	epoch   map[string]uint64
	pending map[string]bool // topics the hook is resetting
}

// NewResetter returns a Resetter; Attach gives it its client.
func NewResetter(log *slog.Logger) *Resetter {
	if log == nil {
		log = slog.Default()
	}
	return &Resetter{log: log, epoch: map[string]uint64{}, pending: map[string]bool{}}
}

// Attach sets the client topics are purged from (the Resetter's hook is an
// option of that client, so the client exists only after the Resetter).
func (r *Resetter) Attach(cl *kgo.Client) {
	r.mu.Lock()
	r.cl = cl
	r.mu.Unlock()
}

// Epoch is how many times topic was purged from the client.
func (r *Resetter) Epoch(topic string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch[topic]
}

// Reset purges topic from the client, unless it was purged since epoch (read
// with Epoch before the failed produce). It reports whether it purged.
func (r *Resetter) Reset(topic string, epoch uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cl == nil || r.epoch[topic] != epoch {
		return false
	}
	// Under the lock: a second Reset of the same epoch must wait for this
	// purge rather than produce into the client before it.
	r.cl.PurgeTopicsFromProducing(topic)
	r.epoch[topic]++
	r.log.Warn("topic was deleted and created again; producing to the new topic", "topic", topic)
	return true
}

// Hook is a client hook that resets a topic as soon as one of its records
// fails with an error Is matches, for clients that produce without waiting
// (the events publisher): the records that failed are lost to the old topic,
// the next ones go to the new one.
func (r *Resetter) Hook() kgo.Hook { return hook{r} }

type hook struct{ r *Resetter }

// OnProduceRecordUnbuffered runs inside the client: the purge, which waits
// for the client's metadata loop, runs on its own goroutine, one per topic
// however many buffered records fail at once.
func (h hook) OnProduceRecordUnbuffered(rec *kgo.Record, err error) {
	if !Is(err) {
		return
	}
	r, topic := h.r, rec.Topic
	r.mu.Lock()
	if r.pending[topic] {
		r.mu.Unlock()
		return
	}
	r.pending[topic] = true
	epoch := r.epoch[topic]
	r.mu.Unlock()
	go func() {
		r.Reset(topic, epoch)
		r.mu.Lock()
		delete(r.pending, topic)
		r.mu.Unlock()
	}()
}

// TopicID is a topic's id as the brokers' metadata gives it, or why it has none.
type TopicID struct {
	// ID is zero when Err is set, or when the brokers do not use topic ids.
	ID [16]byte
	// Err is kerr.UnknownTopicOrPartition when the topic does not exist.
	Err error
}

// TopicIDs asks the brokers for the ids of topics. It sends a metadata request
// of its own: kadm's answers come from the client's cache for a few seconds,
// and a topic deleted meanwhile would look as it was.
func TopicIDs(ctx context.Context, cl *kgo.Client, topics []string) (map[string]TopicID, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]TopicID, len(topics))
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out[*t.Topic] = TopicID{ID: t.TopicID, Err: kerr.ErrorForCode(t.ErrorCode)}
		}
	}
	for _, t := range topics {
		if _, ok := out[t]; !ok {
			out[t] = TopicID{Err: kerr.UnknownTopicOrPartition}
		}
	}
	return out, nil
}
