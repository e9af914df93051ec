// Package bench measures Redrive's hot paths end to end against a raw baseline
// measured in the same run, on a throwaway Postgres and an in-process Kafka.
// It backs `redrive bench` (make bench); it is never imported by the processor.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/pgcluster"
	"github.com/redrive/redrive/internal/store"
)

// Config configures a benchmark run.
type Config struct {
	// DatabaseURL is a server to create a scratch database on (the role needs
	// CREATEDB). Default: a throwaway cluster from the local binaries.
	DatabaseURL string
	// Records is how many DLQ records to ingest. Default: 200,000.
	Records int
	// ValueSize is the size of each record's value in bytes. Default: 1024.
	ValueSize int
	// MemoryRecords is how many records the memory suite ingests and
	// retries. Default: 1,000,000.
	MemoryRecords int
	// Abuse sizes the abuse suite's attacks.
	Abuse AbuseConfig
	// Out receives the report. Default: os.Stdout.
	Out io.Writer
}

func (c Config) withDefaults() Config {
	if c.Records == 0 {
		c.Records = 200_000
	}
	if c.ValueSize == 0 {
		c.ValueSize = 1024
	}
	if c.MemoryRecords == 0 {
		c.MemoryRecords = 1_000_000
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return c
}

// quiet discards the components' logs so they do not disturb the figures.
var quiet = slog.New(slog.DiscardHandler)

// scratchDB creates a fresh, migrated database and returns a pool on it, its
// connection string and a cleanup function.
func scratchDB(ctx context.Context, serverURL string) (*pgxpool.Pool, string, func(), error) {
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if serverURL == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return nil, "", nil, fmt.Errorf("start throwaway postgres: %w", err)
		}
		cleanups = append(cleanups, c.Stop)
		serverURL = c.URL("postgres")
	}
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("connect: %w", err)
	}
	name := fmt.Sprintf("redrive_bench_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		cleanup()
		return nil, "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	cleanups = append(cleanups, func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(context.Background())
	})
	cfg, err := pgxpool.ParseConfig(serverURL)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	cfg.ConnConfig.Database = name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	cleanups = append(cleanups, pool.Close)
	m, err := store.NewMigrator(pool, nil)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return pool, dsn(cfg.ConnConfig.Config), cleanup, nil
}

// dsn is a keyword/value connection string for a child process.
func dsn(c pgconn.Config) string {
	quote := func(v string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'" }
	s := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", quote(c.Host), c.Port, quote(c.User), quote(c.Database))
	if c.Password != "" {
		s += " password=" + quote(c.Password)
	}
	return s
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// quiesce flushes the dirty pages earlier suites left behind (CHECKPOINT),
// so that their write-back does not land in the next timed run. It needs a
// superuser (the throwaway cluster's role is one); without it, runs go on.
func quiesce(ctx context.Context, pool *pgxpool.Pool) {
	_, _ = pool.Exec(ctx, "CHECKPOINT")
}
