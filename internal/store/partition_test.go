package store_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// idAt is a UUIDv7 made at t: the week partition it is stored in is t's.
func idAt(t *testing.T, at time.Time) string {
	t.Helper()
	id := uuid.MustParse(dlq.NewID(testdate.Now()))
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id.String()
}

// A batch consumed again gets new ids, which may fall in another week's
// partition than the first copy's: the coordinates table still refuses it,
// whichever week its id falls in.
func TestReconsumedBatchAcrossPartitionsStoresNothingTwice(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	first := newRecord(1, "orders")
	if res, err := s.InsertRecords(ctx, []dlq.Record{first}); err != nil || res.N != 1 {
		t.Fatalf("first: %+v, %v", res, err)
	}
	again := first
	again.ID = idAt(t, testdate.Now().Add(15*24*time.Hour)) // two weeks on: another partition
	other := newRecord(2, "orders")
	res, err := s.InsertRecords(ctx, []dlq.Record{again, other})
	if err != nil || res.N != 1 || res.New(0) || !res.New(1) {
		t.Fatalf("again by COPY: %+v, %v; want only the new record stored", res, err)
	}
	again.ID = idAt(t, testdate.Now().Add(22*24*time.Hour))
	if res, err := s.InsertRecords(ctx, []dlq.Record{again}); err != nil || res.N != 0 {
		t.Fatalf("again by COPY, with an id of another week: %+v, %v; want nothing stored", res, err)
	}
	var records, coords, parts int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM redrive_record), (SELECT count(*) FROM redrive_record_coord),
		(SELECT count(DISTINCT tableoid) FROM redrive_lifecycle)`).Scan(&records, &coords, &parts); err != nil {
		t.Fatal(err)
	}
	if records != 2 || coords != 2 || parts != 1 {
		t.Errorf("%d records, %d coordinates in %d partitions; want 2, 2, 1", records, coords, parts)
	}
	// Deleting a record frees its coordinates, as deleting the row did.
	if _, err := s.DeleteRecord(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM redrive_record_coord").Scan(&coords); err != nil || coords != 1 {
		t.Errorf("after a delete: %d coordinates, %v; want 1", coords, err)
	}
}

// Ids outside every week (years ahead) are stored in the DEFAULT partition.
func TestDefaultPartitionCatchesOutOfRangeIds(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	r := newRecord(1, "orders")
	r.ID = idAt(t, testdate.Now().AddDate(3, 0, 0))
	if res, err := s.InsertRecords(ctx, []dlq.Record{r}); err != nil || res.N != 1 {
		t.Fatalf("insert: %+v, %v", res, err)
	}
	var life, data string
	if err := pool.QueryRow(ctx, `SELECT (SELECT tableoid::regclass::text FROM redrive_lifecycle WHERE id = $1),
		(SELECT tableoid::regclass::text FROM redrive_record_data WHERE id = $1)`, r.ID).Scan(&life, &data); err != nil {
		t.Fatal(err)
	}
	if life != "redrive_lifecycle_default" || data != "redrive_record_data_default" {
		t.Errorf("stored in %s and %s; want the default partitions", life, data)
	}
}

// A week made while the DEFAULT partitions hold rows of it (stored before
// it existed: a replica's clock ahead) takes them with it, whole, counted
// once; before, the week could not be made, and the pruner failed every pass.
func TestAWeekTakesItsRowsFromTheDefaultPartition(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	// A Tuesday two years ahead: its records, minutes apart, stay in its week
	// whatever day the test runs on.
	ahead := weekOf(testdate.Now().AddDate(2, 0, 0)).AddDate(0, 0, 1)
	var recs []dlq.Record
	for i := range 3 {
		r := newRecord(int64(i), "orders")
		r.ID = idAt(t, ahead.Add(time.Duration(i)*time.Minute))
		recs = append(recs, r)
	}
	other := newRecord(9, "orders")
	other.ID = idAt(t, ahead.AddDate(0, 0, 14)) // another week: it stays
	if res, err := s.InsertRecords(ctx, append(recs, other)); err != nil || res.N != 4 {
		t.Fatalf("insert: %+v, %v", res, err)
	}
	count := func() (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM redrive_record_count WHERE queue = 'orders'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	week := "w" + weekOf(ahead).Format("20060102")
	if made, err := s.EnsureWeeks(ctx, ahead, 1); err != nil || !slices.Equal(made, []string{week}) {
		t.Fatalf("EnsureWeeks = %v, %v; want %s made", made, err, week)
	}
	for _, want := range recs {
		var life, data string
		if err := pool.QueryRow(ctx, `SELECT (SELECT tableoid::regclass::text FROM redrive_lifecycle WHERE id = $1),
			(SELECT tableoid::regclass::text FROM redrive_record_data WHERE id = $1)`, want.ID).Scan(&life, &data); err != nil {
			t.Fatal(err)
		}
		if life != "redrive_lifecycle_"+week || data != "redrive_record_data_"+week {
			t.Errorf("%s is in %s and %s; want the week's partitions", want.ID, life, data)
		}
		got, err := s.Get(ctx, want.ID)
		if err != nil || !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || got.State != want.State {
			t.Errorf("%s after the move: %+v, %v", want.ID, got, err)
		}
	}
	var left string
	if err := pool.QueryRow(ctx, "SELECT tableoid::regclass::text FROM redrive_lifecycle WHERE id = $1", other.ID).Scan(&left); err != nil || left != "redrive_lifecycle_default" {
		t.Errorf("the other week's record is in %s (%v); want the DEFAULT partition", left, err)
	}
	if after := count(); after != before || after != 4 {
		t.Errorf("orders counts %d records after the move, %d before; want 4", after, before)
	}
}

// A lookup by id reads one partition of each table; a keyset page reads
// only the wide table's partitions at or below its cursor. (The view's join
// carries id = but not id <: the lifecycle side of a page merges the top of
// every partition's primary key, a few pages each.)
func TestLookupsTouchTheirPartitionsOnly(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	id := dlq.NewID(testdate.Now())
	week := "w" + weekOf(testdate.Now()).Format("20060102")
	plan := explain(t, ctx, pool, "SELECT * FROM redrive_record WHERE id = $1", id)
	if strings.Count(plan, " on redrive_lifecycle_") != 1 || strings.Count(plan, " on redrive_record_data_") != 1 ||
		!strings.Contains(plan, "redrive_lifecycle_"+week) || !strings.Contains(plan, "redrive_record_data_"+week) {
		t.Errorf("a lookup by id does not read its week's partitions (%s) alone:\n%s", week, plan)
	}
	plan = explain(t, ctx, pool, "SELECT id FROM redrive_record WHERE id < $1 ORDER BY id DESC LIMIT 50", id)
	if strings.Contains(plan, "redrive_record_data_w"+weekOf(testdate.Now().Add(7*24*time.Hour)).Format("20060102")) || !strings.Contains(plan, "redrive_record_data_"+week) ||
		sortNode.MatchString(plan) {
		t.Errorf("a keyset page below this week's id reads later weeks, or sorts:\n%s", plan)
	}
	// A page since a time reads no week of wide rows ending more than a day
	// before it.
	f := filter.Filter{Queue: "orders", Since: testdate.Now().AddDate(0, 0, 8)}
	for _, q := range store.ListScans(&store.ListParams{Filter: f, Limit: 50}) {
		plan := explain(t, ctx, pool, q.SQL, q.Args...)
		if strings.Contains(plan, "redrive_record_data_"+week+" ") || !strings.Contains(plan, "redrive_record_data_w"+weekOf(testdate.Now().AddDate(0, 0, 14)).Format("20060102")) {
			t.Errorf("a page since next week reads this week's partition, or not the week after:\n%s", plan)
		}
	}
}

func weekOf(t time.Time) time.Time {
	t = t.UTC().Truncate(24 * time.Hour)
	return t.AddDate(0, 0, -((int(t.Weekday()) + 6) % 7))
}

// Weeks are made ahead once, whoever asks: concurrent callers (replicas'
// passes) make each week's partitions of both tables exactly once, and
// asking again makes nothing.
func TestWeeksAreMadeOnceByConcurrentCallers(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	from := testdate.Now().AddDate(1, 0, 0) // a year on: none made yet
	made := make(chan []string, 4)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			names, err := s.EnsureWeeks(ctx, from, 5)
			made <- names
			errs <- err
		}()
	}
	total := 0
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		total += len(<-made)
	}
	if total != 5 {
		t.Errorf("%d weeks made by 4 concurrent callers, want 5", total)
	}
	var life, data, registered int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_inherits WHERE inhparent = 'redrive_lifecycle'::regclass),
		(SELECT count(*) FROM pg_inherits WHERE inhparent = 'redrive_record_data'::regclass),
		(SELECT count(*) FROM redrive_partition)`).Scan(&life, &data, &registered); err != nil {
		t.Fatal(err)
	}
	// The migration's five weeks, these five, and the DEFAULT partition.
	if life != 11 || data != 11 || registered != 10 {
		t.Errorf("%d lifecycle and %d data partitions, %d registered; want 11, 11, 10", life, data, registered)
	}
	if names, err := s.EnsureWeeks(ctx, from, 5); err != nil || len(names) != 0 {
		t.Errorf("asked again: made %v, %v; want nothing", names, err)
	}
	// A record stored in one of them is in its week's partition.
	r := newRecord(1, "orders")
	r.ID = idAt(t, from.AddDate(0, 0, 14))
	if _, err := s.InsertRecords(ctx, []dlq.Record{r}); err != nil {
		t.Fatal(err)
	}
	var part string
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM redrive_record_data WHERE id = $1`, r.ID).Scan(&part); err != nil {
		t.Fatal(err)
	}
	if want := "redrive_record_data_w" + weekOf(from.AddDate(0, 0, 14)).Format("20060102"); part != want {
		t.Errorf("stored in %s, want %s", part, want)
	}
}

// Dropping a partition locks its parent and then the parent's DEFAULT
// partition, whose constraint the drop changes. Making a week takes the same
// locks in the same order, so a week made while another is dropped waits
// for the drop instead of deadlocking with it (the pruner of one replica
// drops weeks while another's makes them; the api bench's load made past
// weeks while the pruner dropped them).
func TestAWeekIsMadeWhileAPartitionIsDropped(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	s := store.New(pool)
	ctx := context.Background()
	drop, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = drop.Rollback(ctx) }()
	// What DROP TABLE of a week's lifecycle partition locks, in its order.
	if _, err := drop.Exec(ctx, "LOCK TABLE ONLY redrive_lifecycle IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type made struct {
		names []string
		err   error
	}
	done := make(chan made, 1)
	go func() {
		names, err := s.EnsureWeeks(ctx, testdate.Now().AddDate(1, 0, 0), 1)
		done <- made{names, err}
	}()
	// EnsureWeeks queues behind the drop before the drop goes on.
	eventually.True(t, "EnsureWeeks waiting on a lock", func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE NOT granted AND relation = 'redrive_lifecycle'::regclass AND pid <> pg_backend_pid())`).Scan(&waiting)
		return err == nil && waiting
	})
	if _, err := drop.Exec(ctx, "LOCK TABLE redrive_lifecycle_default IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatalf("the drop's lock of the DEFAULT partition: %v", err)
	}
	if err := drop.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if m := <-done; m.err != nil || len(m.names) != 1 {
		t.Fatalf("made %v, %v; want the week, after the drop", m.names, m.err)
	}
}
