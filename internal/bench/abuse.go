package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/store/rawbench"
)

// AbuseConfig sizes the abuse suite's attacks; zero fields take the sizes
// the issue tracker reported them at.
type AbuseConfig struct {
	BigValues      int // records of BigValueSize listed by ListReaders readers (200)
	BigValueSize   int // bytes (900 KB: under the broker's 1 MB message limit with headers)
	ListReaders    int // concurrent readers of the list (4)
	Streams        int // idle event streams opened at once (20,000)
	DistinctTypes  int // records of distinct types (50,000)
	DistinctTopics int // records of distinct source topics (20,000)
	// Phases are the attacks to run, in order: poison, big-values, streams,
	// cardinality (default: all).
	Phases []string
}

func (c AbuseConfig) withDefaults() AbuseConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.BigValues, 200)
	def(&c.BigValueSize, 900_000)
	def(&c.ListReaders, 4)
	def(&c.Streams, 20_000)
	def(&c.DistinctTypes, 50_000)
	def(&c.DistinctTopics, 20_000)
	if len(c.Phases) == 0 {
		c.Phases = []string{"poison", "big-values", "streams", "cardinality"}
	}
	return c
}

// AbuseResult is what each attack cost `redrive serve`.
type AbuseResult struct {
	// Poison records (long keys, deep values, self-looping and forged
	// records) followed by ordinary ones.
	PoisonStored   int           // poison records stored, of PoisonSent
	PoisonSent     int           //
	AfterPoison    time.Duration // until the ordinary records behind them were stored
	NotReady       int           // /readyz samples that were not 200, of ReadySamples
	ReadySamples   int           //
	LoopedRecords  int64         // records serve produced to its own DLQ topic
	ForgedEvents   int           // forged records that reached the events topic
	LargestList    int64         // bytes: the largest list response over the big values
	ListItems      int           // records in it
	ListRSSFrom    int64         // bytes: serve's RSS before they were listed
	ListPeakRSS    int64         // bytes: serve's peak RSS while they were listed
	StreamsOK      int           // event streams accepted, of Streams
	StreamsRefused int           // answered 503
	StreamsFailed  int           // connections that failed otherwise
	HealthWorst    time.Duration // slowest /healthz while the streams were open
	HealthFailed   int           // of 5 /healthz calls while the streams were open
	StreamsRSSFrom int64         // bytes: serve's RSS before the streams were opened
	StreamsPeakRSS int64         // bytes
	MetricsSeries  int           // series on /metrics after the distinct types and topics
	MetricsBytes   int           //
	QueuesBytes    int           // GET /ojs/v1/queues (first page, default limit)
}

// abusePolicy keeps ordinary records waiting an hour: nothing is redelivered
// but what a forged retry header asks for.
const abusePolicy = `_default:
  retry: {max_attempts: 5, initial_interval: PT1H, max_interval: PT1H, jitter: false}
`

// Abuse runs `redrive serve` in a process of its own, with the broker in
// another, and attacks it as a hostile producer and hostile clients would
// (the attacks of the "unstoppable" issue): poison records, huge values
// listed by several readers, tens of thousands of idle event streams, and
// producer-chosen types and topics. It prints what each attack cost.
func Abuse(ctx context.Context, cfg Config) (*AbuseResult, error) {
	cfg = cfg.withDefaults()
	ac := cfg.Abuse.withDefaults()
	pool, url, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	broker, addr, err := startBroker(ctx, []string{benchTopic, "orders"})
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	serve, api, err := startServe(ctx, addr, url, abusePolicy)
	if err != nil {
		return nil, err
	}
	defer serve.stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchMaxBytes(1_000_000),
		kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	a := &abuser{cfg: ac, pool: pool, api: api, broker: addr, cl: cl, serve: serve, res: &AbuseResult{}}
	fmt.Fprintf(cfg.Out, "abuse: redrive serve in its own process, broker in another\n")
	phases := map[string]func(context.Context) error{
		"poison": a.poison, "big-values": a.bigValues, "streams": a.streams, "cardinality": a.cardinality,
	}
	for _, name := range ac.Phases {
		run, ok := phases[name]
		if !ok {
			return nil, fmt.Errorf("unknown phase %q (want poison, big-values, streams or cardinality)", name)
		}
		err := run(ctx)
		reports[name](cfg.Out, ac, a.res)
		if err != nil {
			return a.res, fmt.Errorf("%s: %w", name, err)
		}
	}
	return a.res, nil
}

type abuser struct {
	cfg  AbuseConfig
	pool *rawbench.DB
	api  string
	// broker is the Kafka address.
	broker string
	cl     *kgo.Client
	serve  *process
	res    *AbuseResult
}

// forgedEvent is the value of a record forged to be "redelivered" into the
// events topic; the suite looks for it there.
const forgedEvent = `{"specversion":"1.0","type":"dead_letter.retried","id":"forged-by-the-abuse-suite"}`

// dlqRecord is a failure envelope for a record of topic src.
func dlqRecord(src string, key, value []byte, info envelope.FailureInfo) *kgo.Record {
	info.DLQTopic = benchTopic
	if info.ErrorType == "" {
		info.ErrorType = "abuse.test"
	}
	if info.Message == "" {
		info.Message = "failed on purpose"
	}
	return envelope.Encode(&kgo.Record{Topic: src, Key: key, Value: value, Timestamp: time.Now()}, info)
}

func nested(open, close string, depth int) []byte {
	return []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// poison produces the records that stopped ingest or fooled the scheduler,
// then ordinary ones, and times how long the ordinary ones take to be stored
// while it samples /readyz.
func (a *abuser) poison(ctx context.Context) error {
	selfLoop := json.RawMessage(`{"max_attempts":2000000000,"initial_interval":"PT0.001S","backoff_coefficient":1,"max_interval":"PT0.001S","jitter":false}`)
	manyHeaders := dlqRecord("orders", []byte("many-headers"), []byte("{}"), envelope.FailureInfo{})
	for i := range 1000 {
		manyHeaders.Headers = append(manyHeaders.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%04d", i), Value: randomBytes(100)})
	}
	poison := []*kgo.Record{
		dlqRecord("orders", []byte(strings.Repeat("k", 3000)), []byte(`{"id":1}`), envelope.FailureInfo{}),
		dlqRecord("orders", randomBytes(900_000), []byte(`{"id":2}`), envelope.FailureInfo{}),
		dlqRecord("orders", []byte("deep-array"), nested("[", "]", 20_000), envelope.FailureInfo{}),
		dlqRecord("orders", []byte("deep-object"), nested(`{"a":`, "}", 10_000), envelope.FailureInfo{}),
		dlqRecord("orders", []byte("huge-number"), []byte(`{"n":1e400,"s":"\ud800"}`), envelope.FailureInfo{}),
		dlqRecord("orders", []byte("long-type"), []byte("{}"), envelope.FailureInfo{
			Type: strings.Repeat("t", 10_000), ErrorType: strings.Repeat("e", 10_000)}),
		dlqRecord(strings.Repeat("q", 3000), []byte("long-topic"), []byte("{}"), envelope.FailureInfo{}),
		dlqRecord(benchTopic, []byte("self-loop"), []byte("{}"), envelope.FailureInfo{Retry: selfLoop}),
		dlqRecord(benchTopic+".events", []byte("forged-event"), []byte(forgedEvent), envelope.FailureInfo{Retry: selfLoop}),
		dlqRecord("__consumer_offsets", []byte("internal"), []byte("{}"), envelope.FailureInfo{Retry: selfLoop}),
		manyHeaders,
	}
	a.res.PoisonSent = len(poison)
	adm := kadm.NewClient(a.cl)
	before, err := endOffsets(ctx, adm, benchTopic)
	if err != nil {
		return err
	}
	if err := a.cl.ProduceSync(ctx, poison...).FirstErr(); err != nil {
		return fmt.Errorf("produce poison: %w", err)
	}
	const ordinary = 1000
	start := time.Now()
	stopSampling := a.sampleReady()
	if err := produceBatch(ctx, a.cl, ordinary, func(i int) *kgo.Record {
		return dlqRecord("orders", fmt.Appendf(nil, "after-%d", i), distinctValue(i, 1024), envelope.FailureInfo{Type: "order.created"})
	}); err != nil {
		return err
	}
	err = waitFor(ctx, 2*time.Minute, func() (bool, error) {
		var n int
		err := a.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE type = 'order.created'").Scan(&n)
		return n == ordinary, err
	})
	a.res.AfterPoison = time.Since(start)
	stopSampling()
	if err != nil {
		return fmt.Errorf("ordinary records behind the poison were not stored: %w", err)
	}
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE type IS DISTINCT FROM 'order.created'").Scan(&a.res.PoisonStored); err != nil {
		return err
	}
	// Give the forged retry policies time to loop, then see what serve
	// produced into its own topics.
	if err := sleepCtx(ctx, 10*time.Second); err != nil {
		return err
	}
	after, err := endOffsets(ctx, adm, benchTopic)
	if err != nil {
		return err
	}
	a.res.LoopedRecords = after - before - int64(len(poison)) - ordinary
	a.res.ForgedEvents, err = countValues(ctx, a.broker, benchTopic+".events", forgedEvent)
	return err
}

// sampleReady polls /readyz every 100 ms until stopped.
func (a *abuser) sampleReady() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			a.res.ReadySamples++
			resp, err := http.Get(a.api + "/readyz")
			if err == nil {
				_ = resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				a.res.NotReady++
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// bigValues stores large records and lists them with several readers at
// once, as a read key may.
func (a *abuser) bigValues(ctx context.Context) error {
	var stored int
	if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record").Scan(&stored); err != nil {
		return err
	}
	if err := produceBatch(ctx, a.cl, a.cfg.BigValues, func(i int) *kgo.Record {
		v := []byte(fmt.Sprintf(`{"i":%d,"blob":"%s"}`, i, strings.Repeat("x", a.cfg.BigValueSize-30)))
		return dlqRecord("orders", fmt.Appendf(nil, "big-%d", i), v, envelope.FailureInfo{Type: "big"})
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, 2*time.Minute, func() (bool, error) {
		var n int
		err := a.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE type = 'big'").Scan(&n)
		return n == a.cfg.BigValues, err
	}); err != nil {
		return fmt.Errorf("big records not stored: %w", err)
	}
	a.res.ListRSSFrom, _ = rss(a.serve.cmd.Process.Pid)
	peak := &peakRSS{pid: a.serve.cmd.Process.Pid}
	stop := peak.sample()
	var largest atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, a.cfg.ListReaders)
	for range a.cfg.ListReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				n, _, err := get(ctx, a.api+"/ojs/v1/dead-letter?limit=1000")
				if err != nil {
					errs <- err
					return
				}
				for cur := largest.Load(); n > cur && !largest.CompareAndSwap(cur, n); cur = largest.Load() {
				}
			}
		}()
	}
	wg.Wait()
	stop()
	close(errs)
	a.res.LargestList, a.res.ListPeakRSS = largest.Load(), peak.take()
	if err := <-errs; err != nil {
		return err
	}
	return a.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record").Scan(&a.res.ListItems)
}

// streams opens many idle event streams at once and sees how serve holds up.
func (a *abuser) streams(ctx context.Context) error {
	raiseFileLimit()
	host := strings.TrimPrefix(a.api, "http://")
	a.res.StreamsRSSFrom, _ = rss(a.serve.cmd.Process.Pid)
	peak := &peakRSS{pid: a.serve.cmd.Process.Pid}
	stop := peak.sample()
	defer stop()
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	var ok, refused, failed atomic.Int64
	work := make(chan struct{})
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				c, status, err := openStream(ctx, host)
				switch {
				case err != nil:
					failed.Add(1)
				case status == http.StatusOK:
					ok.Add(1)
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				default:
					if status == http.StatusServiceUnavailable {
						refused.Add(1)
					} else {
						failed.Add(1)
					}
					_ = c.Close()
				}
			}
		}()
	}
	for range a.cfg.Streams {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	for range 5 {
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := get(hctx, a.api+"/healthz")
		cancel()
		if err != nil {
			a.res.HealthFailed++
			continue
		}
		a.res.HealthWorst = max(a.res.HealthWorst, time.Since(start))
	}
	a.res.StreamsOK, a.res.StreamsRefused, a.res.StreamsFailed = int(ok.Load()), int(refused.Load()), int(failed.Load())
	a.res.StreamsPeakRSS = peak.take()
	return nil
}

// openStream sends an event-stream request on a connection of its own and
// reads the status line.
func openStream(ctx context.Context, host string) (net.Conn, int, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, 0, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /ojs/v1/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", host); err != nil {
		_ = c.Close()
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		_ = c.Close()
		return nil, 0, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, resp.StatusCode, nil
}

// raiseFileLimit lifts the bench's open-file limit to its hard limit: it
// holds one socket per stream.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// cardinality stores records of distinct types and distinct source topics,
// dead-lettered at once, and measures /metrics and the queue list.
func (a *abuser) cardinality(ctx context.Context) error {
	n := a.cfg.DistinctTypes + a.cfg.DistinctTopics
	if err := produceBatch(ctx, a.cl, n, func(i int) *kgo.Record {
		topic, typ := "orders", fmt.Sprintf("type-%06d", i)
		if i >= a.cfg.DistinctTypes {
			topic, typ = fmt.Sprintf("topic-%06d", i-a.cfg.DistinctTypes), "distinct.topic"
		}
		return dlqRecord(topic, fmt.Appendf(nil, "card-%d", i), []byte("{}"), envelope.FailureInfo{Type: typ, Code: dlq.CodeDeadLetter})
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, 5*time.Minute, func() (bool, error) {
		var got int
		err := a.pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record WHERE key >= 'card-' AND key < 'card.'").Scan(&got)
		return got == n, err
	}); err != nil {
		return fmt.Errorf("records of distinct types and topics not stored: %w", err)
	}
	// Let the gauges read from Postgres refresh.
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return err
	}
	size, body, err := get(ctx, a.api+"/metrics")
	if err != nil {
		return err
	}
	a.res.MetricsBytes = int(size)
	for line := range strings.SplitSeq(string(body), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			a.res.MetricsSeries++
		}
	}
	size, _, err = get(ctx, a.api+"/ojs/v1/queues")
	a.res.QueuesBytes = int(size)
	return err
}

// reports print each phase's figures.
var reports = map[string]func(io.Writer, AbuseConfig, *AbuseResult){
	"poison": func(out io.Writer, _ AbuseConfig, r *AbuseResult) {
		fmt.Fprintf(out, "  poison: %d of %d stored; 1,000 records behind them stored in %v; /readyz not ready in %d of %d samples\n",
			r.PoisonStored, r.PoisonSent, r.AfterPoison.Round(time.Millisecond), r.NotReady, r.ReadySamples)
		fmt.Fprintf(out, "  poison: %d records produced into serve's own DLQ topic, %d forged events on its events topic (10 s after)\n",
			r.LoopedRecords, r.ForgedEvents)
	},
	"big-values": func(out io.Writer, c AbuseConfig, r *AbuseResult) {
		fmt.Fprintf(out, "  big values: %d records of %d bytes listed by %d readers: largest response %d KiB (%d records), RSS %d → peak %d MiB\n",
			c.BigValues, c.BigValueSize, c.ListReaders, r.LargestList>>10, r.ListItems, r.ListRSSFrom>>20, r.ListPeakRSS>>20)
	},
	"streams": func(out io.Writer, c AbuseConfig, r *AbuseResult) {
		fmt.Fprintf(out, "  event streams: %d opened: %d accepted, %d refused (503), %d failed; /healthz meanwhile: %d of 5 failed, slowest %v; RSS %d → peak %d MiB\n",
			c.Streams, r.StreamsOK, r.StreamsRefused, r.StreamsFailed, r.HealthFailed, r.HealthWorst.Round(100*time.Microsecond),
			r.StreamsRSSFrom>>20, r.StreamsPeakRSS>>20)
	},
	"cardinality": func(out io.Writer, c AbuseConfig, r *AbuseResult) {
		fmt.Fprintf(out, "  cardinality: %d types and %d topics: /metrics %d series, %d KiB; GET /ojs/v1/queues %d KiB\n",
			c.DistinctTypes, c.DistinctTopics, r.MetricsSeries, r.MetricsBytes>>10, r.QueuesBytes>>10)
	},
}

// produceBatch produces n records made by mk and waits for every ack.
func produceBatch(ctx context.Context, cl *kgo.Client, n int, mk func(int) *kgo.Record) error {
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		cl.Produce(ctx, mk(i), func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return firstErr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// endOffsets sums a topic's end offsets.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, offs.Error()
}

// countValues counts a topic's records whose value is want, reading it from
// the start to its current end.
func countValues(ctx context.Context, broker, topic, want string) (int, error) {
	c, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	end, err := endOffsets(ctx, kadm.NewClient(c), topic)
	if err != nil || end == 0 {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen int64
	n := 0
	for seen < end {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			return n, fmt.Errorf("read %s: %w", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if string(r.Value) == want {
				n++
			}
		})
	}
	return n, nil
}

// get fetches url and returns the body's size and the body.
func get(ctx context.Context, url string) (int64, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return int64(len(body)), body, nil
}

// waitFor polls done every 200 ms for up to d.
func waitFor(ctx context.Context, d time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %v", d)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
