package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store/rawbench"
)

// apiIngestRecords is how many records the api suite ingests through the
// real pipeline (kfake → ingest → COPY), once into an empty database and
// once into each loaded one: what a growing table costs the next failures.
const apiIngestRecords = 100_000

// apiIngestTarget bounds ingest into a loaded table against an empty one.
const apiIngestTarget = 0.8

// apiPruneAge is the retention the api suite prunes with: the loaded records
// are spread over 90 days, so about a fifth of them are older, and those that
// are settled (dead letters, discards, completed: 85%) go.
const apiPruneAge = 72 * 24 * time.Hour

// ingestInto ingests apiIngestRecords failures from a fresh topic into pool
// and returns the steady-state rate (records/s).
func ingestInto(ctx context.Context, pool *rawbench.DB, valueSize int) (float64, error) {
	const topic = "dead_letter_queue_api"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		return 0, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	if err := produceFailuresTo(ctx, brokers, topic, apiIngestRecords, valueSize); err != nil {
		return 0, err
	}
	d, n, err := timeIngestTopic(ctx, pool, brokers, topic, apiIngestRecords, nil)
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	return rate(n, d), nil
}

// emptyIngestRate measures ingestInto on a fresh, empty database.
func emptyIngestRate(ctx context.Context, cfg Config) (float64, error) {
	pool, _, cleanup, err := scratchDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	return ingestInto(ctx, pool, cfg.ValueSize)
}

// pruneOld runs one pruning pass that removes the settled records older than
// apiPruneAge, as the pruner does in production (batched deletes, each with
// its archive decision and events), and returns how many it removed and how
// long it took.
func pruneOld(ctx context.Context, pool *rawbench.DB) (int64, time.Duration, error) {
	pol := func(q string) policy.Topic {
		t := maintenance.DefaultPolicy(q)
		t.DeadLetter.Retention = policy.DeadLetterRetention{MaxAge: apiPruneAge}
		t.Retention = policy.Retention{Discarded: apiPruneAge, Completed: apiPruneAge, Cancelled: apiPruneAge}
		return t
	}
	pr, err := maintenance.NewPruner(maintenance.PrunerConfig{Deps: maintenance.Deps{Store: pool.Store(), Policy: pol, Logger: quiet}})
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	res, err := pr.RunOnce(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("prune: %w", err)
	}
	return res.Total(), time.Since(start), nil
}

// printIngestAndPrune prints one size's ingest ratio and pruning figures.
func printIngestAndPrune(out io.Writer, r *APIResult) {
	ratio := r.IngestRate / r.EmptyIngestRate
	fmt.Fprintf(out, "  ingest into %s      %9.0f records/s against %.0f into an empty table: %.2f (target >= %.1f: %s)\n",
		countLabel(r.Records), r.IngestRate, r.EmptyIngestRate, ratio, apiIngestTarget, okOrMissed(ratio >= apiIngestTarget))
	fmt.Fprintf(out, "  prune               %9d records older than %d days in %v (%.0f rows/s)\n",
		r.Pruned, int(apiPruneAge.Hours()/24), r.PruneTime.Round(time.Millisecond), rate(int(r.Pruned), r.PruneTime))
}
