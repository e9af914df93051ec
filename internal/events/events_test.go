package events_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/testdate"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// everyType publishes one event of every type, alternating two queues.
func everyType() []events.Event {
	var evs []events.Event
	for i, typ := range events.Types {
		q := []string{"orders", "billing"}[i%2]
		switch {
		case strings.HasPrefix(string(typ), "queue."):
			evs = append(evs, events.Queue(typ, events.QueueData{Queue: q, State: "paused"}))
		case typ == events.DeadLetterPruned:
			evs = append(evs, events.Event{Type: typ, Subject: q, Queue: q, Data: events.PrunedData{Queue: q, Count: 3, Reason: "max_age"}})
		case typ == events.IncidentOpened:
			evs = append(evs, events.Incident(events.IncidentData{ID: "e8bdf5bbe285de31", Queue: q, ErrorType: "db.down",
				Signature: "dial tcp <ip>:<port>: connection refused", Sample: events.IncidentSample{ID: uuid.NewString(), Message: "dial tcp 10.0.0.5:5432: connection refused"}}))
		case strings.HasPrefix(string(typ), "task.canary_"):
			evs = append(evs, events.Canary(typ, q, events.CanaryData{TaskID: uuid.NewString(), Filter: json.RawMessage(`{"queue":"` + q + `"}`),
				Phase: strings.TrimPrefix(string(typ), "task.canary_"), Report: map[string]int{"sample": 10}}))
		case strings.HasPrefix(string(typ), "job.") && typ != events.JobDiscarded:
			evs = append(evs, events.Job(typ, events.JobData{JobID: uuid.NewString(), JobType: "email.send", Queue: q, Attempt: 1}))
		case typ == events.IncidentRedriveStarted: // no queue: for unfiltered subscribers only
			evs = append(evs, events.RedriveStarted(events.RedriveStartedData{ID: "e8bdf5bbe285de31", TaskID: uuid.NewString(),
				RequestedBy: "ops", Quiet: "PT15M", QuietSince: t0}))
		default:
			evs = append(evs, events.Record(typ, events.RecordData{ID: uuid.NewString(), Queue: q, Type: "order.created"}))
		}
	}
	return evs
}

type envelope struct {
	SpecVersion string          `json:"specversion"`
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Source      string          `json:"source"`
	Time        time.Time       `json:"time"`
	Subject     string          `json:"subject"`
	Data        json.RawMessage `json:"data"`
}

func checkEnvelope(t *testing.T, raw []byte, want events.Event) {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	id, err := uuid.Parse(e.ID)
	if e.SpecVersion != "1.0" || e.Source != "redrive" || e.Type != string(want.Type) || e.Subject != want.Subject ||
		!e.Time.Equal(t0) || err != nil || id.Version() != 7 || len(e.Data) < 2 {
		t.Errorf("envelope %s, want type %s subject %s", raw, want.Type, want.Subject)
	}
	wantData, _ := json.Marshal(want.Data)
	if string(e.Data) != string(wantData) {
		t.Errorf("data %s, want %s", e.Data, wantData)
	}
}

func TestEveryTypeOnTopicAndSubscribers(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, "dead_letter_queue.events")
	cl := kafkatest.Client(t, brokers, events.ProducerOpts()...)
	reg := prometheus.NewRegistry()
	m := metrics.NewEvents(reg)
	p := events.New(events.Config{Client: cl, Topic: "dead_letter_queue.events", Clock: clock.NewFake(t0), Metrics: m})
	all := p.Broker().Subscribe(events.Filter{})
	defer all.Close()
	orders := p.Broker().Subscribe(events.Filter{Queues: []string{"orders"}})
	replays := p.Broker().Subscribe(events.Filter{Types: []events.Type{events.DeadLetterReplayed, events.QueuePaused}, Queues: []string{"billing", "orders"}})

	ctx := context.Background()
	start(t, p)
	evs := everyType()
	p.Publish(ctx, evs...)

	got := kafkatest.Consume(t, brokers, "dead_letter_queue.events", len(evs), 10*time.Second)
	// Keyed by subject over several partitions: one of each type, in any order.
	byType := map[string]events.Event{}
	for _, e := range evs {
		byType[string(e.Type)] = e
	}
	for _, r := range got {
		var e envelope
		_ = json.Unmarshal(r.Value, &e)
		want, ok := byType[e.Type]
		if !ok {
			t.Fatalf("unexpected or repeated event %s", r.Value)
		}
		delete(byType, e.Type)
		if string(r.Key) != want.Subject {
			t.Errorf("key %q, want %q", r.Key, want.Subject)
		}
		checkEnvelope(t, r.Value, want)
	}
	for i := range evs {
		msg := recv(t, all.C)
		checkEnvelope(t, msg.JSON, evs[i])
	}
	var ordersGot, replaysGot []events.Type
	for range 11 {
		ordersGot = append(ordersGot, recv(t, orders.C).Event.Type)
	}
	for range 2 {
		replaysGot = append(replaysGot, recv(t, replays.C).Event.Type)
	}
	if strings.Join(typeNames(ordersGot), ",") != "dead_letter.added,dead_letter.replayed,dead_letter.deleted,queue.resumed,incident.opened,task.canary_passed,dead_letter.moved,task.canary_inconclusive,"+
		"job.started,job.failed,job.cancelled" {
		t.Errorf("orders subscriber got %v", ordersGot)
	}
	if strings.Join(typeNames(replaysGot), ",") != "dead_letter.replayed,queue.paused" {
		t.Errorf("filtered subscriber got %v", replaysGot)
	}
	replays.Close()
	stop(t, p)
	// Stop closes the remaining subscriptions.
	if _, ok := recvOK(t, orders.C); ok {
		t.Error("subscription open after shutdown")
	}
	if v := counter(t, reg, "redrive_events_produced_total", nil); v != float64(len(evs)) {
		t.Errorf("produced %v", v)
	}
	if v := counter(t, reg, "redrive_events_published_total", map[string]string{"type": "queue.config_updated"}); v != 1 {
		t.Errorf("published{queue.config_updated} = %v", v)
	}
}

func typeNames(ts []events.Type) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func TestPublishNeverBlocks(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := events.New(events.Config{Buffer: 2, Metrics: metrics.NewEvents(reg)})
	// Nobody runs the publisher: the third and later calls are dropped, counted.
	ev := events.Record(events.DeadLetterAdded, events.RecordData{ID: "x", Queue: "q"})
	start := testdate.Now()
	for range 10 {
		p.Publish(context.Background(), ev, ev)
	}
	if testdate.Since(start) > time.Second {
		t.Fatal("Publish blocked")
	}
	if v := counter(t, reg, "redrive_events_failed_total", map[string]string{"reason": "buffer_full"}); v != 16 {
		t.Errorf("buffer_full = %v, want 16", v)
	}
	var nilP *events.Publisher
	nilP.Publish(context.Background(), ev) // a nil Publisher discards
}

func TestProduceFailureIsCountedNotFatal(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t) // the events topic does not exist
	cl := kafkatest.Client(t, brokers, append(events.ProducerOpts(), kgoTimeout()...)...)
	reg := prometheus.NewRegistry()
	p := events.New(events.Config{Client: cl, Topic: "missing.events", Metrics: metrics.NewEvents(reg)})
	sub := p.Broker().Subscribe(events.Filter{})
	ctx := context.Background()
	start(t, p)
	p.Publish(ctx, events.Record(events.DeadLetterAdded, events.RecordData{ID: "x", Queue: "q"}))
	recv(t, sub.C) // subscribers still get it
	eventually.True(t, "the produce failure counted", func() bool {
		return counter(t, reg, "redrive_events_failed_total", map[string]string{"reason": "produce"}) == 1
	}, eventually.Within(10*time.Second))
}

func TestSSE(t *testing.T) {
	t.Parallel()
	p := events.New(events.Config{Clock: clock.NewFake(t0)})
	ctx := context.Background()
	start(t, p)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := events.ParseFilter(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sub, err := p.Broker().Stream("test", f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_ = events.ServeSSE(w, r, sub, events.StreamOptions{})
	}))
	defer srv.Close()

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(srv.URL + "?type=dead_letter.pruned,queue.config_updated&topic=billing")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": connected"
	if sc.Text() != ": connected" {
		t.Fatalf("first line %q", sc.Text())
	}
	evs := everyType()
	// Of every type on both queues, the filter passes pruned and config_updated
	// on billing. (Chosen before Publish: the publisher fills in the events.)
	var want []events.Event
	for _, e := range evs {
		if e.Queue == "billing" && (e.Type == events.DeadLetterPruned || e.Type == events.QueueConfigUpdated) {
			want = append(want, e)
		}
	}
	p.Publish(ctx, evs...)
	var lines []string
	for len(lines) < 6 && sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	if len(want) != 2 || len(lines) != 6 {
		t.Fatalf("lines %q, want events %v", lines, want)
	}
	for i, e := range want {
		if lines[3*i+1] != "event: "+string(e.Type) || !strings.HasPrefix(lines[3*i], "id: ") {
			t.Errorf("lines %q", lines[3*i:3*i+3])
		}
		checkEnvelope(t, []byte(strings.TrimPrefix(lines[3*i+2], "data: ")), e)
	}

	bad, err := http.Get(srv.URL + "?type=job.exploded")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown type: %d", bad.StatusCode)
	}
}

func counter(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

func kgoTimeout() []kgo.Opt { return []kgo.Opt{kgo.RecordDeliveryTimeout(time.Second)} }

// recv receives one value, failing the test after 10 s instead of hanging
// until the suite's timeout.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	v, ok := recvOK(t, ch)
	if !ok {
		t.Fatal("channel closed")
	}
	return v
}

// recvOK receives one value or the channel's close, failing after 10 s.
func recvOK[T any](t *testing.T, ch <-chan T) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10 s")
		var zero T
		return zero, false
	}
}

// Event times are written to the millisecond, as documented.
func TestEventTimeIsMilliseconds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	p := events.New(events.Config{Clock: clock.NewFake(at)})
	sub := p.Broker().Subscribe(events.Filter{})
	defer sub.Close()
	ctx := context.Background()
	start(t, p)
	p.Publish(ctx, events.Queue(events.QueuePaused, events.QueueData{Queue: "orders"}))
	msg := recv(t, sub.C)
	if !strings.Contains(string(msg.JSON), `"time":"2026-03-01T12:00:00.123Z"`) {
		t.Errorf("envelope %s, want time 2026-03-01T12:00:00.123Z", msg.JSON)
	}
}

// Streams are refused past the total and per-owner caps with a LimitError
// saying which; closing one frees its place. In-process subscriptions are
// never refused nor counted.
func TestStreamCaps(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := events.New(events.Config{Metrics: metrics.NewEvents(reg), Streams: events.StreamConfig{MaxStreams: 3, MaxStreamsPerOwner: 2}})
	b := p.Broker()
	internal := b.Subscribe(events.Filter{})
	defer internal.Close()
	a1, err1 := b.Stream("a", events.Filter{})
	_, err2 := b.Stream("a", events.Filter{Queues: []string{"orders"}})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	var le *events.LimitError
	if _, err := b.Stream("a", events.Filter{}); !errors.As(err, &le) || !le.PerOwner || le.Limit != 2 || !errors.Is(err, events.ErrTooManyStreams) {
		t.Fatalf("third stream of a: %v, want the per-owner cap of 2", err)
	}
	if _, err := b.Stream("b", events.Filter{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stream("c", events.Filter{}); !errors.As(err, &le) || le.PerOwner || le.Limit != 3 {
		t.Fatalf("fourth stream: %v, want the total cap of 3", err)
	}
	if b.Streams() != 3 || b.Len() != 4 {
		t.Fatalf("streams %d, subscriptions %d; want 3 and 4", b.Streams(), b.Len())
	}
	a1.Close()
	a1.Close() // twice is fine
	if _, err := b.Stream("c", events.Filter{}); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if v := counter(t, reg, "redrive_events_streams_refused_total", map[string]string{"reason": "max_streams"}); v != 1 {
		t.Errorf("refused{max_streams} = %v", v)
	}
	if v := counter(t, reg, "redrive_events_streams_refused_total", map[string]string{"reason": "max_streams_per_key"}); v != 1 {
		t.Errorf("refused{max_streams_per_key} = %v", v)
	}
}

// A stream that falls SubscriberBuffer events behind is ended at once (its
// buffered events released), while an in-process subscription only loses
// the events that do not fit.
func TestSlowStreamIsEnded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := events.New(events.Config{Metrics: metrics.NewEvents(reg)})
	ctx := context.Background()
	start(t, p)
	stream, err := p.Broker().Stream("slow", events.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	internal := p.Broker().Subscribe(events.Filter{})
	defer internal.Close()
	ev := events.Queue(events.QueuePaused, events.QueueData{Queue: "orders"})
	for range events.SubscriberBuffer + 10 {
		p.Publish(ctx, ev)
	}
	eventually.True(t, "the stream dropped", func() bool { return p.Broker().Streams() == 0 }, eventually.Within(10*time.Second))
	// The stream's channel is closed after the events it holds.
	n := 0
	for {
		_, ok := recvOK(t, stream.C)
		if !ok {
			break
		}
		n++
	}
	if n != events.SubscriberBuffer || !errors.Is(stream.Err(), events.ErrSlowSubscriber) {
		t.Fatalf("stream got %d events then ended with %v; want %d and ErrSlowSubscriber", n, stream.Err(), events.SubscriberBuffer)
	}
	if p.Broker().Streams() != 0 || p.Broker().Len() != 1 {
		t.Fatalf("streams %d, subscriptions %d after the drop", p.Broker().Streams(), p.Broker().Len())
	}
	for range events.SubscriberBuffer {
		recv(t, internal.C)
	}
	p.Publish(ctx, ev)
	recv(t, internal.C) // still subscribed
	if internal.Err() != nil {
		t.Errorf("in-process subscription: %v", internal.Err())
	}
	if v := counter(t, reg, "redrive_events_streams_dropped_total", map[string]string{"reason": "buffer_full"}); v != 1 {
		t.Errorf("dropped{buffer_full} = %v", v)
	}
}

// A subscriber gets exactly the events its filter matches, however many
// subscribers and topics there are: the queue index never delivers an event
// to a subscriber of another queue, nor twice to one of several queues.
func TestPublishReachesExactlyTheMatchingSubscribers(t *testing.T) {
	t.Parallel()
	p := events.New(events.Config{Buffer: 100_000})
	b := p.Broker()
	type sub struct {
		s *events.Subscription
		f events.Filter
	}
	var subs []sub
	add := func(f events.Filter) {
		subs = append(subs, sub{b.Subscribe(f), f})
	}
	// 200 subscribers of 100 topics each (overlapping windows of 1,000
	// topics, one of them listed twice), some also filtering on types; and
	// subscribers of every queue, with and without a type filter.
	for i := range 200 {
		var qs []string
		for j := range 100 {
			qs = append(qs, fmt.Sprintf("topic-%d", (i*7+j)%1000))
		}
		qs = append(qs, qs[0])
		var types []events.Type
		if i%3 == 0 {
			types = []events.Type{events.DeadLetterAdded, events.QueuePaused, events.DeadLetterAdded}
		}
		add(events.Filter{Queues: qs, Types: types})
	}
	add(events.Filter{})
	add(events.Filter{Types: []events.Type{events.QueuePaused}})
	// Callers whose roles let them read some queues only (topics ending in
	// 0): with and without a queue filter of their own.
	tens := func(q string) bool { return strings.HasSuffix(q, "0") }
	add(events.Filter{Allow: tens})
	add(events.Filter{Allow: tens, Queues: []string{"topic-10", "topic-13", "topic-20"}})
	var published []events.Event
	for i := range events.SubscriberBuffer - 16 { // fewer than a buffer: nobody can lose one, however slow
		q := fmt.Sprintf("topic-%d", (i*13)%1100) // some topics nobody filters on
		switch i % 5 {
		case 3: // a move names two queues: a limited caller must read both
			published = append(published, events.Record(events.DeadLetterMoved,
				events.RecordData{ID: fmt.Sprint(i), Queue: q, FromQueue: fmt.Sprintf("topic-%d", i%20)}))
		case 4: // an event of no queue (a canary of a filter naming none)
			published = append(published, events.Event{Type: events.DeadLetterDeleted, Subject: fmt.Sprint(i), Data: i})
		default:
			typ := []events.Type{events.DeadLetterAdded, events.QueuePaused, events.DeadLetterDeleted}[i%3]
			published = append(published, events.Event{Type: typ, Subject: fmt.Sprint(i), Queue: q, Data: i})
		}
	}
	got := make([][]string, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Go(func() {
			for m := range s.s.C {
				got[i] = append(got[i], m.Event.Subject)
			}
		})
	}
	ctx := context.Background()
	start(t, p)
	p.Publish(ctx, published...)
	// Shutting down delivers everything queued, then closes every subscription.
	stop(t, p)
	wg.Wait()
	for i, s := range subs {
		var want []string
		for _, ev := range published {
			if s.f.Match(&ev) {
				want = append(want, ev.Subject)
			}
		}
		if s.f.Allow != nil {
			for _, id := range got[i] {
				ev := published[atoi(t, id)]
				if !tens(ev.Queue) || ev.Type == events.DeadLetterMoved && !tens(ev.Data.(events.RecordData).FromQueue) {
					t.Fatalf("subscriber %d, limited to topics ending in 0, got event %s of %s", i, id, ev.Queue)
				}
			}
		}
		if strings.Join(got[i], ",") != strings.Join(want, ",") {
			t.Fatalf("subscriber %d (filter %d topics, types %v) got %d events %v, want %d %v", i, len(s.f.Queues), s.f.Types, len(got[i]), got[i], len(want), want)
		}
	}
}

// Filters are bounded: at most MaxFilterValues topics and types, every topic
// a legal Kafka topic name; each mistake names its parameter.
func TestParseFilterBounds(t *testing.T) {
	t.Parallel()
	many := func(n int, f string) string {
		var vs []string
		for i := range n {
			vs = append(vs, fmt.Sprintf(f, i))
		}
		return strings.Join(vs, ",")
	}
	for _, tc := range []struct {
		query url.Values
		param string
	}{
		{url.Values{"topic": {many(101, "t%d")}}, "topic"},
		{url.Values{"topic": {many(60, "t%d")}, "queue": {many(41, "q%d")}}, "queue"},
		{url.Values{"topic": {"a", "b"}, "queue": {"bad name"}}, "queue"},
		{url.Values{"topic": {strings.Repeat("x", 250)}}, "topic"},
		{url.Values{"topic": {"orders.*"}}, "topic"},
		{url.Values{"topic": {".."}}, "topic"},
		{url.Values{"type": {many(101, "dead_letter.added")}}, "type"},
		{url.Values{"type": {"job.exploded"}}, "type"},
		{url.Values{"types": {"job.exploded"}}, "types"},
		{url.Values{"type": {"nothing.*"}}, "type"},
		{url.Values{"type": {"job.*.x*"}}, "type"},
		{url.Values{"type": {strings.Repeat("dead_letter.added,", 60)}, "types": {strings.Repeat("queue.paused,", 41)}}, "types"},
		{url.Values{"queues": {"bad name"}}, "queues"},
	} {
		_, err := events.ParseFilter(tc.query)
		var fe *events.FilterError
		if !errors.As(err, &fe) || fe.Param != tc.param {
			t.Errorf("%v: %v, want an error naming %s", tc.query, err, tc.param)
		}
	}
	f, err := events.ParseFilter(url.Values{"topic": {many(50, "t%d"), " , "}, "queue": {many(50, "q%d")}, "type": {"queue.paused, dead_letter.added"}})
	if err != nil || len(f.Queues) != 100 || len(f.Types) != 2 {
		t.Fatalf("at the bound: %d queues, %v, %v", len(f.Queues), f.Types, err)
	}
}

// start starts p until the test ends (or stop).
func start(t *testing.T, p *events.Publisher) {
	t.Helper()
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, p) })
}

// stop stops p: what is queued is delivered, the subscriptions end.
func stop(t *testing.T, p *events.Publisher) {
	t.Helper()
	if err := p.Stop(); err != nil {
		t.Errorf("stop the publisher: %v", err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
