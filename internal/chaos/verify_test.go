package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/testdate"
)

type quiesceInput struct {
	api      *api
	dbURL    string
	obs      *observer
	prod     *producer
	bulk     *bulkRetry
	bulkDone <-chan error
	// bulkFinished: the bulk retry's end was seen by an earlier quiesce.
	bulkFinished bool
	deadline     time.Time
}

type quiesceResult struct {
	records []apiRecord // every stored record, read through the API at the end
	waited  time.Duration
}

// quiesce waits until the workload has run its course — the bulk retry
// completed, every redelivery the policies ask for reached its source topic
// and got its outcome (a repeat failure, an acknowledgement), every record is
// stored or has its copy on the archive topic, and no claim orphaned by a
// kill may still deliver again (see openWork) — then reads every stored
// record.
func quiesce(ctx context.Context, t *testing.T, in quiesceInput) quiesceResult {
	t.Helper()
	start := testdate.Now()
	var bulkErr error
	bulkFinished := in.bulkFinished
	lastLog := start
	for {
		if !bulkFinished {
			select {
			case bulkErr = <-in.bulkDone:
				bulkFinished = true
				if bulkErr != nil {
					t.Errorf("bulk retry: %v", bulkErr)
				}
			default:
			}
		}
		why := notSettled(ctx, in, bulkFinished)
		if why == "" {
			break
		}
		if testdate.Since(lastLog) >= 5*time.Second {
			t.Logf("chaos: waiting for quiescence: %s", why)
			lastLog = testdate.Now()
		}
		if testdate.Now().After(in.deadline) || ctx.Err() != nil {
			t.Errorf("no quiescence %v after the last disruption: %s", testdate.Since(start).Round(time.Second), why)
			break
		}
		_ = sleep(ctx, 500*time.Millisecond)
	}
	waited := testdate.Since(start)
	var recs []apiRecord
	var err error
	for try := 0; try < 60; try++ {
		if recs, err = in.api.records(ctx); err == nil {
			return quiesceResult{records: recs, waited: waited}
		}
		_ = sleep(ctx, 500*time.Millisecond)
	}
	t.Fatalf("list records through the API: %v", err)
	return quiesceResult{}
}

// notSettled says what the run is still waiting for, or "" when nothing.
func notSettled(ctx context.Context, in quiesceInput, bulkFinished bool) string {
	var why []string
	if !bulkFinished {
		why = append(why, "the bulk retry has not completed")
	}
	deliveries, copies, _ := in.obs.snapshot()
	seen := map[string]bool{}
	for _, d := range deliveries {
		seen[fmt.Sprintf("%s@%d", d.key, d.attempt)] = true
	}
	copied := map[string]bool{}
	for _, c := range copies {
		copied[c.key] = true
	}
	missing := 0
	var uncopied [][]byte
	for _, k := range in.prod.keys() {
		q := queueOf(k)
		for _, a := range expectedAttempts[q] {
			if !seen[fmt.Sprintf("%s@%d", k, a)] {
				missing++
			}
		}
		if q != qEmails && !copied[k] {
			uncopied = append(uncopied, []byte(k))
		}
	}
	if missing > 0 {
		why = append(why, fmt.Sprintf("%d redeliveries not seen", missing))
	}
	if len(why) > 0 {
		return strings.Join(why, ", ")
	}
	w, err := openWork(ctx, in.dbURL, uncopied)
	if err != nil {
		return fmt.Sprintf("postgres: %v", err)
	}
	if w.claims > 0 {
		why = append(why, fmt.Sprintf("%d unsettled redelivery claims that would deliver again when rescued", w.claims))
	}
	if w.retryable > 0 {
		why = append(why, fmt.Sprintf("%d records waiting for a retry", w.retryable))
	}
	if w.outcome > 0 {
		why = append(why, fmt.Sprintf("%d redelivered records waiting for their outcome", w.outcome))
	}
	if w.unacknowledged > 0 {
		why = append(why, fmt.Sprintf("%d payments records marked unacknowledged: their acknowledgements were lost", w.unacknowledged))
	}
	if gap := len(uncopied) - w.stored; gap > 0 {
		// Pruned after its copy was made, and the copy not read yet.
		why = append(why, fmt.Sprintf("%d records neither stored nor seen on the archive topic", gap))
	}
	return strings.Join(why, ", ")
}

// work is what Postgres still has to do.
type work struct {
	claims    int // unsettled claims that would deliver again when rescued
	retryable int // records waiting for a retry
	// outcome counts redelivered records whose outcome is not in yet: orders
	// records completed by their redelivery (the consumer fails every one:
	// its failure re-opens the record) and payments records waiting for
	// their acknowledgement (completion: ack).
	outcome        int
	unacknowledged int // payments records past their ack_timeout
	stored         int // of the keys asked about, how many are stored
}

// openWork reads what is left to do.
//
// A claim orphaned by a kill (produced, never settled) is rescued only when
// its lease (30 s) has passed, and puts back only its records that are still
// as it left them: carrying its token, with no outcome yet
// (store.RescueExpired): available, or completed by that redelivery alone.
// Those are redelivered again — the duplicate the
// suite wants to see and explain — so such claims are waited for. A claim
// whose records all moved on (acknowledged, failed again) can redeliver
// nothing and is not. Nor is an archive copy still due: its record is stored
// (and a copy whose claim was never settled is on the topic already), it is
// only made after its lease.
func openWork(ctx context.Context, dbURL string, keys [][]byte) (work, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return work{}, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var w work
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM redrive_claim c WHERE EXISTS (SELECT 1 FROM redrive_record r
			WHERE r.id = ANY (c.ids) AND r.claim_token = c.token AND r.next_retry_at IS NULL
			  AND (r.state = 'available' OR r.state = 'completed' AND r.completed_by = 'redelivered'))),
		(SELECT count(*) FROM redrive_record WHERE state = 'retryable'),
		(SELECT count(*) FROM redrive_record WHERE queue = $1 AND state = 'completed' AND completed_by = 'redelivered'
		                                        OR queue = $2 AND state = 'available'),
		(SELECT count(*) FROM redrive_record WHERE queue = $2 AND unacknowledged_at IS NOT NULL),
		(SELECT count(DISTINCT key) FROM redrive_record WHERE key = ANY ($3))`,
		qOrders, qPayments, keys).Scan(&w.claims, &w.retryable, &w.outcome, &w.unacknowledged, &w.stored)
	if err != nil {
		return work{}, fmt.Errorf("count open work: %w", err)
	}
	return w, nil
}

// report is what verify found.
type report struct {
	records      int // DLQ records the workload produced
	deliveries   int // records serve produced to source topics
	duplicates   int // deliveries of a (redrive.id, redrive.attempt) seen before
	explained    int
	unexplained  int
	inPostgres   int // produced records still stored
	pruned       int // produced records no longer stored, with an archive copy
	explanations []string

	lost            []string // neither stored nor archived
	missing         []string // redeliveries the policies asked for that never arrived
	unexpected      []string // redeliveries no policy asked for
	unexplainedList []string
	splitRows       []string // a key stored more than once without a duplicate delivery
	foreign         []string // stored records of keys never produced
	wrongState      []string // stored records not in the state their queue's policy ends in
}

// endStates are the states each queue's records end in, once settled (see
// the queues' comments): what completion and the consumer make of them.
var endStates = map[string]string{
	qOrders:   "discarded/discard",
	qPayments: "completed by ack",
	qEmails:   "completed by redelivered",
	qInvoices: "discarded/dead_letter",
}

// endState names where a record stands, as endStates does.
func endState(r apiRecord) string {
	switch {
	case r.State == "discarded":
		return r.State + "/" + r.Exhaustion
	case r.State == "completed":
		return r.State + " by " + r.CompletedBy
	}
	return r.State
}

// verify accounts for every produced record: where it ended up, which
// redeliveries it got, and why any of them came twice.
func verify(keys []string, recs []apiRecord, deliveries []delivery, copies []archived, ds []disruption) report {
	rep := report{records: len(keys), deliveries: len(deliveries)}
	produced := map[string]bool{}
	for _, k := range keys {
		produced[k] = true
	}
	stored := map[string][]apiRecord{}
	for _, r := range recs {
		stored[r.Key] = append(stored[r.Key], r)
		if !produced[r.Key] {
			rep.foreign = append(rep.foreign, fmt.Sprintf("%s %s (%s)", r.ID, r.Key, r.Queue))
		} else if want := endStates[queueOf(r.Key)]; endState(r) != want {
			rep.wrongState = append(rep.wrongState, fmt.Sprintf("%s %s: %s, want %s", r.ID, r.Key, endState(r), want))
		}
	}
	copied := map[string]bool{}
	for _, c := range copies {
		copied[c.key] = true
	}
	seen := map[string]int{}
	byDelivery := map[string][]delivery{} // redrive.id@attempt → its deliveries
	dupKeys := map[string]bool{}
	for _, d := range deliveries {
		seen[fmt.Sprintf("%s@%d", d.key, d.attempt)]++
		id := fmt.Sprintf("%s@%d", d.id, d.attempt)
		byDelivery[id] = append(byDelivery[id], d)
		if !produced[d.key] || !contains(expectedAttempts[queueOf(d.key)], d.attempt) {
			rep.unexpected = append(rep.unexpected, fmt.Sprintf("%s attempt %d on %s at %s", d.key, d.attempt, d.topic, stamp(d.at)))
		}
	}

	for _, k := range keys {
		switch {
		case len(stored[k]) > 0:
			rep.inPostgres++
		case copied[k]:
			rep.pruned++
		default:
			rep.lost = append(rep.lost, k)
		}
		for _, a := range expectedAttempts[queueOf(k)] {
			if seen[fmt.Sprintf("%s@%d", k, a)] == 0 {
				rep.missing = append(rep.missing, fmt.Sprintf("%s attempt %d", k, a))
			}
		}
	}

	ids := make([]string, 0, len(byDelivery))
	for id := range byDelivery {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ds2 := byDelivery[id]
		if len(ds2) < 2 {
			continue
		}
		sort.Slice(ds2, func(i, j int) bool { return ds2[i].at.Before(ds2[j].at) })
		dupKeys[ds2[0].key] = true
		for i := 1; i < len(ds2); i++ {
			rep.duplicates++
			prev, cur := ds2[i-1], ds2[i]
			what := fmt.Sprintf("%s (%s) delivered at %s (%s/%d@%d) and again at %s (%s/%d@%d)", id, cur.key,
				stamp(prev.at), prev.topic, prev.partition, prev.offset, stamp(cur.at), cur.topic, cur.partition, cur.offset)
			if why, ok := explain(prev.at, cur.at, ds); ok {
				rep.explained++
				rep.explanations = append(rep.explanations, what+": explained, "+why)
			} else {
				rep.unexplained++
				rep.unexplainedList = append(rep.unexplainedList, what)
				rep.explanations = append(rep.explanations, what+": UNEXPLAINED")
			}
		}
	}
	for _, k := range keys {
		if len(stored[k]) > 1 && !dupKeys[k] {
			var rows []string
			for _, r := range stored[k] {
				rows = append(rows, r.ID+" "+r.State)
			}
			rep.splitRows = append(rep.splitRows, k+": "+strings.Join(rows, ", "))
		}
	}
	return rep
}

// explain finds the disruption that the documented double-delivery window
// allows between two deliveries of one attempt: serve died after the first
// produce (kill -9, or an exit of its own) and before the second, or Postgres
// was down at some point in between (a claim that cannot be settled within
// its lease is rescued and delivered again).
func explain(first, second time.Time, ds []disruption) (string, bool) {
	for _, d := range ds {
		switch d.kind {
		case "kill", "exit":
			if !d.at.Before(first) && !d.at.After(second) {
				return fmt.Sprintf("serve #%d %s at %s, in between (the claim was rescued after its lease)", d.gen, verb(d.kind), stamp(d.at)), true
			}
		case "postgres stop":
			if !d.at.After(second) && !d.end.Before(first) {
				return fmt.Sprintf("postgres was stopped from %s to %s, in between", stamp(d.at), stamp(d.end)), true
			}
		}
	}
	return "", false
}

func verb(kind string) string {
	if kind == "kill" {
		return "was killed"
	}
	return "exited"
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The accounting itself, on a made-up run: a lost record, a missing
// redelivery, a duplicate a kill explains and one nothing explains.
func TestVerifyAccounting(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	keys := []string{key(qOrders, 0), key(qEmails, 0), key(qInvoices, 0), key(qPayments, 0)}
	recs := []apiRecord{{ID: "e0", Queue: qEmails, Key: key(qEmails, 0), State: "completed", CompletedBy: "redelivered"},
		{ID: "i0", Queue: qInvoices, Key: key(qInvoices, 0), State: "available"}}
	copies := []archived{{key: key(qOrders, 0), id: "o0"}, {key: key(qInvoices, 0), id: "i0"}}
	deliveries := []delivery{
		{topic: qOrders, key: key(qOrders, 0), id: "o0", attempt: 2, at: at(1)},
		{topic: qOrders, key: key(qOrders, 0), id: "o0", attempt: 2, at: at(31)},
		{topic: qOrders, key: key(qOrders, 0), id: "o0", attempt: 3, at: at(33)},
		{topic: qEmails, key: key(qEmails, 0), id: "e0", attempt: 1, at: at(40)},
		{topic: qEmails, key: key(qEmails, 0), id: "e0", attempt: 1, at: at(41)},
		{topic: qInvoices, key: key(qInvoices, 0), id: "i0", attempt: 1, at: at(42)},
	}
	ds := []disruption{
		{kind: "kill", at: at(1.5), end: at(1.5), gen: 1},
		{kind: "postgres stop", at: at(50), end: at(70)},
	}
	rep := verify(keys, recs, deliveries, copies, ds)
	if rep.records != 4 || rep.deliveries != 6 || rep.inPostgres != 2 || rep.pruned != 1 {
		t.Errorf("records %d deliveries %d in postgres %d pruned %d, want 4 6 2 1", rep.records, rep.deliveries, rep.inPostgres, rep.pruned)
	}
	if len(rep.wrongState) != 1 || !strings.Contains(rep.wrongState[0], "available, want discarded/dead_letter") {
		t.Errorf("wrong states = %v, want the invoices record left available", rep.wrongState)
	}
	if len(rep.lost) != 1 || rep.lost[0] != key(qPayments, 0) {
		t.Errorf("lost = %v, want the payments record", rep.lost)
	}
	if len(rep.missing) != 1 || !strings.HasPrefix(rep.missing[0], key(qPayments, 0)+" attempt 2") {
		t.Errorf("missing = %v, want payments attempt 2", rep.missing)
	}
	if rep.duplicates != 2 || rep.explained != 1 || rep.unexplained != 1 ||
		len(rep.unexplainedList) != 1 || !strings.HasPrefix(rep.unexplainedList[0], "e0@1") {
		t.Errorf("duplicates %d (explained %d, unexplained %v), want 2 (1, [e0@1…])", rep.duplicates, rep.explained, rep.unexplainedList)
	}
	if len(rep.unexpected) != 1 || !strings.HasPrefix(rep.unexpected[0], key(qInvoices, 0)) {
		t.Errorf("unexpected = %v, want the invoices delivery", rep.unexpected)
	}
	// A stop explains a duplicate only if it overlaps the two deliveries.
	if _, ok := explain(at(45), at(49), ds); ok {
		t.Errorf("a duplicate before the stop was explained")
	}
	if _, ok := explain(at(45), at(55), ds); !ok {
		t.Errorf("a duplicate across the stop was not explained")
	}
}
