package events

import (
	"sync"

	"github.com/redrive/redrive/internal/metrics"
)

// Filter selects the events a subscriber gets. Empty fields match everything.
type Filter struct {
	// Types are the event types wanted.
	Types []Type
	// Queues are the source topics wanted; events without a queue (none today)
	// match only an empty Queues.
	Queues []string
}

// Match reports whether ev passes the filter.
func (f Filter) Match(ev *Event) bool {
	return matchAny(f.Types, ev.Type) && matchAny(f.Queues, ev.Queue)
}

func matchAny[T comparable](want []T, v T) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if w == v {
			return true
		}
	}
	return false
}

// Message is one event delivered to a subscriber, with its JSON encoding.
type Message struct {
	Event Event
	JSON  []byte
}

// Subscription receives the events matching its filter on C until Close.
// C is closed when the subscription ends (Close, or the Publisher stopping).
type Subscription struct {
	C      <-chan Message
	c      chan Message
	filter Filter
	b      *Broker
	once   sync.Once
}

// Close ends the subscription.
func (s *Subscription) Close() { s.b.remove(s) }

// Broker fans events out to in-process subscribers. A subscriber that does
// not keep up loses events (counted), it never slows publishing.
type Broker struct {
	m    *metrics.Events
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	shut bool
}

func newBroker(m *metrics.Events) *Broker {
	return &Broker{m: m, subs: map[*Subscription]struct{}{}}
}

// SubscriberBuffer is how many events wait for a slow subscriber before
// further ones are dropped.
const SubscriberBuffer = 256

// Subscribe starts a subscription. Close it when done.
func (b *Broker) Subscribe(f Filter) *Subscription {
	c := make(chan Message, SubscriberBuffer)
	s := &Subscription{C: c, c: c, filter: f, b: b}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut {
		close(c)
		return s
	}
	b.subs[s] = struct{}{}
	b.m.Subscribers.Inc()
	return s
}

func (b *Broker) remove(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		b.m.Subscribers.Dec()
		s.once.Do(func() { close(s.c) })
	}
}

func (b *Broker) publish(ev *Event, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if !s.filter.Match(ev) {
			continue
		}
		select {
		case s.c <- Message{Event: *ev, JSON: data}:
		default:
			b.m.SubscriberDropped.Inc()
		}
	}
}

func (b *Broker) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shut = true
	for s := range b.subs {
		delete(b.subs, s)
		b.m.Subscribers.Dec()
		s.once.Do(func() { close(s.c) })
	}
}
