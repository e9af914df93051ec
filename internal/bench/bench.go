// Package bench measures Redrive's hot paths end to end against a raw baseline
// measured in the same run, on a throwaway Postgres and an in-process Kafka.
// It backs `redrive bench` (make bench); it is never imported by the processor.
package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/redrive/redrive/internal/store/rawbench"
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
	// APIRecords are the sizes (records stored) the api suite measures, one
	// after the other, each on a fresh database; given more than one, the
	// suite also prints each query's growth between the first and the last.
	// Default: [APIRecords] (1,000,000).
	APIRecords []int
	// RiverPeer is the riverpeer command (internal/bench/riverpeer, its own
	// module so that River stays a bench-only dependency) the redelivery
	// suite runs as its peer. Default: none, and River is not measured.
	RiverPeer string
	// Abuse sizes the abuse suite's attacks.
	Abuse AbuseConfig
	// NoIngestRules runs the ingest suite without its capacity rule and
	// ingest filter on the benched topic (ingestRulesPolicy). Default: with.
	NoIngestRules bool
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
	if len(c.APIRecords) == 0 {
		c.APIRecords = []int{APIRecords}
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return c
}

// quiet discards the components' logs so they do not disturb the figures.
var quiet = slog.New(slog.DiscardHandler)

// scratchDB creates a fresh, migrated database and returns it, its
// connection string and a cleanup function.
func scratchDB(ctx context.Context, serverURL string) (*rawbench.DB, string, func(), error) {
	return rawbench.Scratch(ctx, serverURL)
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// quiesce flushes the dirty pages earlier suites left behind (see
// rawbench.DB.Quiesce).
func quiesce(ctx context.Context, db *rawbench.DB) { db.Quiesce(ctx) }
