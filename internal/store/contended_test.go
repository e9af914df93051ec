package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/store"
)

// A deadlock Postgres broke and a lock not granted in time are contention,
// run again; a statement Postgres refuses is not.
func TestContendedKnowsPostgresRollingBackForAnother(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE a (n int); CREATE TABLE b (n int)"); err != nil {
		t.Fatal(err)
	}
	begin := func() pgx.Tx {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return tx
	}
	// A deadlock: each holds one table and asks for the other's.
	one, two := begin(), begin()
	if _, err := one.Exec(ctx, "LOCK TABLE a"); err != nil {
		t.Fatal(err)
	}
	if _, err := two.Exec(ctx, "LOCK TABLE b"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		tx  pgx.Tx
		err error
	}
	done := make(chan result, 2)
	go func() { _, err := one.Exec(ctx, "LOCK TABLE b"); done <- result{one, err} }()
	go func() { _, err := two.Exec(ctx, "LOCK TABLE a"); done <- result{two, err} }()
	// Postgres aborts one of them (the victim); the other goes on once the
	// victim is rolled back.
	var contended int
	for range 2 {
		r := <-done
		if store.Contended(r.err) {
			contended++
		} else if r.err != nil {
			t.Errorf("the deadlock's other statement: %v", r.err)
		}
		_ = r.tx.Rollback(ctx) // its statement is over
	}
	if contended != 1 {
		t.Errorf("a deadlock: %d statements taken for contention, want the victim's", contended)
	}

	// A lock not granted within lock_timeout.
	holder, waiter := begin(), begin()
	if _, err := holder.Exec(ctx, "LOCK TABLE a"); err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Exec(ctx, "SET LOCAL lock_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Exec(ctx, "LOCK TABLE a"); !store.Contended(err) {
		t.Errorf("a lock timeout (%v) is not contention", err)
	}

	_, err := pool.Exec(ctx, "SELECT 1/0")
	if err == nil || store.Contended(err) || store.Contended(errors.New("deadlock detected")) || store.Contended(nil) {
		t.Errorf("a refused statement (%v), a plain error or nil taken for contention", err)
	}
}
