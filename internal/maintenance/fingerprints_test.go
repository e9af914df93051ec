package maintenance_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/logtest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// Records stored before fingerprints existed (fingerprint ”) get the one of
// their latest error, and their incidents are listed with them.
func TestBackfillFingerprintsOlderRecords(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var rs []rec
	for range 1500 { // more than one backfill batch
		rs = append(rs, deadLetter("orders", t0))
	}
	rs = append(rs, rec{queue: "billing", state: "discarded", exhaustion: "dead_letter", at: t0, errorType: "smtp.down"})
	ids := b.insert(t, rs...)
	mustNoErr(t, maintenance.NewFingerprintBackfill(maintenance.BackfillConfig{Store: b.store}).Run(ctx))

	want := fingerprint.Of("db.timeout", "second", nil)
	r, err := b.store.Get(ctx, ids[0])
	if err != nil || r.Fingerprint != want {
		t.Fatalf("fingerprint %q, %v; want the latest error's %q", r.Fingerprint, err, want)
	}
	if left, err := b.store.Unfingerprinted(ctx, 1); err != nil || len(left) != 0 {
		t.Fatalf("%d records left without a fingerprint, %v", len(left), err)
	}
	if err := b.store.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := b.store.ListIncidents(ctx, &store.IncidentParams{Sort: store.IncidentSortCount})
	if err != nil || len(list) != 2 || list[0].ID != want || list[0].Count != 1500 || list[1].Count != 1 {
		t.Fatalf("incidents %+v, %v", list, err)
	}
}

// A job published over HTTP has no error until a worker fails it, and so no
// fingerprint: the backfill leaves it alone. It gave such a job, published
// while the backfill ran at start, the incident of an empty error, and
// locked it while a worker's fetch skipped it.
func TestBackfillLeavesJobsWithoutErrorsAlone(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	now := testdate.Now().UTC().Truncate(time.Microsecond)
	job := &dlq.Record{ID: dlq.NewID(testdate.Now()), Queue: "emails", Type: "email.send", State: dlq.StateAvailable,
		MaxAttempts: 1, Format: dlq.FormatOJS, Source: dlq.Source{Topic: "emails", Partition: -1, Offset: -1},
		Value: []byte(`["a@example.com"]`), Errors: []dlq.ErrorEntry{}, Retry: []byte(`{}`), Meta: []byte(`{}`),
		CreatedAt: now, EnqueuedAt: &now, UpdatedAt: now}
	mustNoErr(t, b.store.InsertJob(ctx, job, now))
	ids := b.insert(t, deadLetter("orders", t0))
	version := func() (fp, xmin string) {
		t.Helper()
		if err := b.pool.QueryRow(ctx, "SELECT fingerprint, xmin::text FROM redrive_lifecycle WHERE id = $1", job.ID).Scan(&fp, &xmin); err != nil {
			t.Fatal(err)
		}
		return fp, xmin
	}
	_, before := version()
	mustNoErr(t, maintenance.NewFingerprintBackfill(maintenance.BackfillConfig{Store: b.store}).Run(ctx))

	if r, err := b.store.Get(ctx, ids[0]); err != nil || r.Fingerprint == "" {
		t.Fatalf("the dead letter's fingerprint %q, %v; want its error's", r.Fingerprint, err)
	}
	if fp, after := version(); fp != "" || after != before {
		t.Errorf("the job got fingerprint %q (row version %s, before %s); want it untouched", fp, after, before)
	}
	if err := b.store.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := b.store.ListIncidents(ctx, &store.IncidentParams{Sort: store.IncidentSortCount})
	if err != nil || len(list) != 1 || list[0].ErrorType == "" {
		t.Fatalf("incidents %+v, %v; want the dead letter's alone", list, err)
	}
}

// oldRules stores records as the first fingerprint rules left them: each
// with the fingerprint given (those rules gave a UUID in a URL an incident
// of its own, and KeyError: 'amount' the incident of KeyError:
// 'customer_id'), and their incidents, of rules version 1 as the migration
// marks every incident from before it.
func (b *bundle) oldRules(t *testing.T, fp string, firstSeen, lastSeen time.Time, rs ...rec) []string {
	t.Helper()
	ids := b.insert(t, rs...)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `WITH d AS (UPDATE redrive_record_data SET fingerprint = $1 WHERE id = ANY($2::uuid[])) UPDATE redrive_lifecycle SET fingerprint = $1 WHERE id = ANY($2::uuid[])`, fp, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO redrive_incident (fingerprint, error_type, signature, first_seen, last_seen, sample_id, sample_message)
		VALUES ($1, $2, 'under the first rules', $3, $4, $5, $6)`, fp, rs[0].errorType, firstSeen, lastSeen, ids[0], rs[0].message); err != nil {
		t.Fatal(err)
	}
	if err := b.store.RecordActivity(ctx, t0, map[store.ActivityKey]int64{{Queue: rs[0].queue, Fingerprint: fp}: int64(len(rs))}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Records stored under the first fingerprint rules are fingerprinted again
// under the current ones in the background, and join the incidents of the
// records ingest stores now: one timeout with a UUID per record becomes one
// incident, with the merged count, first seen and activity; one that the
// first rules merged splits into its two problems.
func TestBackfillBringsOldRecordsUnderTheCurrentRules(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	timeout := func(id string, at time.Time) rec {
		r := deadLetter("payments", at)
		r.errorType, r.message = "http.timeout", "POST https://api/v1/charges/"+id+": context deadline exceeded"
		return r
	}
	keyErr := func(key string) rec {
		r := deadLetter("orders", t0.Add(-time.Hour))
		r.errorType, r.message = "KeyError", "KeyError: '"+key+"'"
		return r
	}
	var old []string
	for i, id := range []string{"0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b", "4f6c1d2e-9b8a-4c3d-8e7f-1a2b3c4d5e6f", "a3f9c2d1-5e6b-4a8c-9d0e-1f2a3b4c5d6e"} {
		fp := fmt.Sprintf("00000000000000a%d", i)
		at := t0.Add(-time.Duration(3-i) * time.Hour)
		old = append(old, b.oldRules(t, fp, at.Add(-24*time.Hour), at, timeout(id, at))...)
	}
	// More than a page of them (200 incidents are drained together).
	for i := range 250 {
		at := t0.Add(-time.Duration(90+i%30) * time.Minute)
		old = append(old, b.oldRules(t, fmt.Sprintf("0000000000001%03d", i), at, at, timeout(uuid.NewString(), at))...)
	}
	keyErrors := b.oldRules(t, "00000000000000b0", t0.Add(-48*time.Hour), t0, keyErr("customer_id"), keyErr("amount"))
	// Ingest stores a new failure of the timeout under the current rules.
	fresh := timeout("7e57d004-2b97-4e7a-b45f-5387367791cd", t0)
	freshID := b.insert(t, fresh)[0]
	want := fingerprint.Of("http.timeout", fresh.message, nil)
	if _, err := b.store.RecordIncidents(ctx, []store.IncidentSeen{{Fingerprint: want, ErrorType: "http.timeout",
		Signature: fingerprint.Normalize(fresh.message), Queue: "payments", SeenAt: t0, SampleID: freshID, SampleMessage: fresh.message}}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.SetFingerprints(ctx, []string{freshID}, []string{want}, []string{""}); err != nil {
		t.Fatal(err)
	}

	mustNoErr(t, maintenance.NewFingerprintBackfill(maintenance.BackfillConfig{Store: b.store}).Run(ctx))

	if err := b.store.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := b.store.ListIncidents(ctx, &store.IncidentParams{Sort: store.IncidentSortCount})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range list {
		got = append(got, fmt.Sprintf("%s %d %s..%s", in.Signature, in.Count, in.FirstSeen.UTC().Format(time.DateTime), in.LastSeen.UTC().Format(time.DateTime))) // pgx reads times in time.Local
	}
	// The timeout keeps the earliest first seen of the three it merged; the
	// KeyErrors, split, have their records' own times.
	wantList := []string{
		"POST https://<host>/v<n>/charges/<uuid>: context deadline exceeded 254 2026-02-28 02:00:00..2026-03-01 05:00:00",
		"KeyError: 'amount' 1 2026-03-01 04:00:00..2026-03-01 04:00:00",
		"KeyError: 'customer_id' 1 2026-03-01 04:00:00..2026-03-01 04:00:00",
	}
	if len(got) > 1 {
		slices.Sort(got[1:]) // the KeyErrors tie
	}
	if strings.Join(got, "\n") != strings.Join(wantList, "\n") {
		t.Errorf("incidents after the backfill:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantList, "\n"))
	}
	for _, id := range append(old, freshID) {
		if r, err := b.store.Get(ctx, id); err != nil || r.Fingerprint != want {
			t.Errorf("record %s: fingerprint %q, %v; want %s", id, r.Fingerprint, err, want)
		}
	}
	if r, err := b.store.Get(ctx, keyErrors[1]); err != nil || r.Fingerprint != fingerprint.Of("KeyError", "KeyError: 'amount'", nil) {
		t.Errorf("KeyError: 'amount': fingerprint %q, %v", r.Fingerprint, err)
	}
	// The old incidents are still there to look up, with no records.
	if in, err := b.store.GetIncident(ctx, &store.IncidentParams{ID: "00000000000000a0"}); err != nil || in.Count != 0 {
		t.Errorf("old incident: %+v, %v; want it with count 0", in, err)
	}
	// Their activity went to the incident their records joined (not the
	// split one's).
	series, err := b.store.Activity(ctx, store.ActivityParams{Since: t0.Truncate(time.Hour), Until: t0.Truncate(time.Hour).Add(time.Hour),
		Step: time.Hour, Fingerprint: want})
	if err != nil || fmt.Sprint(series.Added) != "[253]" {
		t.Errorf("the merged incident's activity: %+v, %v; want [253]", series, err)
	}
	// Nothing is left to do: a second run changes nothing, and reads none
	// of the old incidents' records.
	mustNoErr(t, maintenance.NewFingerprintBackfill(maintenance.BackfillConfig{Store: b.store}).Run(ctx))
	if n := b.count(t, "fingerprint = $1", want); n != 254 {
		t.Errorf("records of the timeout incident after another run: %d, want 254", n)
	}
	var left int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM redrive_incident WHERE rules_version < $1 AND refingerprinted_at IS NULL`,
		fingerprint.Version).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d incidents of the first rules not noted done, %v", left, err)
	}
	// A replica of the first version, still running, stores one more
	// failure under an old incident: the next run takes it up.
	late := b.oldRules(t, "00000000000000a9", t0, t0.Add(time.Hour), timeout(uuid.NewString(), t0.Add(time.Hour)))
	if _, err := b.pool.Exec(ctx, `UPDATE redrive_incident SET last_seen = now() + interval '1 hour' WHERE fingerprint = '00000000000000a1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `WITH d AS (UPDATE redrive_record_data SET fingerprint = '00000000000000a1' WHERE id = $1) UPDATE redrive_lifecycle SET fingerprint = '00000000000000a1' WHERE id = $1`, late[0]); err != nil {
		t.Fatal(err)
	}
	mustNoErr(t, maintenance.NewFingerprintBackfill(maintenance.BackfillConfig{Store: b.store}).Run(ctx))
	if r, err := b.store.Get(ctx, late[0]); err != nil || r.Fingerprint != want {
		t.Errorf("a record stored by an older replica after the backfill: fingerprint %q, %v; want %s", r.Fingerprint, err, want)
	}
}

// While another replica holds the backfill's lock, a replica waits and
// changes nothing; it takes the backfill over once the lock is free (the
// holder finished or died).
func TestBackfillRunsOnOneReplicaAtATime(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ids := b.insert(t, deadLetter("orders", t0))
	lock, ok, err := b.store.TryAdvisoryLock(ctx, maintenance.LockFingerprints)
	if err != nil || !ok {
		t.Fatalf("take the lock: %v, %v", ok, err)
	}
	logs := &logtest.Buffer{}
	bf := maintenance.NewFingerprintBackfill(maintenance.BackfillConfig{Store: b.store, Retry: time.Minute, Clock: b.clock,
		Logger: logs.TextLogger(slog.LevelDebug)})
	mustNoErr(t, bf.Start(ctx))
	defer func() { mustNoErr(t, bf.Stop()) }()
	// Twice it finds the lock taken and waits a minute on the clock.
	for try := 1; try <= 2; try++ {
		mustNoErr(t, b.clock.BlockUntil(ctx, 1))
		if n := logs.Count("another replica is fingerprinting"); n != try {
			t.Fatalf("%d waits logged after try %d", n, try)
		}
		select {
		case <-bf.Done():
			t.Fatal("the backfill returned while another replica held its lock")
		default:
		}
		if r, err := b.store.Get(ctx, ids[0]); err != nil || r.Fingerprint != "" {
			t.Fatalf("fingerprint %q, %v while another replica holds the lock; want none yet", r.Fingerprint, err)
		}
		if try == 2 {
			lock.Release()
		}
		b.clock.Advance(time.Minute)
	}
	select {
	case <-bf.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the backfill did not take over once the lock was free")
	}
	if r, err := b.store.Get(ctx, ids[0]); err != nil || r.Fingerprint == "" {
		t.Fatalf("fingerprint %q, %v after the lock was free", r.Fingerprint, err)
	}
}
