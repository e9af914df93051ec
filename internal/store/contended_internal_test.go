package store

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A single-record write rolled back to break a deadlock (or a lock not
// granted in time) runs again; any other error is returned at once.
func TestRetryContendedRunsAgainOnlyWhatPostgresRolledBackForAnother(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	calls := 0
	err := retryContended(context.Background(), func() error {
		calls++
		if calls < 3 {
			return deadlock
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("after two deadlocks: err %v, %d calls; want success at the third", err, calls)
	}
	calls = 0
	err = retryContended(context.Background(), func() error { calls++; return deadlock })
	if !errors.Is(err, deadlock) || calls != contendedAttempts {
		t.Fatalf("always deadlocked: err %v, %d calls; want the deadlock after %d", err, calls, contendedAttempts)
	}
	calls = 0
	bad := &pgconn.PgError{Code: "23505", Message: "duplicate key"}
	if err := retryContended(context.Background(), func() error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("a unique violation: err %v, %d calls; want it at once", err, calls)
	}
}
