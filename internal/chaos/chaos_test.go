package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/testdate"
)

// mode sizes a run. The short mode runs in `make test`; the full one in
// `make chaos` (REDRIVE_CHAOS=full).
type mode struct {
	name      string
	kills     int           // SIGKILLs of serve
	pgStops   int           // Postgres stops
	pgStopFor time.Duration // how long each stop lasts
	perQueue  int           // DLQ records per source topic
	// produceFor spreads the orders, payments and invoices records over this
	// long (emails come first, all at once: the bulk retry waits for them).
	produceFor time.Duration
	// window is the span the kills and stops are spread over, from the
	// moment serve is first ready.
	window time.Duration
	// bulkAt is the earliest the bulk retry starts (after serve is ready),
	// and bulkRate its rate_limit (records/s, 0 = unlimited).
	bulkAt   time.Duration
	bulkRate float64
	// quiesce bounds the wait for the end state after the last disruption.
	// A claim orphaned by a kill is rescued only after its lease (30 s).
	quiesce time.Duration
	limit   time.Duration // the whole run
	// poisonRounds is how many rounds of poison records (one of each kind,
	// poison_test.go) are spread over produceFor.
	poisonRounds int
}

var (
	// Short: ten seconds of chaos, small enough for `make test` on two
	// cores. A kill can leave a claim or the bulk task leased to the dead
	// process for 30 s, which the run then waits for: the window is kept
	// short so that even then it ends within about 40 s, and the bulk retry
	// is unthrottled (a task lasting milliseconds is rarely hit).
	shortMode = mode{name: "short", kills: 3, pgStops: 1, pgStopFor: 3 * time.Second, perQueue: 150,
		produceFor: 8 * time.Second, window: 10 * time.Second, bulkAt: 2 * time.Second, bulkRate: 0,
		quiesce: 75 * time.Second, limit: 4 * time.Minute, poisonRounds: 2}
	// Full: 24 kills and two 20 s stops over three minutes while 6,000
	// records flow in; the bulk retry is throttled (30 records/s) so that
	// kills hit it while it works.
	fullMode = mode{name: "full", kills: 24, pgStops: 2, pgStopFor: 20 * time.Second, perQueue: 1500,
		produceFor: 160 * time.Second, window: 180 * time.Second, bulkAt: 40 * time.Second, bulkRate: 30,
		quiesce: 150 * time.Second, limit: 25 * time.Minute, poisonRounds: 10}
)

// disruption is something the suite did to serve or Postgres.
type disruption struct {
	kind     string // "kill", "postgres stop" or "exit" (serve exited on its own)
	at, end  time.Time
	gen      int      // the serve process killed
	activity []string // what serve was doing just before a kill
}

// planned is a disruption of the schedule, at an offset from the start.
type planned struct {
	kind string
	at   time.Duration
}

// plan spreads the stops and kills over the window: each stop at a random
// point of its share of the window, and the kills over the time left
// between the stops, each at a random point of its share (stratified, so that
// the kills reach every phase of the workload) and at least a second apart.
// Kills stay a second clear of a stop before it and 1.5 s after it: a kill
// while Postgres is down finds serve doing nothing but waiting.
func plan(rng *rand.Rand, m mode) []planned {
	type span struct{ from, to time.Duration }
	var out []planned
	var blocked []span
	if m.pgStops > 0 {
		slot := m.window / time.Duration(m.pgStops)
		for i := 0; i < m.pgStops; i++ {
			at := slot*time.Duration(i) + time.Second
			if room := slot - m.pgStopFor - 2*time.Second; room > 0 {
				at += time.Duration(rng.Int64N(int64(room)))
			}
			out = append(out, planned{"postgres stop", at})
			blocked = append(blocked, span{at - time.Second, at + m.pgStopFor + 1500*time.Millisecond})
		}
	}
	free := m.window
	for _, b := range blocked {
		free -= b.to - b.from
	}
	// toWindow maps an offset into the free time onto the window.
	toWindow := func(u time.Duration) time.Duration {
		at := u
		for _, b := range blocked {
			if at >= b.from {
				at += b.to - b.from
			}
		}
		return at
	}
	slot := free / time.Duration(m.kills)
	prev := time.Duration(-1 << 62)
	for i := 0; i < m.kills; i++ {
		at := toWindow(slot*time.Duration(i) + time.Duration(rng.Int64N(int64(slot))))
		if at < prev+time.Second {
			at = prev + time.Second
		}
		prev = at
		out = append(out, planned{"kill", at})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

func chosenMode(t *testing.T) mode {
	switch v := os.Getenv("REDRIVE_CHAOS"); v {
	case "", "short":
		return shortMode
	case "full":
		return fullMode
	default:
		t.Fatalf("REDRIVE_CHAOS=%q: want full or short (empty)", v)
		return mode{}
	}
}

func chosenSeed(t *testing.T) uint64 {
	if v := os.Getenv("REDRIVE_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("REDRIVE_CHAOS_SEED=%q: want an unsigned integer", v)
		}
		return s
	}
	return uint64(testdate.Now().UnixNano())
}

// logDir is REDRIVE_CHAOS_LOGS (kept), else a temporary directory.
func logDir(t *testing.T) (string, bool) {
	if dir := os.Getenv("REDRIVE_CHAOS_LOGS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("REDRIVE_CHAOS_LOGS: %v", err)
		}
		return dir, true
	}
	return t.TempDir(), false
}

// TestChaos runs serve under kill -9 and Postgres stops while records are
// ingested, redelivered, bulk-retried, archived and pruned, and checks that
// none is lost and every duplicate redelivery is one the docs allow.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite skipped under -short: it builds redrive and runs a broker, Postgres and serve as processes for tens of seconds (make chaos runs the full suite)")
	}
	m := chosenMode(t)
	seed := chosenSeed(t)
	t.Logf("chaos: mode %s, seed %d (REDRIVE_CHAOS_SEED=%d reproduces the schedule and workload)", m.name, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x6368616f73))
	ctx, cancel := context.WithTimeout(context.Background(), m.limit)
	defer cancel()

	dir, keep := logDir(t)
	bin := binary(ctx, t)
	begin := testdate.Now()

	pg, dbURL := startPostgres(ctx, t)
	if keep {
		// pgcluster removes its directory, server log included, on Stop;
		// this cleanup runs before that one.
		t.Cleanup(func() { copyFile(filepath.Join(pg.SocketDir(), "postgres.log"), filepath.Join(dir, "postgres.log")) })
	}
	br := startBroker(ctx, t, bin, dir, append([]string{dlqTopic, archiveTopic, qPoison}, queues...))
	policies := t.TempDir()
	if err := os.WriteFile(filepath.Join(policies, "chaos.yaml"), []byte(policiesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr := freeAddr(t)
	srv := startServe(t, bin, dir, serveEnv(map[string]string{
		"REDRIVE_KAFKA_BROKERS": br.addr,
		"REDRIVE_DATABASE_URL":  dbURL,
		"REDRIVE_HTTP_ADDR":     httpAddr,
		"REDRIVE_AUTH_DISABLED": "true",
		"REDRIVE_POLICIES_DIR":  policies,
		// The policies retry every half second (below the default floor).
		"REDRIVE_RETRY_MIN_INTERVAL": "500ms",
		// serve migrates the empty database on its first start.
		"REDRIVE_MIGRATE_ON_START": "true",
		// The same instance id on every restart: kfake's classic groups can
		// strand a SIGKILLed dynamic member for good; a static member gets
		// its partitions back when it rejoins.
		"REDRIVE_GROUP_INSTANCE_ID":       "redrive-chaos-0",
		"REDRIVE_KAFKA_SESSION_TIMEOUT":   "6s",
		"REDRIVE_KAFKA_REBALANCE_TIMEOUT": "10s",
		"REDRIVE_PRUNE_INTERVAL":          "1s",
		"REDRIVE_REPLAY_INTERVAL":         "1h",
		"REDRIVE_SHUTDOWN_GRACE":          "5s",
	}))
	var stopOnce sync.Once
	stopCode := 0
	stopServe := func() { stopOnce.Do(func() { stopCode = srv.stop(20 * time.Second) }) }
	t.Cleanup(stopServe)
	defer func() {
		if t.Failed() && !keep {
			t.Logf("serve log (last lines; set REDRIVE_CHAOS_LOGS=dir to keep every log):%s", tail(srv.logPath, 60))
		}
	}()

	a := newAPI(httpAddr)
	if err := waitReady(ctx, a, 60*time.Second); err != nil {
		t.Fatalf("serve never became ready: %v%s", err, tail(srv.logPath, 40))
	}
	t0 := testdate.Now()
	t.Logf("chaos: postgres, broker %s and serve on %s up in %v", br.addr, httpAddr, t0.Sub(begin).Round(time.Millisecond))

	// The consumer application and the observer of every source and archive record.
	obsCl, err := kafkaClient(br.addr, kgo.ConsumeTopics(append([]string{archiveTopic, dlqTopic, eventsTopic}, queues...)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer obsCl.Close()
	obs := &observer{}
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWork(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := runObserver(wctx, obsCl, obs); err != nil {
			t.Errorf("observer: %v", err)
		}
	}()

	mon := &monitor{api: a, serve: srv}
	wg.Add(1)
	go func() { defer wg.Done(); mon.run(wctx) }()

	prodCl, err := kafkaClient(br.addr, kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prodCl.Close()
	dl, err := redrive.New(prodCl, redrive.Group(appGroup))
	if err != nil {
		t.Fatal(err)
	}
	prod := &producer{dl: dl, seed: seed}
	prodDone := make(chan error, 1)
	var prodTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		// emails first, all of them: the bulk retry only takes records stored
		// before its task, and waits for every one.
		err := prod.produceAll(wctx, []string{qEmails}, m.perQueue, 500*time.Millisecond)
		if err == nil {
			err = prod.produceAll(wctx, []string{qOrders, qPayments, qInvoices}, m.perQueue, m.produceFor)
		}
		prodTook = testdate.Since(t0) // read after the send below
		prodDone <- err
	}()

	poisonCl, err := kafkaClient(br.addr, kgo.ProducerBatchMaxBytes(2<<20), kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer poisonCl.Close()
	poison := &poisoner{cl: poisonCl}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := poison.run(wctx, m.poisonRounds, m.produceFor); err != nil && wctx.Err() == nil {
			t.Errorf("poison records: %v", err)
		}
	}()

	bulk := &bulkRetry{api: a, want: m.perQueue, rate: m.bulkRate, logf: t.Logf}
	bulkDone := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); bulkDone <- bulk.run(wctx, t0.Add(m.bulkAt)) }()

	// The chaos itself.
	events := plan(rng, m)
	var disruptions []disruption
	kills, stops := 0, 0
	for _, ev := range events {
		if err := sleepUntil(ctx, t0.Add(ev.at)); err != nil {
			t.Fatalf("chaos schedule: %v", err)
		}
		switch ev.kind {
		case "kill":
			gen, started := srv.current()
			var extra []string
			if bulk.isRunning() {
				// Open, though not necessarily worked on: a task leased to
				// a killed process waits for its lease (30 s).
				extra = append(extra, "bulk task open")
			}
			act := mon.activity(gen, started, extra...)
			at, gen, err := srv.kill()
			if err != nil {
				t.Fatalf("chaos: %v", err)
			}
			kills++
			disruptions = append(disruptions, disruption{kind: "kill", at: at, end: at, gen: gen, activity: act})
			t.Logf("chaos: kill %d/%d at +%.1fs: serve #%d (up %.1fs) during %s", kills, m.kills,
				at.Sub(t0).Seconds(), gen, at.Sub(started).Seconds(), strings.Join(act, ", "))
		case "postgres stop":
			srv.note("stopping postgres for %v", m.pgStopFor)
			from := testdate.Now()
			if err := pg.Pause(); err != nil {
				t.Fatalf("chaos: stop postgres: %v", err)
			}
			stopped := testdate.Now()
			_ = sleep(ctx, m.pgStopFor)
			if err := pg.Resume(ctx); err != nil {
				t.Fatalf("chaos: start postgres again: %v", err)
			}
			stops++
			srv.note("postgres started again")
			disruptions = append(disruptions, disruption{kind: "postgres stop", at: from, end: testdate.Now()})
			t.Logf("chaos: postgres stop %d/%d at +%.1fs: down %.1fs (shutdown took %v)", stops, m.pgStops,
				from.Sub(t0).Seconds(), testdate.Since(stopped).Seconds(), stopped.Sub(from).Round(time.Millisecond))
		}
	}
	lastDisruption := testdate.Now()

	if err := waitErr(ctx, prodDone); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("chaos: all %d DLQ records were produced by +%.1fs", len(prod.keys()), prodTook.Seconds())

	res := quiesce(ctx, t, quiesceInput{api: a, dbURL: dbURL, obs: obs, prod: prod, bulk: bulk, bulkDone: bulkDone,
		deadline: lastDisruption.Add(m.quiesce)})

	// The topic-recreation phase (recreate_test.go): new topic ids for the
	// DLQ, orders and archive topics under the running serve, then a second
	// batch through them, with a kill in the middle.
	recreatedAt := testdate.Now()
	obs.recreating.Store(true)
	if err := recreateTopics(ctx, br.addr, obsCl, prodCl, poisonCl); err != nil {
		t.Fatalf("chaos: recreate topics: %v", err)
	}
	obsCl.AddConsumeTopics(recreated...)
	srv.note("recreated topics %v", recreated)
	t.Logf("chaos: recreated %v at +%.1fs", recreated, recreatedAt.Sub(t0).Seconds())
	second := make(chan error, 1)
	go func() {
		second <- prod.produceRange(wctx, []string{qOrders, qPayments, qInvoices}, m.perQueue, m.perQueue+m.perQueue/5, m.window/4)
	}()
	if err := sleep(ctx, m.window/8); err != nil {
		t.Fatal(err)
	}
	gen, started := srv.current()
	act := mon.activity(gen, started)
	at, gen, err := srv.kill()
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	disruptions = append(disruptions, disruption{kind: "kill", at: at, end: at, gen: gen, activity: act})
	t.Logf("chaos: kill after the recreation at +%.1fs: serve #%d during %s", at.Sub(t0).Seconds(), gen, strings.Join(act, ", "))
	if err := waitErr(ctx, second); err != nil {
		t.Fatalf("workload after the recreation: %v", err)
	}
	res = quiesce(ctx, t, quiesceInput{api: a, dbURL: dbURL, obs: obs, prod: prod, bulk: bulk, bulkFinished: true,
		deadline: testdate.Now().Add(m.quiesce)})
	// Records whose copy went down with the old archive topic are copied
	// again: wait for the archiver to get to them.
	var stale []string
	var archivedPoison int
	for wait := testdate.Now().Add(60 * time.Second); ; {
		_, copies, _ := obs.snapshot()
		if stale, archivedPoison, err = archivedBefore(ctx, dbURL, copies, recreatedAt); err != nil {
			t.Errorf("archive copies after the recreation: %v", err)
		}
		if len(stale) == 0 || testdate.Now().After(wait) {
			break
		}
		_ = sleep(ctx, 500*time.Millisecond)
	}
	// A duplicate produced just before quiescence reaches the observer a
	// fetch later.
	_ = sleep(ctx, time.Second)
	stopWork()
	wg.Wait()
	stopServe()
	runtime := testdate.Since(begin)

	for _, e := range srv.selfExits() {
		disruptions = append(disruptions, disruption{kind: "exit", at: e.at, end: e.at, gen: e.gen})
		t.Logf("chaos: serve #%d exited on its own at +%.1fs with code %d", e.gen, e.at.Sub(t0).Seconds(), e.code)
	}
	deliveries, copies, appErrs := obs.snapshot()
	var poisonStored []apiRecord
	workload := res.records[:0:0]
	for _, r := range res.records {
		if strings.HasPrefix(r.Key, poisonPrefix) {
			poisonStored = append(poisonStored, r)
		} else {
			workload = append(workload, r)
		}
	}
	rep := verify(prod.keys(), workload, deliveries, copies, disruptions)
	poisonLost, err := poisonMissing(ctx, dbURL, poison.keys())
	if err != nil {
		t.Errorf("look up the poison records: %v", err)
	}
	watch := obs.poisonSnapshot()
	paused := pausedOutsideStops(mon.pausedAt(), disruptions)
	tasks := bulk.snapshot()
	failedTasks := 0
	for _, tk := range tasks {
		if tk.State == "failed" {
			failedTasks++
		}
	}
	during := map[string]int{}
	for _, d := range disruptions {
		for _, a := range d.activity {
			during[a]++
		}
	}
	t.Logf("chaos: kills during: %s", countList(during))
	t.Logf("chaos summary: mode=%s seed=%d kills=%d postgres_stops=%d serve_exits=%d records=%d deliveries=%d "+
		"duplicates=%d (explained=%d unexplained=%d) lost=%d missing_deliveries=%d in_postgres=%d pruned_archived=%d "+
		"bulk_tasks=%d (failed=%d) quiesced_in=%.1fs runtime=%.1fs",
		m.name, seed, kills, stops, len(srv.selfExits()), rep.records, rep.deliveries,
		rep.duplicates, rep.explained, rep.unexplained, len(rep.lost), len(rep.missing), rep.inPostgres, rep.pruned,
		len(tasks), failedTasks, res.waited.Seconds(), runtime.Seconds())

	t.Logf("chaos poison: sent=%d stored=%d lost=%d produced_into_own_dlq=%d forged_events=%d ingest_paused_samples=%d (outside postgres stops: %d)",
		len(poison.keys()), len(poisonStored), len(poisonLost), len(watch.looped), watch.forged, len(mon.pausedAt()), len(paused))

	for _, line := range rep.explanations {
		t.Logf("chaos: duplicate %s", line)
	}
	check := func(what string, items []string) {
		if len(items) > 0 {
			t.Errorf("%s: %d, e.g. %s", what, len(items), strings.Join(first(items, 10), "; "))
		}
	}
	check("LOST records (neither in Postgres nor on the archive topic)", rep.lost)
	check("redeliveries that never reached their source topic", rep.missing)
	check("unexplained duplicate redeliveries (no kill or Postgres stop between them)", rep.unexplainedList)
	check("redeliveries no policy asked for", rep.unexpected)
	check("records stored twice without any duplicate delivery", rep.splitRows)
	check("stored records the workload never produced", rep.foreign)
	check("stored records not in the state their queue's policy ends in (completion)", rep.wrongState)
	check("LOST poison records (not in Postgres)", poisonLost)
	check("poison records whose archive copy went with the deleted archive topic and was not made again", stale)
	t.Logf("chaos recreation: %d poison records discarded, %d without a copy on the new archive topic", archivedPoison, len(stale))
	check("poison records serve produced into its own DLQ topic", watch.looped)
	check("ingest paused with no Postgres stop to explain it, at", paused)
	if watch.forged > 0 {
		t.Errorf("forged events on %s: %d (serve produced a record into its own events topic)", eventsTopic, watch.forged)
	}
	if len(poison.keys()) == 0 {
		t.Errorf("no poison record was produced")
	}
	var errs []string
	for _, e := range appErrs {
		errs = append(errs, e.Error())
	}
	check("consumer application errors", errs)
	if rep.pruned == 0 {
		t.Errorf("no record was pruned: the run did not exercise pruning")
	}
	if kills != m.kills || stops != m.pgStops {
		t.Errorf("ran %d kills and %d postgres stops, want %d and %d", kills, stops, m.kills, m.pgStops)
	}
	if m.name == "full" {
		for _, want := range []string{"ingest", "redelivery", "bulk retry", "pruning"} {
			if during[want] == 0 {
				t.Errorf("no kill hit serve during %s (kills during: %s)", want, countList(during))
			}
		}
	}
	if exits := srv.selfExits(); len(exits) > 0 {
		t.Errorf("serve exited on its own %d times (not killed): see the log", len(exits))
	}
	if stopCode != 0 {
		t.Errorf("serve exited with %d after SIGTERM at the end, want 0", stopCode)
	}
}

func countList(m map[string]int) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func waitErr(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitReady waits for serve's /readyz to answer 200.
func waitReady(ctx context.Context, a *api, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var err error
	for {
		if _, err = a.do(ctx, "GET", "/readyz", nil, nil); err == nil {
			return nil
		}
		if serr := sleep(ctx, 100*time.Millisecond); serr != nil {
			return fmt.Errorf("%w (last: %v)", serr, err)
		}
	}
}

func copyFile(from, to string) {
	if b, err := os.ReadFile(from); err == nil {
		_ = os.WriteFile(to, b, 0o644)
	}
}
