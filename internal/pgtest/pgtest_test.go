package pgtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/testdate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The throwaway server's clock is the tests' (REDRIVE_TEST_NOW moves both),
// its TimeZone is the tests' TZ, and its timeouts still fire with the clock
// moved (they check the time in a signal handler).
func TestServerRunsOnTheTestsClock(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	var now time.Time
	var zone string
	if err := pool.QueryRow(ctx, "SELECT now(), current_setting('TimeZone')").Scan(&now, &zone); err != nil {
		t.Fatal(err)
	}
	if d := now.Sub(testdate.Now()); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("the server's now() is %v, %v from the tests' %v", now, d, testdate.Now())
	}
	if tz := os.Getenv("TZ"); tz != "" && tz[0] != ':' && zone != tz {
		t.Errorf("the server's TimeZone is %s, the tests' TZ %s", zone, tz)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET statement_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	start := testdate.Now()
	_, err = conn.Exec(ctx, "SELECT pg_sleep(5)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("a 5 s sleep under a 200 ms statement_timeout: %v, want it canceled (57014)", err)
	}
	if d := testdate.Since(start); d > 4*time.Second {
		t.Errorf("the statement_timeout fired after %v", d)
	}
	if _, err := conn.Exec(ctx, "RESET statement_timeout"); err != nil {
		t.Fatal(err)
	}
}
