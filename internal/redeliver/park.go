package redeliver

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/recreate"
)

// Parking a topic. A produce that fails for a reason of the target topic
// itself — the brokers say it does not exist, or that Redrive may not write
// to it — fails every record bound for it the same way. Claiming such a
// topic's backlog batch after batch, each record failing on its own backoff,
// would spend the scheduler's claims, the producer's buffer and Postgres's
// writes on records that cannot go anywhere, and keep healthy topics' due
// records waiting behind them. So the topic is parked as a whole: the queues
// whose records go to it are not claimed, their records keep their due times
// untouched, and one record at a time is claimed as a probe when the park
// ends; a probe produced unparks the topic, one that fails parks it again for
// longer (Config.ParkBackoff: from parkMin to parkMax by default).
//
// A topic is checked before its first batch (unless the producer creates
// missing topics, as redrive dev's does): the targets of the waiting
// queues that no produce or check has found yet are looked up in one
// metadata request per pass, and a missing one is parked with its probe due
// at once, so that one record, not a batch, carries the failure (and shows
// the queue blocked). A topic found, or produced to, is known and not looked
// up again; one that fails later (deleted) is parked by that produce.
//
// A record too large for the topic fails alone (others of the topic may
// fit), so it never parks the topic; it waits on its own backoff.

// parkMin and parkMax are the default bounds of how long a topic stays
// parked between probes.
const (
	parkMin = 5 * time.Second
	parkMax = time.Minute
)

// parksTopic says whether a produce failure of this reason is the topic's,
// not the record's.
func parksTopic(reason string) bool {
	return reason == dlq.ReasonUnknownTopic || reason == dlq.ReasonAuthorization
}

// parking is the set of parked topics. It is the scheduler's own: each
// replica finds a topic missing with its first batch and parks it.
type parking struct {
	backoff Backoff
	mu      sync.Mutex
	topics  map[string]*parked
	known   map[string]bool // found by a check or a produce: not looked up again
	probing int             // probes being produced
}

// maxProbing bounds the probes being produced at once, over all parked
// topics: each waits on the brokers (a missing topic fails after a metadata
// retry), and a thousand missing topics must not keep a thousand produces
// open.
const maxProbing = 4

// maxKnown bounds the known topics remembered; past it they are forgotten
// (and looked up again when next due).
const maxKnown = 100_000

type parked struct {
	until    time.Time // when the next probe may be claimed
	failures int       // probes failed in a row, the first park included
	reason   string
	probing  bool // a probe is being produced
}

// parkedTurn is what a queue's claim may do when its records go to a topic.
type parkedTurn int

const (
	notParked   parkedTurn = iota // claim as usual
	parkedWait                    // claim nothing until the probe is due
	parkedProbe                   // claim one record, a probe, then call probed
)

// turn says what a claim of records bound for topic may do at now, and
// with parkedWait, when the topic's probe is due.
func (p *parking) turn(topic string, now time.Time) (parkedTurn, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.topics[topic]
	switch {
	case !ok:
		return notParked, time.Time{}
	case t.probing || now.Before(t.until):
		return parkedWait, t.until
	case p.probing >= maxProbing:
		// Due, but every probe slot is taken: the end of a probe wakes
		// the scheduler.
		return parkedWait, time.Time{}
	}
	t.probing = true
	p.probing++
	return parkedProbe, time.Time{}
}

// park parks topic after a produce failed for reason at now, or parks it
// again, for longer, after a failed probe, and reports whether it was not
// parked before and how long it is parked. Batches that were in flight when
// the topic was parked fail too: they leave the park as it is.
func (p *parking) park(topic, reason string, now time.Time) (newly bool, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.topics == nil {
		p.topics = map[string]*parked{}
	}
	delete(p.known, topic)
	t, ok := p.topics[topic]
	if ok && !t.probing {
		return false, t.until.Sub(now)
	}
	if !ok {
		t = &parked{}
		p.topics[topic] = t
	}
	t.failures++
	t.reason, t.probing = reason, false
	wait = p.backoff.after(t.failures)
	t.until = now.Add(wait)
	return !ok, wait
}

// unpark ends topic's park (a record of it was produced, or a check found
// it), notes it known, and reports whether it was parked.
func (p *parking) unpark(topic string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.topics[topic]
	delete(p.topics, topic)
	if p.known == nil || len(p.known) >= maxKnown {
		p.known = map[string]bool{}
	}
	p.known[topic] = true
	return ok
}

// unchecked says whether topic is neither known nor parked: to be looked up
// before its records are claimed.
func (p *parking) unchecked(topic string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, parked := p.topics[topic]
	return !parked && !p.known[topic]
}

// missing parks topic, which a check found missing (or not writable) for
// reason, with its probe due at once. It reports whether it was not parked.
func (p *parking) missing(topic, reason string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.topics[topic]; ok {
		return false
	}
	if p.topics == nil {
		p.topics = map[string]*parked{}
	}
	p.topics[topic] = &parked{until: now, reason: reason}
	return true
}

// probed ends a probe of topic that neither parked nor unparked it (its
// record failed for a reason of its own): the topic stays parked, probed
// again after its current wait.
func (p *parking) probed(topic string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probing--
	if t, ok := p.topics[topic]; ok {
		t.probing = false
	}
}

// len is how many topics are parked.
func (p *parking) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.topics)
}

// parkTopics parks the topics of out (a batch of queue just produced) whose
// records failed for a reason of the topic, and unparks those a record was
// produced to.
func (s *Scheduler) parkTopics(queue string, out []*kgo.Record, errs []error) {
	now := s.cfg.Clock.Now()
	var seen map[string]bool
	for j, err := range errs {
		topic := out[j].Topic
		if seen[topic] {
			continue
		}
		if err == nil {
			if s.parks.unpark(topic) {
				s.log.Info("topic unparked: a record was produced to it", "topic", topic, "queue", queue)
			}
			continue
		}
		reason := classify(err)
		if !parksTopic(reason) {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[topic] = true
		if newly, wait := s.parks.park(topic, reason, now); newly {
			s.log.Warn("topic parked: its produce fails for a reason of the topic; the records bound for it wait, untouched, and one is probed from time to time",
				"topic", topic, "queue", queue, "reason", reason, "probe_in", wait, "err", err)
		}
	}
	s.cfg.Metrics.Redelivery.ParkedTopics.Set(float64(s.parks.len()))
}

// maxChecked bounds the topics one pass looks up.
const maxChecked = 1000

// checkTopics looks up, in one metadata request, the target topics of
// queues that are neither known nor parked (maxChecked at most), and parks
// those the brokers say are missing or not writable (their probe due at
// once). Topics found are known from then on. It reports whether the
// look-up was made: a request that fails changes nothing, and the produce
// finds out.
func (s *Scheduler) checkTopics(ctx context.Context, queues []string, now time.Time) bool {
	if autoCreates, _ := s.client.OptValue(kgo.AllowAutoTopicCreation).(bool); autoCreates {
		// The producer makes a missing topic (redrive dev): none is
		// missing for it, and its first produce makes the topic.
		return false
	}
	var topics []string
	seen := map[string]bool{}
	for _, q := range queues {
		topic := queueTarget(q, s.cfg.Policies.Resolve(q, ""))
		if !seen[topic] && s.parks.unchecked(topic) && checkTopic(topic) == nil {
			seen[topic] = true
			topics = append(topics, topic)
			if len(topics) == maxChecked {
				break
			}
		}
	}
	if len(topics) == 0 {
		return true
	}
	found, err := recreate.TopicIDs(ctx, s.client, topics)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Debug("look up target topics", "topics", len(topics), "err", err)
		}
		return false
	}
	for topic, id := range found {
		reason := ""
		if id.Err != nil {
			reason = classify(id.Err)
		}
		switch {
		case reason == "" || !parksTopic(reason):
			s.parks.unpark(topic)
		case s.parks.missing(topic, reason, now):
			s.log.Warn("topic parked: the brokers say it cannot be produced to; the records bound for it wait, untouched, and one is probed from time to time",
				"topic", topic, "reason", reason, "err", id.Err)
		}
	}
	s.cfg.Metrics.Redelivery.ParkedTopics.Set(float64(s.parks.len()))
	return true
}
