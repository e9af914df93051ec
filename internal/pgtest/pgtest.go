// Package pgtest gives each test a real, migrated Postgres database of its own.
//
// The server is TEST_DATABASE_URL when set (the role needs CREATEDB), else a
// throwaway cluster started from the local PostgreSQL binaries, one per test
// binary. The schema is migrated once into a template database; each test gets
// a copy (CREATE DATABASE … TEMPLATE, ~40 ms), so tests run in parallel without
// seeing each other's rows. Packages using it call pgtest.Main from TestMain.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/pgcluster"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// EnvURL names the environment variable pointing at an existing server.
const EnvURL = "TEST_DATABASE_URL"

var (
	setupOnce sync.Once
	setupErr  error
	cluster   *pgcluster.Cluster // nil when EnvURL is used
	adminURL  string             // a database to run CREATE/DROP DATABASE from
	template  string
	counter   atomic.Int64
)

// Main runs the tests, then drops the template and stops the throwaway cluster.
func Main(m *testing.M) {
	code := m.Run()
	teardown()
	os.Exit(code)
}

func setup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if url := os.Getenv(EnvURL); url != "" {
		if testdate.Moved() {
			setupErr = fmt.Errorf("%s moves the clocks of a throwaway Postgres only: unset %s", testdate.Env, EnvURL)
			return
		}
		adminURL = url
	} else {
		c, err := startCluster(ctx)
		if err != nil {
			setupErr = fmt.Errorf("start throwaway postgres (or set %s): %w", EnvURL, err)
			return
		}
		cluster, adminURL = c, c.URL("postgres")
	}
	template = fmt.Sprintf("redrive_tpl_%d", os.Getpid())
	if err := exec(ctx, adminURL, "CREATE DATABASE "+template); err != nil {
		setupErr = err
		return
	}
	setupErr = Migrate(ctx, withDatabase(adminURL, template))
}

func teardown() {
	if template != "" && adminURL != "" {
		_ = exec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+template+" WITH (FORCE)")
	}
	if cluster != nil {
		cluster.Stop()
	}
}

// Migrate applies all migrations to the database at url.
func Migrate(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect %s: %w", url, err)
	}
	defer pool.Close()
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}

// URL creates a fresh migrated database for the test and returns its URL.
// The database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	setupOnce.Do(setup)
	if setupErr != nil {
		t.Fatalf("pgtest: %v", setupErr)
	}
	name := fmt.Sprintf("redrive_test_%d_%d", os.Getpid(), counter.Add(1))
	ctx := context.Background()
	if err := exec(ctx, adminURL, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(adminURL, name)
}

// New returns a pool on a fresh migrated database of the test's own.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Pool(t, URL(t))
}

// Pool returns a pool on the database at url (from URL or NewCluster),
// closed when the test ends.
func Pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewCluster starts a throwaway cluster of the test's own, with a migrated
// database "redrive", for tests that stop and restart Postgres. It needs the
// local PostgreSQL binaries even when TEST_DATABASE_URL is set.
func NewCluster(t testing.TB) (*pgcluster.Cluster, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startCluster(ctx)
	if err != nil {
		t.Fatalf("pgtest: start cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	if err := exec(ctx, c.URL("postgres"), "CREATE DATABASE redrive"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	url := c.URL("redrive")
	if err := Migrate(ctx, url); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c, url
}

// startCluster starts a throwaway cluster whose clock and TimeZone are the
// tests' (internal/testdate).
func startCluster(ctx context.Context) (*pgcluster.Cluster, error) {
	env, err := testdate.ProcessEnv()
	if err != nil {
		return nil, err
	}
	return pgcluster.Start(ctx, pgcluster.Options{Env: env, Settings: testdate.ServerSettings()})
}

func exec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// withDatabase returns the connection string with its database name replaced.
// It takes URLs (postgres://…) and key=value DSNs.
func withDatabase(conn, db string) string {
	u, err := url.Parse(conn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return conn + " dbname=" + db // in a DSN the last value of a key wins
	}
	u.Path = "/" + db
	return u.String()
}
