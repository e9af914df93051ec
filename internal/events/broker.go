package events

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive/internal/metrics"
)

// Filter selects the events a subscriber gets. Empty fields match everything.
type Filter struct {
	// Types are the event types wanted.
	Types []Type
	// Queues are the source topics wanted; events without a queue (none today)
	// match only an empty Queues.
	Queues []string
	// Allow, when set, must accept every queue an event names (and the
	// event must name one): the queues the subscriber's roles let it read.
	Allow func(queue string) bool
}

// Match reports whether ev passes the filter.
func (f Filter) Match(ev *Event) bool {
	return matchAny(f.Types, ev.Type) && matchAny(f.Queues, ev.Queue) && (f.Allow == nil || ev.readableBy(f.Allow))
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

// typeBits maps each known type to its bit in a typeMask.
var typeBits = func() map[Type]uint32 {
	if len(Types) > 31 { // bit 31 is maskOf's "unknown type"
		panic("events: more than 31 event types do not fit a typeMask")
	}
	m := make(map[Type]uint32, len(Types))
	for i, t := range Types {
		m[t] = 1 << i
	}
	return m
}()

// typeMask is a set of event types; 0 matches every type.
type typeMask uint32

func maskOf(types []Type) typeMask {
	var m typeMask
	for _, t := range types {
		bit, ok := typeBits[t]
		if !ok {
			bit = 1 << 31 // an unknown type: matches nothing Redrive publishes
		}
		m |= typeMask(bit)
	}
	return m
}

func (m typeMask) match(t Type) bool { return m == 0 || typeMask(typeBits[t])&m != 0 }

// Message is one event delivered to a subscriber, with its JSON encoding.
// Every subscriber receives the same *Message: treat it as read-only.
type Message struct {
	Event Event
	JSON  []byte
}

// Subscription receives the events matching its filter on C until Close.
// C is closed when the subscription ends (Close, the Publisher stopping, or,
// for a stream, its buffer overflowing; Err says which).
type Subscription struct {
	C <-chan *Message
	c chan *Message

	types  typeMask
	queues []string // deduplicated; empty: every queue
	allow  func(queue string) bool
	owner  string // a stream's owner; "" for an in-process subscription
	stream bool
	b      *Broker
	once   sync.Once
	ended  atomic.Pointer[error] // why a stream was ended by the broker
}

// Close ends the subscription.
func (s *Subscription) Close() { s.b.remove(s) }

// Err is why the broker ended the subscription: ErrSlowSubscriber for a
// stream whose buffer overflowed, nil otherwise (Close, shutdown, still open).
func (s *Subscription) Err() error {
	if p := s.ended.Load(); p != nil {
		return *p
	}
	return nil
}

// ErrSlowSubscriber ends a stream that did not take its events as fast as
// they came: its buffer of SubscriberBuffer events overflowed.
var ErrSlowSubscriber = errors.New("the stream fell too far behind (its buffer overflowed)")

// ErrTooManyStreams refuses a stream past a cap (StreamConfig). The error is a
// *LimitError saying which.
var ErrTooManyStreams = errors.New("too many event streams")

// LimitError is a stream refused past a cap.
type LimitError struct {
	// PerOwner is true when the owner's cap was hit, false for the total one.
	PerOwner bool
	// Limit is the cap that was hit.
	Limit int
}

func (e *LimitError) Error() string {
	if e.PerOwner {
		return fmt.Sprintf("%v: this key (or client) already has %d open, the most allowed", ErrTooManyStreams, e.Limit)
	}
	return fmt.Sprintf("%v: the server already serves %d, the most allowed", ErrTooManyStreams, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrTooManyStreams }

// Broker fans events out to in-process subscribers. A subscriber that does
// not keep up loses events (counted), it never slows publishing; a stream
// (Stream) that falls behind is ended instead.
//
// Subscribers are indexed by the queues they filter on, so publishing an event
// costs O(subscribers of its queue + subscribers of every queue), whatever the
// size of the other subscribers' filters.
type Broker struct {
	m      *metrics.Events
	limits StreamConfig

	mu      sync.Mutex
	all     map[*Subscription]struct{}            // no queue filter
	byQueue map[string]map[*Subscription]struct{} // queue -> subscribers filtering on it
	n       int                                   // subscriptions of either kind
	streams int
	owners  map[string]int // open streams per owner
	shut    bool
	hist    *history // the recent events, for Recent
}

// StreamConfig bounds the client streams (Broker.Stream, ServeSSE) a Broker
// serves. Zero fields take the defaults noted.
type StreamConfig struct {
	// MaxStreams bounds open streams in total. Default 500.
	MaxStreams int
	// MaxStreamsPerOwner bounds the open streams of one owner (an API key, or
	// a client address with authentication off). Default 50.
	MaxStreamsPerOwner int
	// WriteTimeout bounds each write to a stream's client (ServeSSE). Default
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
}

// Default stream limits: well inside a process's default file-descriptor
// limit (1024 soft on most systems) with room for Postgres, Kafka and API
// connections.
const (
	DefaultMaxStreams         = 500
	DefaultMaxStreamsPerOwner = 50
)

func (l StreamConfig) withDefaults() StreamConfig {
	if l.MaxStreams <= 0 {
		l.MaxStreams = DefaultMaxStreams
	}
	if l.MaxStreamsPerOwner <= 0 {
		l.MaxStreamsPerOwner = DefaultMaxStreamsPerOwner
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	return l
}

func newBroker(m *metrics.Events, l StreamConfig, h HistoryConfig) *Broker {
	return &Broker{m: m, limits: l.withDefaults(), all: map[*Subscription]struct{}{},
		byQueue: map[string]map[*Subscription]struct{}{}, owners: map[string]int{}, hist: newHistory(h)}
}

// SubscriberBuffer is how many events wait for a slow subscriber before
// further ones are dropped (in-process subscriptions) or the stream is ended.
const SubscriberBuffer = 256

// Subscribe starts an in-process subscription: never refused, and when it
// falls SubscriberBuffer events behind, further events are dropped (counted)
// until it catches up. Close it when done.
func (b *Broker) Subscribe(f Filter) *Subscription {
	s := b.newSubscription(f, "", false)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut {
		s.once.Do(func() { close(s.c) })
		return s
	}
	b.add(s)
	return s
}

// Stream starts a subscription for a client's event stream on behalf of
// owner. It is refused with a *LimitError (errors.Is ErrTooManyStreams) when
// the server or the owner already has the most streams StreamConfig allows, and it is
// ended, with Err ErrSlowSubscriber, as soon as it falls SubscriberBuffer
// events behind: a client that stops reading holds nothing for long. f must
// come from ParseFilter (bounded). Close it when done.
func (b *Broker) Stream(owner string, f Filter) (*Subscription, error) {
	s := b.newSubscription(f, owner, true)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut {
		s.once.Do(func() { close(s.c) })
		return s, nil
	}
	switch {
	case b.streams >= b.limits.MaxStreams:
		b.m.StreamsRefused.WithLabelValues("max_streams").Inc()
		return nil, &LimitError{Limit: b.limits.MaxStreams}
	case b.owners[owner] >= b.limits.MaxStreamsPerOwner:
		b.m.StreamsRefused.WithLabelValues("max_streams_per_key").Inc()
		return nil, &LimitError{PerOwner: true, Limit: b.limits.MaxStreamsPerOwner}
	}
	b.streams++
	b.owners[owner]++
	b.m.Streams.Inc()
	b.add(s)
	return s, nil
}

func (b *Broker) newSubscription(f Filter, owner string, stream bool) *Subscription {
	c := make(chan *Message, SubscriberBuffer)
	s := &Subscription{C: c, c: c, types: maskOf(f.Types), allow: f.Allow, owner: owner, stream: stream, b: b}
	seen := make(map[string]struct{}, len(f.Queues))
	for _, q := range f.Queues {
		if _, dup := seen[q]; !dup {
			seen[q] = struct{}{}
			s.queues = append(s.queues, q)
		}
	}
	return s
}

// add indexes s. b.mu is held.
func (b *Broker) add(s *Subscription) {
	if len(s.queues) == 0 {
		b.all[s] = struct{}{}
	}
	for _, q := range s.queues {
		set := b.byQueue[q]
		if set == nil {
			set = map[*Subscription]struct{}{}
			b.byQueue[q] = set
		}
		set[s] = struct{}{}
	}
	b.n++
	b.m.Subscribers.Inc()
}

// drop removes s from the index and closes it, recording why (nil: Close or
// shutdown). It reports whether s was still registered. b.mu is held.
func (b *Broker) drop(s *Subscription, why error) bool {
	registered := false
	if len(s.queues) == 0 {
		_, registered = b.all[s]
		delete(b.all, s)
	}
	for _, q := range s.queues {
		set := b.byQueue[q]
		if _, ok := set[s]; ok {
			registered = true
			delete(set, s)
			if len(set) == 0 {
				delete(b.byQueue, q)
			}
		}
	}
	if !registered {
		return false
	}
	b.n--
	b.m.Subscribers.Dec()
	if s.stream {
		b.streams--
		b.m.Streams.Dec()
		if b.owners[s.owner]--; b.owners[s.owner] <= 0 {
			delete(b.owners, s.owner)
		}
	}
	if why != nil {
		s.ended.Store(&why)
	}
	s.once.Do(func() { close(s.c) })
	return true
}

func (b *Broker) remove(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(s, nil)
}

// publish keeps ev in the history and hands it to every subscriber whose
// filter matches: those filtering on ev's queue and those taking every
// queue, never the others.
func (b *Broker) publish(ev *Event, data []byte) {
	msg := &Message{Event: *ev, JSON: data}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hist.add(ev, data)
	for s := range b.all {
		b.offer(s, msg)
	}
	if ev.Queue != "" {
		for s := range b.byQueue[ev.Queue] {
			b.offer(s, msg)
		}
	}
}

// offer delivers msg to s if its type filter matches and s may read the
// event's queues. b.mu is held; a stream that overflows is dropped (deleting
// from the map being ranged over is safe).
func (b *Broker) offer(s *Subscription, msg *Message) {
	if !s.types.match(msg.Event.Type) || s.allow != nil && !msg.Event.readableBy(s.allow) {
		return
	}
	select {
	case s.c <- msg:
	default:
		b.m.SubscriberDropped.Inc()
		if s.stream && b.drop(s, ErrSlowSubscriber) {
			b.m.StreamsDropped.WithLabelValues("buffer_full").Inc()
		}
	}
}

// Len is the number of open subscriptions, in-process ones and streams.
func (b *Broker) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Streams is the number of open streams.
func (b *Broker) Streams() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.streams
}

func (b *Broker) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shut = true
	for s := range b.all {
		b.drop(s, nil)
	}
	for _, set := range b.byQueue {
		for s := range set {
			b.drop(s, nil)
		}
	}
}
