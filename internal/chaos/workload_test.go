package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/testdate"
)

// The source topics and what the suite's policies make of their records
// (policiesYAML). Each shows a different path to where a record ends up.
const (
	// orders: retried twice with short backoff; each redelivery completes
	// its record (completion: redelivered, the default) until the suite's
	// consumer fails it, which re-opens the record; so records are
	// exhausted, discarded, archived and pruned (retention.discarded PT1S).
	qOrders = "orders"
	// payments: retried once, completion: ack; the consumer succeeds and
	// acknowledges, so records complete by their acknowledgement, get an
	// archive copy (pruning_policy: archive) and are pruned
	// (retention.completed PT1S).
	qPayments = "payments"
	// emails: one attempt, kept as dead letters; the bulk retry sends them
	// all back, the consumer succeeds without acknowledging, and they stay in
	// Postgres as completed by their redelivery (retention.completed P7D).
	qEmails = "emails"
	// invoices: dead-lettered by the handler (DEAD_LETTER), never
	// redelivered, archived and pruned (dead_letter.retention.max_age PT2S).
	qInvoices = "invoices"

	dlqTopic     = "dead_letter_queue"
	archiveTopic = dlqTopic + ".archive"
	appGroup     = "chaos-app"
)

var queues = []string{qOrders, qPayments, qEmails, qInvoices}

// expectedAttempts are the redelivery attempts each queue's records must
// reach their source topic with (redrive.attempt): orders 2 and 3 (max 3),
// payments 2 (max 2), emails 1 (the bulk retry resets the attempt to 0).
var expectedAttempts = map[string][]int{
	qOrders:   {2, 3},
	qPayments: {2},
	qEmails:   {1},
	qInvoices: nil,
}

const policiesYAML = `# The chaos suite's policies (internal/chaos): short backoff and retention so
# that redelivery, archiving and pruning all happen within seconds.
topics:
  orders:
    retry: {max_attempts: 3, initial_interval: PT0.5S, backoff_coefficient: 2.0, max_interval: PT2S,
            jitter: true, on_exhaustion: discard}
    retention: {discarded: PT1S}
    pruning_policy: delete
  payments:
    retry: {max_attempts: 2, initial_interval: PT0.5S, max_interval: PT2S, jitter: true, on_exhaustion: discard}
    retention: {completed: PT1S}
    pruning_policy: archive
    completion: ack
    ack_timeout: PT10M
  emails:
    retry: {max_attempts: 1, on_exhaustion: dead_letter}
  invoices:
    dead_letter: {retention: {max_age: PT2S}}
`

// key names the n-th DLQ record of queue; keys are unique across the run and
// are how the suite finds a record in Postgres, on its source topic and on
// the archive topic.
func key(queue string, n int) string { return fmt.Sprintf("%s-%06d", queue, n) }

// queueOf returns the queue a key belongs to.
func queueOf(k string) string {
	q, _, _ := strings.Cut(k, "-")
	return q
}

// cause is the handler error each queue's records are dead-lettered with.
func cause(queue string, n int) error {
	switch queue {
	case qInvoices:
		return redrive.DeadLetter("invoice.invalid", fmt.Errorf("invoice %d: total does not match its lines", n))
	case qEmails:
		return redrive.Retry("smtp.unavailable", fmt.Errorf("email %d: 421 service not available", n))
	case qPayments:
		return redrive.Retry("payment.gateway_timeout", fmt.Errorf("payment %d: gateway timed out", n))
	default:
		return redrive.Retry("db.timeout", fmt.Errorf("order %d: context deadline exceeded", n))
	}
}

// kafkaClient returns a client on the suite's broker. A short fetch wait:
// otherwise new data waits for the in-flight long poll (up to 5 s).
func kafkaClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.FetchMaxWait(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// producer dead-letters the workload's records with the client library, as a
// failing consumer would.
type producer struct {
	dl   *redrive.DeadLetterer
	seed uint64

	mu       sync.Mutex
	produced []string // keys, in the order their DLQ write was acknowledged
}

// publish dead-letters record n of queue, retrying until the broker acks it
// (the broker never goes down in this suite; a failure here is the test's).
func (p *producer) publish(ctx context.Context, queue string, n int) error {
	k := key(queue, n)
	src := &kgo.Record{
		Topic:     queue,
		Partition: int32(n % 3),
		Offset:    int64(n),
		Key:       []byte(k),
		Value:     []byte(fmt.Sprintf(`{"key":%q,"n":%d,"seed":%d}`, k, n, p.seed)),
		Timestamp: testdate.Now(),
	}
	var err error
	for try := 0; try < 5; try++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = p.dl.Publish(pctx, src, cause(queue, n))
		cancel()
		if err == nil {
			p.mu.Lock()
			p.produced = append(p.produced, k)
			p.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("dead-letter %s: %w", k, err)
}

// produceAll dead-letters n records of each queue, spread evenly over d.
func (p *producer) produceAll(ctx context.Context, qs []string, n int, d time.Duration) error {
	return p.produceRange(ctx, qs, 0, n, d)
}

// produceRange dead-letters records from to to-1 of each queue, spread
// evenly over d.
func (p *producer) produceRange(ctx context.Context, qs []string, from, to int, d time.Duration) error {
	n := to - from
	var wg sync.WaitGroup
	errs := make(chan error, len(qs))
	for _, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := testdate.Now()
			for i := 0; i < n; i++ {
				// Paced against the start, not per record, so that slow
				// acks do not stretch the run.
				if wait := testdate.Until(start.Add(d * time.Duration(i) / time.Duration(n))); wait > 0 {
					select {
					case <-ctx.Done():
						errs <- ctx.Err()
						return
					case <-time.After(wait):
					}
				}
				if err := p.publish(ctx, q, from+i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (p *producer) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.produced...)
}

// delivery is one record serve produced to a source topic.
type delivery struct {
	topic     string
	key       string
	id        string // redrive.id
	attempt   int    // redrive.attempt
	at        time.Time
	partition int32
	offset    int64
}

// archived is one copy on the archive topic.
type archived struct {
	key   string
	id    string
	state string // redrive.state
	at    time.Time
}

// observer reads the source topics and the archive topic from the start, as
// the ground truth of what serve produced. On the source topics it also plays
// the consumer application: it fails every orders record again, succeeds and
// acknowledges payments, and succeeds on emails.
type observer struct {
	mu         sync.Mutex
	deliveries []delivery
	copies     []archived
	appErrs    []error
	poison     poisonWatch
	// recreating is set once the suite deletes and re-creates topics: the
	// fetches of the old topic ids fail until the client takes the new ones.
	recreating atomic.Bool
}

// runObserver consumes until ctx ends. The client produces the app's repeat
// failures and acknowledgements to the DLQ topic too.
func runObserver(ctx context.Context, cl *kgo.Client, o *observer) error {
	plain, err := redrive.New(cl, redrive.Group(appGroup))
	if err != nil {
		return fmt.Errorf("client library: %w", err)
	}
	acking, err := redrive.New(cl, redrive.Group(appGroup), redrive.AckCompletions())
	if err != nil {
		return fmt.Errorf("client library: %w", err)
	}
	handlers := map[string]redrive.Handler{
		qOrders: plain.Wrap(func(_ context.Context, r *kgo.Record) error {
			return redrive.Retry("db.timeout", fmt.Errorf("order %s: still timing out", r.Key))
		}),
		qPayments: acking.Wrap(func(context.Context, *kgo.Record) error { return nil }),
		qEmails:   plain.Wrap(func(context.Context, *kgo.Record) error { return nil }),
		qInvoices: plain.Wrap(func(context.Context, *kgo.Record) error { return nil }),
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			gone := errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) && !(gone && o.recreating.Load()) {
				o.mu.Lock()
				o.appErrs = append(o.appErrs, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
				o.mu.Unlock()
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == dlqTopic || r.Topic == eventsTopic {
				o.watchOwnTopic(r)
				return
			}
			if r.Topic == archiveTopic {
				o.mu.Lock()
				o.copies = append(o.copies, archived{key: string(r.Key), id: header(r, envelope.HeaderID),
					state: header(r, "redrive.state"), at: r.Timestamp})
				o.mu.Unlock()
				return
			}
			attempt, _ := strconv.Atoi(header(r, envelope.HeaderAttempt))
			o.mu.Lock()
			o.deliveries = append(o.deliveries, delivery{topic: r.Topic, key: string(r.Key), id: header(r, envelope.HeaderID),
				attempt: attempt, at: r.Timestamp, partition: r.Partition, offset: r.Offset})
			o.mu.Unlock()
			// A publish fails only if the broker does; it never goes down here.
			if err := handlers[r.Topic](ctx, r); err != nil && ctx.Err() == nil {
				o.mu.Lock()
				o.appErrs = append(o.appErrs, fmt.Errorf("consumer app on %s: %w", r.Key, err))
				o.mu.Unlock()
			}
		})
	}
	return nil
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// poisonSnapshot copies what the observer saw of poison records.
func (o *observer) poisonSnapshot() poisonWatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return poisonWatch{looped: append([]string(nil), o.poison.looped...), forged: o.poison.forged}
}

// snapshot copies what the observer has seen so far.
func (o *observer) snapshot() ([]delivery, []archived, []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]delivery(nil), o.deliveries...), append([]archived(nil), o.copies...), append([]error(nil), o.appErrs...)
}

// api talks to serve's HTTP API. serve is killed and restarted under it, so
// every caller retries.
type api struct {
	base string
	hc   *http.Client
}

func newAPI(addr string) *api {
	return &api{base: "http://" + addr, hc: &http.Client{Timeout: 5 * time.Second}}
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (a *api) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %s: %w", method, path, b, err)
		}
	}
	return resp.StatusCode, nil
}

// apiRecord is the part of a record the suite reads.
type apiRecord struct {
	ID          string `json:"id"`
	Queue       string `json:"queue"`
	Key         string `json:"key"`
	State       string `json:"state"`
	Exhaustion  string `json:"exhaustion"`
	CompletedBy string `json:"completed_by"`
	Attempt     int    `json:"attempt"`
	Archive     *struct {
		State string `json:"state"`
	} `json:"archive"`
}

// records lists every stored record through the API, page by page.
func (a *api) records(ctx context.Context) ([]apiRecord, error) {
	var all []apiRecord
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []apiRecord `json:"items"`
			Pagination struct {
				HasMore    bool   `json:"has_more"`
				NextCursor string `json:"next_cursor"`
			} `json:"pagination"`
		}
		if _, err := a.do(ctx, http.MethodGet, "/ojs/v1/dead-letter?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if !page.Pagination.HasMore {
			return all, nil
		}
		cursor = page.Pagination.NextCursor
	}
}

// task is the part of a bulk task the suite reads.
type task struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	State     string `json:"state"`
	Total     int64  `json:"total"`
	Processed int64  `json:"processed"`
	Errors    []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// bulkRetry is the operator's bulk retry of every emails dead letter, through
// the API, while the chaos runs.
type bulkRetry struct {
	api  *api
	want int     // emails records to wait for before retrying
	rate float64 // rate_limit of the task (records/s); 0 = unlimited
	logf func(format string, args ...any)

	mu      sync.Mutex
	tasks   []task // every task created, latest state
	running bool   // a task was created and the retry has not completed
}

func (b *bulkRetry) isRunning() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}

func (b *bulkRetry) snapshot() []task {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]task(nil), b.tasks...)
}

var emailsFilter = map[string]any{"queue": qEmails}

// run waits until every emails record is stored as a dead letter, creates the
// bulk retry task and follows it to the end. A task that fails (the task
// runner gives up after repeated batch errors, e.g. while Postgres is down) is
// reported and created again, as an operator would: every emails record must
// be redelivered in the end.
func (b *bulkRetry) run(ctx context.Context, notBefore time.Time) error {
	if err := sleepUntil(ctx, notBefore); err != nil {
		return err
	}
	// A bulk retry only takes records stored before its task: wait for all.
	for {
		var l struct {
			Pagination struct {
				Total int `json:"total"`
			} `json:"pagination"`
		}
		_, err := b.api.do(ctx, http.MethodGet, "/ojs/v1/dead-letter?queue="+qEmails+"&state=discarded&limit=1", nil, &l)
		if err == nil && l.Pagination.Total >= b.want {
			break
		}
		if serr := sleep(ctx, 200*time.Millisecond); serr != nil {
			return fmt.Errorf("wait for %d emails dead letters (last: %d, %v): %w", b.want, l.Pagination.Total, err, serr)
		}
	}
	for attempt := 1; ; attempt++ {
		id, err := b.create(ctx)
		if err != nil {
			return err
		}
		t, err := b.follow(ctx, id)
		if err != nil {
			return err
		}
		if t.State == "completed" {
			b.mu.Lock()
			b.running = false
			b.mu.Unlock()
			return nil
		}
		var msgs []string
		for _, e := range t.Errors {
			msgs = append(msgs, e.Message)
		}
		b.logf("bulk retry task %s ended %s after %d of %d records (%d errors, last: %q); creating it again",
			t.ID, t.State, t.Processed, t.Total, len(msgs), last(msgs))
		if attempt >= 5 {
			return fmt.Errorf("bulk retry: %d tasks ended without completing, the last %s", attempt, t.State)
		}
	}
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// create makes the task, retrying while serve is down. A POST whose answer
// was lost (serve killed after it committed) may have created the task: an
// open retry task is looked for before posting again.
func (b *bulkRetry) create(ctx context.Context) (string, error) {
	for {
		var tl struct {
			Items []task `json:"items"`
		}
		if _, err := b.api.do(ctx, http.MethodGet, "/ojs/v1/tasks?limit=100", nil, &tl); err == nil {
			for _, t := range tl.Items {
				if t.Kind == "retry" && (t.State == "pending" || t.State == "running") {
					b.track(t)
					return t.ID, nil
				}
			}
			var dry struct {
				WouldAffect int64 `json:"would_affect"`
			}
			if _, err := b.api.do(ctx, http.MethodPost, "/ojs/v1/dead-letter/retry",
				map[string]any{"filter": emailsFilter}, &dry); err == nil {
				b.logf("bulk retry dry run: would affect %d emails records", dry.WouldAffect)
			}
			body := map[string]any{"filter": emailsFilter, "confirm": true}
			if b.rate > 0 {
				body["rate_limit"] = b.rate
			}
			var created struct {
				Task task `json:"task"`
			}
			code, err := b.api.do(ctx, http.MethodPost, "/ojs/v1/dead-letter/retry", body, &created)
			if err == nil && code == http.StatusAccepted {
				b.logf("bulk retry task %s created for %d emails records (rate_limit %v)", created.Task.ID, created.Task.Total, b.rate)
				b.track(created.Task)
				return created.Task.ID, nil
			}
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return "", fmt.Errorf("create bulk retry task: %w", err)
		}
	}
}

// track records a task's latest state.
func (b *bulkRetry) track(t task) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = true
	for i := range b.tasks {
		if b.tasks[i].ID == t.ID {
			b.tasks[i] = t
			return
		}
	}
	b.tasks = append(b.tasks, t)
}

// follow polls a task until it is finished.
func (b *bulkRetry) follow(ctx context.Context, id string) (task, error) {
	for {
		var t task
		if _, err := b.api.do(ctx, http.MethodGet, "/ojs/v1/tasks/"+id, nil, &t); err == nil {
			b.track(t)
			switch t.State {
			case "completed", "failed", "cancelled":
				return t, nil
			}
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return t, fmt.Errorf("follow bulk retry task %s: %w", id, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func sleepUntil(ctx context.Context, at time.Time) error {
	if d := testdate.Until(at); d > 0 {
		return sleep(ctx, d)
	}
	return ctx.Err()
}

// The serve counters the monitor reads to tell what serve was doing when it
// was killed.
var activityMetrics = map[string]string{
	"redrive_ingest_records_total":  "ingest",
	"redrive_redelivered_total":     "redelivery",
	"ojs_dead_letter_retried_total": "bulk retry",
	"redrive_pruned_records_total":  "pruning",
	"redrive_archived_total":        "archive",
}

// pausedMetric is 1 while ingest waits for Postgres.
const pausedMetric = "redrive_ingest_paused"

// sample is one scrape of serve's counters.
type sample struct {
	gen    int
	at     time.Time
	values map[string]float64 // metric name → sum over its series
}

// monitor scrapes serve's /metrics a few times a second, so that each kill
// can be labelled with what serve was doing in the second before it.
type monitor struct {
	api   *api
	serve *serveProc

	mu      sync.Mutex
	samples []sample    // of the current generation only
	paused  []time.Time // scrapes that found ingest paused
}

// pausedAt lists the scrapes that found ingest paused.
func (m *monitor) pausedAt() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.paused...)
}

func (m *monitor) run(ctx context.Context) {
	for ctx.Err() == nil {
		gen, _ := m.serve.current()
		values, err := m.scrape(ctx)
		if now, _ := m.serve.current(); err == nil && now == gen {
			m.mu.Lock()
			if len(m.samples) > 0 && m.samples[0].gen != gen {
				m.samples = m.samples[:0]
			}
			m.samples = append(m.samples, sample{gen: gen, at: testdate.Now(), values: values})
			if values[pausedMetric] > 0 {
				m.paused = append(m.paused, testdate.Now())
			}
			if len(m.samples) > 40 {
				m.samples = append(m.samples[:0], m.samples[len(m.samples)-20:]...)
			}
			m.mu.Unlock()
		}
		_ = sleep(ctx, 200*time.Millisecond)
	}
}

func (m *monitor) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.api.base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	resp, err := m.api.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %d", resp.StatusCode)
	}
	values := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ = strings.Cut(name, "{")
		if _, want := activityMetrics[name]; !want && name != pausedMetric {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i >= 0 {
			rest = line[i+1:]
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err == nil {
			values[name] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return values, nil
}

// activity says what the generation gen of serve did in the last second or
// so before now: the counters that grew. A process younger than that counts
// from zero. "starting" means serve had not answered a scrape yet.
func (m *monitor) activity(gen int, started time.Time, extra ...string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur []sample
	for _, s := range m.samples {
		if s.gen == gen {
			cur = append(cur, s)
		}
	}
	set := map[string]bool{}
	for _, e := range extra {
		set[e] = true
	}
	if len(cur) == 0 {
		set["starting"] = true
	} else {
		latest := cur[len(cur)-1]
		base := sample{at: started, values: map[string]float64{}}
		for _, s := range cur {
			if latest.at.Sub(s.at) >= time.Second {
				base = s
			}
		}
		for name, label := range activityMetrics {
			if latest.values[name] > base.values[name] {
				set[label] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = append(out, "nothing (idle)")
	}
	return out
}
