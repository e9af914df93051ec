package events

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/service"
)

// Config configures a Publisher. Zero fields take the defaults noted.
type Config struct {
	// Client produces to Topic. Nil (or an empty Topic) turns the events topic
	// off; subscribers still get events. Use a client of its own, created with
	// ProducerOpts, so that a full events buffer never delays other producers.
	Client *kgo.Client
	// Topic is the events topic. Empty: no Kafka events.
	Topic string
	// Source is the envelope's source. Default "redrive".
	Source string
	// Buffer is how many Publish calls may wait for the background goroutine
	// before further ones are dropped. Default 4096.
	Buffer int
	// Clock stamps events. Default: clock.Wall.
	Clock clock.Clock
	// Logger logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts events. Default: a private, unregistered set.
	Metrics *metrics.Events
	// Streams bounds the client streams (SSE) of the Broker: how many in total
	// and per API key, and how long one write may take.
	Streams StreamConfig
	// History bounds the recent events the Broker keeps for polling
	// (Broker.Recent): by default the last 10,000 within 16 MiB.
	History HistoryConfig
	// Observe, if set, sees every event synchronously in Publish, before any
	// can be dropped (the app counts ojs_dead_letter_retried_total with it).
	// It must be cheap and must not keep the event.
	Observe func(*Event)
	// MaskKey, if set, says whether the record keys of queue's events are
	// masked (docs/security.md, "Data masking"): such an event carries the
	// marker "***" for its key, to every subscriber and on the events
	// topic alike (an event is written once for all of them). It must be
	// cheap: it is asked for every record event.
	MaskKey func(queue string, prefix string, truncated bool) bool
}

// ProducerOpts are the options of an events client: a bounded buffer (Publish
// uses TryProduce, so a full buffer drops instead of blocking), all-ISR acks
// and short timeouts.
func ProducerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.MaxBufferedRecords(10_000),
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.ProducerLinger(5 * time.Millisecond),
	}
}

func (c Config) withDefaults() Config {
	c.Source = cmp.Or(c.Source, DefaultSource)
	if c.Buffer <= 0 {
		c.Buffer = 4096
	}
	c.Clock = clock.Or(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = metrics.NewEvents(nil)
	}
	return c
}

// Publisher publishes lifecycle events. Publish is safe for concurrent use,
// cheap and never blocks; a nil *Publisher discards events, so components can
// hold one unconditionally. It is a service.Service: between Start and Stop
// it delivers what Publish queued.
type Publisher struct {
	service.Base
	cfg    Config
	log    *slog.Logger
	queue  chan []Event
	broker *Broker

	lastWarn atomic.Int64 // unix nanos of the last produce warning
}

// New returns a Publisher. Start it to deliver events.
func New(cfg Config) *Publisher {
	cfg = cfg.withDefaults()
	return &Publisher{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "events"),
		queue:  make(chan []Event, cfg.Buffer),
		broker: newBroker(cfg.Metrics, cfg.Streams, cfg.History),
	}
}

// Broker is the in-process fan-out to subscribers (the SSE endpoint).
func (p *Publisher) Broker() *Broker {
	if p == nil {
		return nil
	}
	return p.broker
}

// Topic is the events topic, "" when off.
func (p *Publisher) Topic() string {
	if p == nil || p.cfg.Client == nil {
		return ""
	}
	return p.cfg.Topic
}

// Publish queues events for delivery and returns at once. Call it after the
// change the events describe is committed. When the queue is full the events
// are dropped and counted (redrive_events_failed_total{reason="buffer_full"}).
// The events' Data must not be changed afterwards.
func (p *Publisher) Publish(_ context.Context, evs ...Event) {
	if p == nil || len(evs) == 0 {
		return
	}
	now := p.cfg.Clock.Now()
	for i := range evs {
		if evs[i].Time.IsZero() {
			evs[i].Time = now
		}
		if p.cfg.Observe != nil {
			p.cfg.Observe(&evs[i])
		}
		if p.cfg.MaskKey != nil {
			maskKey(&evs[i], p.cfg.MaskKey)
		}
	}
	select {
	case p.queue <- evs:
	default:
		p.cfg.Metrics.Failed.WithLabelValues("buffer_full").Add(float64(len(evs)))
	}
}

// Name implements service.Service.
func (p *Publisher) Name() string { return "events" }

// Start delivers queued events until ctx ends or Stop; then it delivers what
// is still queued, waits (up to 5 s) for the events topic's
// acknowledgements and closes the subscribers' streams. It never closes
// Client.
func (p *Publisher) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

func (p *Publisher) run(ctx context.Context) error {
	for {
		select {
		case evs := <-p.queue:
			p.deliver(context.WithoutCancel(ctx), evs)
		case <-ctx.Done():
			p.drain()
			return nil
		}
	}
}

// drain delivers what is queued and flushes the producer.
func (p *Publisher) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case evs := <-p.queue:
			p.deliver(ctx, evs)
		default:
			if p.Topic() != "" {
				if err := p.cfg.Client.Flush(ctx); err != nil {
					p.log.Warn("flush events at shutdown", "err", err)
				}
			}
			p.broker.closeAll()
			return
		}
	}
}

// deliver stamps events, fans them out to subscribers and produces them.
func (p *Publisher) deliver(ctx context.Context, evs []Event) {
	topic := p.Topic()
	for i := range evs {
		ev := &evs[i]
		ev.SpecVersion, ev.Source = SpecVersion, p.cfg.Source
		if ev.ID == "" {
			ev.ID = uuid.Must(uuid.NewV7()).String()
		}
		ev.Time = ev.Time.UTC().Truncate(time.Millisecond) // documented precision: milliseconds
		p.cfg.Metrics.Published.WithLabelValues(string(ev.Type)).Inc()
		data, err := json.Marshal(ev)
		if err != nil {
			p.cfg.Metrics.Failed.WithLabelValues("encode").Inc()
			p.log.Error("encode event", "type", ev.Type, "err", err)
			continue
		}
		p.broker.publish(ev, data)
		if topic == "" {
			continue
		}
		rec := &kgo.Record{
			Topic: topic, Key: []byte(ev.Subject), Value: data,
			Headers: []kgo.RecordHeader{
				{Key: "ce_type", Value: []byte(ev.Type)},
				{Key: "content-type", Value: []byte("application/json")},
			},
		}
		p.cfg.Client.TryProduce(ctx, rec, p.produced)
	}
}

func (p *Publisher) produced(_ *kgo.Record, err error) {
	if err == nil {
		p.cfg.Metrics.Produced.Inc()
		return
	}
	p.cfg.Metrics.Failed.WithLabelValues("produce").Inc()
	// A missing topic fails every event: log once a minute, count them all.
	now := p.cfg.Clock.Now().UnixNano()
	last := p.lastWarn.Load()
	if !errors.Is(err, context.Canceled) && now-last > int64(time.Minute) && p.lastWarn.CompareAndSwap(last, now) {
		p.log.Warn("produce event (repeats are counted in redrive_events_failed_total, not logged)", "topic", p.cfg.Topic, "err", err)
	}
}

// KeyMarker replaces a masked record key in an event.
const KeyMarker = "***"

// maskKey replaces the record key of a record event when masked says so.
func maskKey(ev *Event, masked func(queue, prefix string, truncated bool) bool) {
	d, ok := ev.Data.(RecordData)
	if !ok || d.RecordKeyData == nil {
		return
	}
	k := d.RecordKeyData
	prefix := k.Key
	if k.KeyEncoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(k.Key)
		if err != nil {
			b = nil
		}
		prefix = string(b)
	}
	if !masked(ev.Queue, prefix, k.KeyTruncated) {
		return
	}
	d.RecordKeyData = &RecordKeyData{Key: KeyMarker, KeyEncoding: "utf8", KeySize: k.KeySize}
	ev.Data = d
}
