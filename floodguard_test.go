package redrive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/fingerprint"
)

// fakeClock is the flood guard's time in tests: it moves only when told,
// and runs the timers that come due in the goroutine that moves it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock { return &fakeClock{now: testNow} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), f: f})
}

// Advance moves the clock by d and runs the timers that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
		} else {
			due = append(due, t.f)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// pending is how many timers wait.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// setupTopic is setup with the source topic in n partitions.
func setupTopic(t *testing.T, partitions int) *bundle {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), testTopic), kfake.SeedTopics(1, DefaultDLQTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := &bundle{cluster: c, brokers: c.ListenAddrs()}
	b.cl = b.client(t)
	b.adm = kadm.NewClient(b.cl)
	return b
}

// consumer is a group member of testGroup on testTopic, committing by hand.
func (b *bundle) consumer(t *testing.T) *kgo.Client {
	return b.client(t, kgo.ConsumerGroup(testGroup), kgo.ConsumeTopics(testTopic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

// guarded returns a DeadLetterer with a flood guard on consumer's
// partitions, its fake clock and the guard's events (c.OnChange, if set, is
// called first).
func (b *bundle) guarded(t *testing.T, consumer *kgo.Client, c FloodGuardConfig) (*DeadLetterer, *fakeClock, <-chan FloodEvent) {
	t.Helper()
	events := make(chan FloodEvent, 64)
	c.Consumer = consumer
	hook := c.OnChange
	c.OnChange = func(ev FloodEvent) {
		if hook != nil {
			hook(ev)
		}
		events <- ev
	}
	d := b.deadLetterer(t, FloodGuard(c))
	fc := newFakeClock()
	d.guard.clock = fc
	return d, fc, events
}

func nextEvent(t *testing.T, events <-chan FloodEvent, want FloodState) FloodEvent {
	t.Helper()
	select {
	case ev := <-events:
		if ev.State != want {
			t.Fatalf("flood guard event %+v, want state %v", ev, want)
		}
		return ev
	case <-time.After(15 * time.Second):
		t.Fatalf("no flood guard event; want state %v", want)
	}
	return FloodEvent{}
}

func noEvent(t *testing.T, events <-chan FloodEvent) {
	t.Helper()
	select {
	case ev := <-events:
		t.Fatalf("unexpected flood guard event %+v", ev)
	default:
	}
}

// produceOrders writes n records order-0 … order-(n-1), keyed alike.
func (b *bundle) produceOrders(t *testing.T, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		k := "order-" + strconv.Itoa(i)
		recs = append(recs, &kgo.Record{Topic: testTopic, Key: []byte(k), Value: []byte(k)})
	}
	if err := b.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committed returns the group's committed offset of each partition of the
// source topic.
func (b *bundle) committed(t *testing.T) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	offs, err := b.adm.FetchOffsets(context.Background(), testGroup)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // nothing committed yet
	}
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == testTopic {
			out[o.Partition] = o.At
		}
	})
	return out
}

func (b *bundle) endOffsets(t *testing.T) map[int32]int64 {
	t.Helper()
	offs, err := b.adm.ListEndOffsets(context.Background(), testTopic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// dependency is what the handler calls: a database that serves two calls
// and is then down until the test brings it back.
type dependency struct {
	down atomic.Bool

	mu    sync.Mutex
	calls int
	ok    map[string]int // successful calls per key
}

func newDependency() *dependency { return &dependency{ok: map[string]int{}} }

// handle fails every call but the first two while the dependency is down,
// with the same failure (up to the port: its normalized message is one).
func (dep *dependency) handle(_ context.Context, r *kgo.Record) error {
	i, _ := strconv.Atoi(strings.TrimPrefix(string(r.Key), "order-"))
	dep.mu.Lock()
	defer dep.mu.Unlock()
	dep.calls++
	if dep.calls > 2 && dep.down.Load() {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 5432 + i%3},
			Err: errors.New("connect: connection refused")}
	}
	dep.ok[string(r.Key)]++
	return nil
}

func (dep *dependency) snapshot() (calls int, ok map[string]int) {
	dep.mu.Lock()
	defer dep.mu.Unlock()
	ok = map[string]int{}
	for k, v := range dep.ok {
		ok[k] = v
	}
	return dep.calls, ok
}

// consumeLoop runs the documented consumer loop until ctx ends: per record
// with Wrap, or per poll with Process; held records are not committed and
// the loop goes on. It counts finished iterations.
func consumeLoop(ctx context.Context, cl *kgo.Client, d *DeadLetterer, h Handler, process bool, iterations *atomic.Int64) (err error) {
	// A test stops the loop by cancelling ctx once it has seen what it waits
	// for, perhaps while a commit is still returning: that is the end of the
	// loop, not a failure of it.
	defer func() {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
	}()
	handle := d.Wrap(h)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return nil
		}
		if process {
			done, err := d.Process(ctx, fs, h)
			if len(done) > 0 {
				if cerr := cl.CommitRecords(ctx, done...); cerr != nil {
					return cerr
				}
			}
			if err != nil && !errors.Is(err, ErrFlooded) {
				return err
			}
		} else {
			for _, r := range fs.Records() {
				err := handle(ctx, r)
				if errors.Is(err, ErrFlooded) {
					continue // held in Kafka: not done, comes back
				}
				if err != nil {
					return err
				}
				if err := cl.CommitRecords(ctx, r); err != nil {
					return err
				}
			}
		}
		iterations.Add(1)
	}
	return nil
}

// TestFloodGuardHoldsRecordsThroughAnOutage: the handler's database goes
// down; the guard trips after a few dead letters, holds every record in
// Kafka (nothing committed, nothing dead-lettered) through a failed probe,
// and once the database is back a probe succeeds and every record is
// processed, once.
func TestFloodGuardHoldsRecordsThroughAnOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		partitions int
		process    bool
	}{
		{"Wrap, one partition", 1, false},
		{"Process, three partitions", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const records = 30
			b := setupTopic(t, tc.partitions)
			b.produceOrders(t, records)
			cl := b.consumer(t)
			reg := prometheus.NewRegistry()
			// The loop's iterations, and how many had ended when the guard
			// last held records (it does so in the loop's goroutine).
			var iterations, heldAfter atomic.Int64
			d, fc, events := b.guarded(t, cl, FloodGuardConfig{
				MinFailures: 5, Window: time.Minute, ProbeBackoff: time.Second, MaxProbeBackoff: 4 * time.Second, Registerer: reg,
				OnChange: func(ev FloodEvent) {
					if ev.State == FloodTripped {
						heldAfter.Store(iterations.Load())
					}
				},
			})
			state := func() float64 { return metricValue(t, d.guard.stateGauge) }
			trips := func() float64 { return metricValue(t, d.guard.tripsTotal) }

			dep := newDependency()
			dep.down.Store(true)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			loopErr := make(chan error, 1)
			go func() { loopErr <- consumeLoop(ctx, cl, d, dep.handle, tc.process, &iterations) }()
			// settled waits until the loop ended the poll in which the guard
			// held records: nothing is committed after it while tripped.
			settled := func() {
				at := heldAfter.Load()
				eventually.True(t, "the loop to end its poll", func() bool { return iterations.Load() > at }, eventually.Within(15*time.Second))
			}
			defer func() {
				cancel()
				if err := <-loopErr; err != nil {
					t.Errorf("consumer loop: %v", err)
				}
			}()

			// Four failures are dead-lettered while the guard decides; the
			// fifth trips it.
			tripped := nextEvent(t, events, FloodTripped)
			wantFP := fingerprint.Of("net.OpError", "dial tcp 10.0.0.5:5432: connect: connection refused", nil)
			if tripped.Fingerprint != wantFP || tripped.ErrorType != "net.OpError" || tripped.Failures != 5 || tripped.Backoff != time.Second {
				t.Fatalf("tripped %+v, want 5 failures of net.OpError %s and a 1s backoff", tripped, wantFP)
			}
			if state() != 1 || trips() != 1 {
				t.Errorf("metrics: state %v trips %v, want 1 and 1", state(), trips())
			}
			settled()
			dead := b.readDLQ(t, 4)
			for i, r := range dead {
				h := headerMap(r.Headers)
				flood, marked := h[FloodHeader]
				if i == 0 && marked || i > 0 && flood != wantFP {
					t.Errorf("dead letter %d (%s): %s = %q, want it on all but the first, the flood's fingerprint", i, r.Key, FloodHeader, flood)
				}
			}
			heldAt := b.committed(t)
			if tc.partitions == 1 {
				if heldAt[0] != 6 || tripped.Offset != 6 || string(dead[0].Key) != "order-2" || string(dead[3].Key) != "order-5" {
					t.Fatalf("committed %v, tripped at %d, dead letters %s…%s; want order-2…5 dead-lettered, 6 held and committed up to it",
						heldAt, tripped.Offset, dead[0].Key, dead[3].Key)
				}
			}
			assertNoLoss(t, b, dep, dead)

			// A probe while the database is still down fails: held again,
			// twice the backoff.
			if fc.pending() != 1 {
				t.Fatalf("%d timers pending, want the probe's", fc.pending())
			}
			fc.Advance(time.Second)
			nextEvent(t, events, FloodProbing)
			failed := nextEvent(t, events, FloodTripped)
			if failed.FailedProbes != 1 || failed.Backoff != 2*time.Second || state() != 1 || trips() != 1 {
				t.Fatalf("after a failed probe: %+v, state %v, trips %v", failed, state(), trips())
			}
			settled()
			if got := b.committed(t); fmt.Sprint(got) != fmt.Sprint(heldAt) {
				t.Fatalf("committed %v while tripped, was %v", got, heldAt)
			}
			if n := b.dlqSize(t); n != 4 {
				t.Fatalf("DLQ holds %d records while tripped, want 4", n)
			}
			calls, _ := dep.snapshot()
			if calls != 8 && tc.partitions == 1 {
				t.Fatalf("%d handler calls while tripped, want 8: 2 successes, 4 dead letters, the trip, the probe", calls)
			}

			// The database is back: the next probe succeeds and everything
			// held is processed.
			dep.down.Store(false)
			fc.Advance(2 * time.Second)
			nextEvent(t, events, FloodProbing)
			resumed := nextEvent(t, events, FloodWatching)
			if resumed.FailedProbes != 1 || resumed.Fingerprint != wantFP || resumed.Duration != 3*time.Second {
				t.Errorf("resumed %+v", resumed)
			}
			end := b.endOffsets(t)
			eventually.True(t, "every record committed", func() bool { return fmt.Sprint(b.committed(t)) == fmt.Sprint(end) }, eventually.Within(15*time.Second))
			if state() != 0 || trips() != 1 {
				t.Errorf("metrics after resuming: state %v trips %v, want 0 and 1", state(), trips())
			}

			calls, ok := dep.snapshot()
			deadKeys := map[string]bool{}
			for _, r := range b.readDLQ(t, 4) {
				deadKeys[string(r.Key)] = true
			}
			if n := b.dlqSize(t); n != 4 {
				t.Errorf("DLQ holds %d records, want the 4 from before the trip", n)
			}
			for i := range records {
				k := "order-" + strconv.Itoa(i)
				if want := map[bool]int{true: 0, false: 1}[deadKeys[k]]; ok[k] != want {
					t.Errorf("%s processed %d times (dead-lettered: %v), want %d", k, ok[k], deadKeys[k], want)
				}
			}
			// Every record once, plus the failed calls: the trip and the probe.
			if calls != records+2 {
				t.Errorf("%d handler calls, want %d", calls, records+2)
			}
			noEvent(t, events)
		})
	}
}

// metricValue reads a gauge or counter.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	if pb.Gauge != nil {
		return pb.Gauge.GetValue()
	}
	return pb.Counter.GetValue()
}

// assertNoLoss checks that no partition is committed past a record that
// was neither processed nor dead-lettered.
func assertNoLoss(t *testing.T, b *bundle, dep *dependency, dead []*kgo.Record) {
	t.Helper()
	_, ok := dep.snapshot()
	done := map[string]bool{}
	for k := range ok {
		done[k] = true
	}
	for _, r := range dead {
		done[string(r.Key)] = true
	}
	committed := b.committed(t)
	cl := b.client(t, kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end := b.endOffsets(t)
	seen := map[int32]int64{}
	for fmt.Sprint(seen) != fmt.Sprint(end) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("could not read the source topic")
		}
		for _, r := range fs.Records() {
			seen[r.Partition] = r.Offset + 1
			if r.Offset < committed[r.Partition] && !done[string(r.Key)] {
				t.Errorf("%s (partition %d offset %d) is committed (%d) but neither processed nor dead-lettered",
					r.Key, r.Partition, r.Offset, committed[r.Partition])
			}
		}
	}
}

// TestFloodGuardScatteredFailuresNeverTrip: failures that are frequent but
// each their own, or alike but rare, are dead-lettered as without a guard.
func TestFloodGuardScatteredFailuresNeverTrip(t *testing.T) {
	t.Parallel()
	words := strings.Fields("sku price currency address email phone name zip city country vat iban bic note tag ref")
	for _, tc := range []struct {
		name string
		fail func(i int) error
	}{
		{"many failures, each its own", func(i int) error {
			switch i % 5 {
			case 0:
				return errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
			case 1, 2:
				return Fail("validation.missing_field", fmt.Errorf("field %s missing", words[i%len(words)]))
			}
			return nil
		}},
		{"one failure, but rare", func(i int) error {
			if i%5 == 0 {
				return errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
			}
			return nil
		}},
		{"one failure, frequent, but not retryable", func(i int) error {
			if i%2 == 0 {
				return DeadLetter("schema.unknown_magic_byte", errors.New("unknown magic byte"))
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const records = 40
			b := setupTopic(t, 1)
			b.produceOrders(t, records)
			cl := b.consumer(t)
			d, _, events := b.guarded(t, cl, FloodGuardConfig{MinFailures: 5, Window: time.Minute})
			var failures atomic.Int64
			h := func(_ context.Context, r *kgo.Record) error {
				i, _ := strconv.Atoi(strings.TrimPrefix(string(r.Key), "order-"))
				if err := tc.fail(i); err != nil {
					failures.Add(1)
					return err
				}
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			var iterations atomic.Int64
			loopErr := make(chan error, 1)
			go func() { loopErr <- consumeLoop(ctx, cl, d, h, false, &iterations) }()
			eventually.True(t, "every record committed", func() bool { return b.committed(t)[0] == records }, eventually.Within(15*time.Second))
			cancel()
			if err := <-loopErr; err != nil {
				t.Fatal(err)
			}
			noEvent(t, events)
			n := int(failures.Load())
			if got := b.dlqSize(t); got != int64(n) {
				t.Fatalf("DLQ holds %d records, want the %d failures", got, n)
			}
			for _, r := range b.readDLQ(t, n) {
				if v, ok := headerMap(r.Headers)[FloodHeader]; ok {
					t.Errorf("dead letter %s marked %s=%s", r.Key, FloodHeader, v)
				}
			}
		})
	}
}

// held is a record of testTopic as a consumer would be handed it.
func held(offset int64) *kgo.Record {
	r := consumed("k", "v")
	r.Offset = offset
	return r
}

// TestFloodGuardWindowSlides: failures spread thinner than MinFailures per
// window never trip the guard; the same failures at once do.
func TestFloodGuardWindowSlides(t *testing.T) {
	t.Parallel()
	b := setupTopic(t, 1)
	d, fc, events := b.guarded(t, b.consumer(t), FloodGuardConfig{MinFailures: 5, Window: 10 * time.Second})
	down := func(context.Context, *kgo.Record) error { return errors.New("connection refused") }
	handle := d.Wrap(down)
	ctx := context.Background()
	offset := int64(0)
	for range 12 { // one every 3s: at most 4 in any 10s
		if err := handle(ctx, held(offset)); err != nil {
			t.Fatalf("offset %d: %v", offset, err)
		}
		offset++
		fc.Advance(3 * time.Second)
	}
	noEvent(t, events)
	fc.Advance(10 * time.Second)
	for range 4 {
		if err := handle(ctx, held(offset)); err != nil {
			t.Fatal(err)
		}
		offset++
	}
	err := handle(ctx, held(offset))
	var fe *FloodError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFlooded) || fe.Offset != offset || fe.HandlerErr == nil || fe.Fingerprint == "" {
		t.Fatalf("fifth failure at once: %v, want a *FloodError holding offset %d with the handler's error", err, offset)
	}
	nextEvent(t, events, FloodTripped)
	if n := b.dlqSize(t); n != 16 {
		t.Fatalf("DLQ holds %d records, want the 16 before the trip", n)
	}
}

// TestFloodGuardTripsOnAnOutageWithVaryingIDs: an outage's failures carry
// each their own id — in a URL, after "=", in a SQL detail — and are still
// one failure: the guard trips on the fifth, as on identical messages.
func TestFloodGuardTripsOnAnOutageWithVaryingIDs(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{
		"POST https://api/v1/charges/%s: context deadline exceeded",
		"load profile user_id=%s: context deadline exceeded",
		"ERROR: duplicate key value violates unique constraint \"payments_pkey\"\n  Detail: Key (id)=(%s) already exists.",
	} {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			b := setupTopic(t, 1)
			d, _, events := b.guarded(t, b.consumer(t), FloodGuardConfig{MinFailures: 5, Window: 10 * time.Second})
			handle := d.Wrap(func(context.Context, *kgo.Record) error { return fmt.Errorf(shape, uuid.NewString()) })
			ctx := context.Background()
			for offset := range int64(4) {
				if err := handle(ctx, held(offset)); err != nil {
					t.Fatalf("offset %d: %v, want it dead-lettered while the guard decides", offset, err)
				}
			}
			if err := handle(ctx, held(4)); !errors.Is(err, ErrFlooded) {
				t.Fatalf("fifth failure of the outage: %v, want the guard to trip", err)
			}
			tripped := nextEvent(t, events, FloodTripped)
			if want := fingerprint.Of(tripped.ErrorType, fmt.Sprintf(shape, uuid.NewString()), nil); tripped.Fingerprint != want || tripped.Failures != 5 {
				t.Errorf("tripped %+v, want 5 failures of fingerprint %s", tripped, want)
			}
			for i, r := range b.readDLQ(t, 4) {
				if flood := headerMap(r.Headers)[FloodHeader]; i > 0 && flood != tripped.Fingerprint {
					t.Errorf("dead letter %d: %s = %q, want the outage's fingerprint", i, FloodHeader, flood)
				}
			}
		})
	}
}

// TestFloodGuardProbes: the backoff between probes doubles up to its cap; a
// probe that fails otherwise than the flood is dead-lettered and the next
// record probes; a successful probe resumes, and the next failure is
// dead-lettered again.
func TestFloodGuardProbes(t *testing.T) {
	t.Parallel()
	b := setupTopic(t, 1)
	d, fc, events := b.guarded(t, b.consumer(t), FloodGuardConfig{
		MinFailures: 3, ProbeBackoff: time.Second, MaxProbeBackoff: 3 * time.Second,
	})
	next := errors.New("dial tcp 10.0.0.5:5432: connect: connection refused") // the handler's answer
	calls := 0
	handle := d.Wrap(func(context.Context, *kgo.Record) error {
		calls++
		return next
	})
	ctx := context.Background()
	for i := range int64(3) {
		err := handle(ctx, held(i))
		if i < 2 && err != nil || i == 2 && !errors.Is(err, ErrFlooded) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if ev := nextEvent(t, events, FloodTripped); ev.Backoff != time.Second || ev.Offset != 2 {
		t.Fatalf("tripped %+v", ev)
	}
	// While tripped the handler is not called, and later records are held.
	if err := handle(ctx, held(3)); !errors.Is(err, ErrFlooded) || calls != 3 {
		t.Fatalf("record after the trip: %v after %d calls", err, calls)
	}
	fc.Advance(999 * time.Millisecond)
	noEvent(t, events)

	wait := time.Millisecond
	for _, want := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		fc.Advance(wait)
		nextEvent(t, events, FloodProbing)
		// A record later than the held one is not a probe: it was polled
		// before the rewind and comes again after offset 2.
		if err := handle(ctx, held(3)); !errors.Is(err, ErrFlooded) {
			t.Fatalf("stale record while probing: %v", err)
		}
		if err := handle(ctx, held(2)); !errors.Is(err, ErrFlooded) {
			t.Fatalf("failed probe: %v", err)
		}
		if ev := nextEvent(t, events, FloodTripped); ev.Backoff != want {
			t.Fatalf("after a failed probe: backoff %v, want %v", ev.Backoff, want)
		}
		fc.Advance(want - time.Millisecond)
		noEvent(t, events)
		wait = time.Millisecond
	}

	fc.Advance(wait)
	nextEvent(t, events, FloodProbing)
	// The probe fails otherwise: the record is bad, not the flood. It is
	// dead-lettered and the next record probes.
	next = Retry("validation.bad_sku", errors.New("unknown sku"))
	before := b.dlqSize(t)
	if err := handle(ctx, held(2)); err != nil {
		t.Fatalf("probe failing otherwise: %v, want it dead-lettered", err)
	}
	if n := b.dlqSize(t); n != before+1 {
		t.Fatalf("DLQ grew by %d, want 1", n-before)
	}
	next = nil
	if err := handle(ctx, held(3)); err != nil {
		t.Fatalf("second probe: %v", err)
	}
	if ev := nextEvent(t, events, FloodWatching); ev.FailedProbes != 3 || ev.Offset != 3 {
		t.Fatalf("resumed %+v", ev)
	}
	// Watching anew: a single failure is dead-lettered.
	next = errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	if err := handle(ctx, held(4)); err != nil {
		t.Fatalf("failure after resuming: %v", err)
	}
	noEvent(t, events)
	if fc.pending() != 0 {
		t.Errorf("%d timers pending after resuming", fc.pending())
	}
}

func TestFloodGuardConfig(t *testing.T) {
	t.Parallel()
	b := setupTopic(t, 1)
	consumer := b.consumer(t)
	autocommit := b.client(t, kgo.ConsumerGroup(testGroup), kgo.ConsumeTopics(testTopic))
	for _, tc := range []struct {
		name string
		c    FloodGuardConfig
		cl   *kgo.Client // the client given to New
		want string
	}{
		{"defaults", FloodGuardConfig{Consumer: consumer}, b.cl, ""},
		{"consumer defaults to New's client", FloodGuardConfig{}, consumer, ""},
		{"producer only", FloodGuardConfig{}, b.cl, "consumes nothing"},
		{"autocommit", FloodGuardConfig{Consumer: autocommit}, b.cl, "autocommits"},
		{"negative window", FloodGuardConfig{Consumer: consumer, Window: -time.Second}, b.cl, "window"},
		{"negative min failures", FloodGuardConfig{Consumer: consumer, MinFailures: -1}, b.cl, "min failures"},
		{"rate above 1", FloodGuardConfig{Consumer: consumer, FailureRate: 1.5}, b.cl, "failure rate"},
		{"negative share", FloodGuardConfig{Consumer: consumer, SameFingerprint: -0.5}, b.cl, "same fingerprint"},
		{"max below backoff", FloodGuardConfig{Consumer: consumer, ProbeBackoff: time.Minute, MaxProbeBackoff: time.Second}, b.cl, "max probe backoff"},
	} {
		_, err := New(tc.cl, FloodGuard(tc.c))
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}

	d, err := New(b.cl, FloodGuard(FloodGuardConfig{Consumer: consumer, ProbeBackoff: 2 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	c := d.guard.cfg
	if c.Window != 30*time.Second || c.MinFailures != 20 || c.FailureRate != 0.5 || c.SameFingerprint != 0.8 ||
		c.ProbeBackoff != 2*time.Minute || c.MaxProbeBackoff != 2*time.Minute {
		t.Errorf("defaults: %+v", c)
	}

	reg := prometheus.NewRegistry()
	if _, err := New(b.cl, FloodGuard(FloodGuardConfig{Consumer: consumer, Registerer: reg})); err != nil {
		t.Fatal(err)
	}
	if _, err := New(b.cl, FloodGuard(FloodGuardConfig{Consumer: consumer, Registerer: reg})); err == nil || !strings.Contains(err.Error(), "register") {
		t.Errorf("a second guard with the same DLQ topic and group on one registry: %v", err)
	}
	if _, err := New(b.cl, Group("other"), FloodGuard(FloodGuardConfig{Consumer: consumer, Registerer: reg})); err != nil {
		t.Errorf("a guard of another group: %v", err)
	}
}

// The flood header never outlives a trip through Redrive: a redelivered
// record that carried one from its last dead-lettering is published without
// it unless the guard marks it again.
func TestFloodHeaderIsReplaced(t *testing.T) {
	t.Parallel()
	b := setupTopic(t, 1)
	d := b.deadLetterer(t)
	src := consumed("k", "v", kgo.RecordHeader{Key: FloodHeader, Value: []byte("0123456789abcdef")},
		kgo.RecordHeader{Key: envelope.HeaderID, Value: []byte(testID)}, kgo.RecordHeader{Key: envelope.HeaderAttempt, Value: []byte("1")})
	if err := d.Publish(context.Background(), src, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if v, ok := headerMap(b.readDLQ(t, 1)[0].Headers)[FloodHeader]; ok {
		t.Errorf("stale %s=%s kept", FloodHeader, v)
	}
}
