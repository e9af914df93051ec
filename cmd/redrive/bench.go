package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/bench"
)

// benchSuite runs one round of a benchmark and returns the ratios it measured.
type benchSuite struct {
	run func(context.Context, bench.Config) ([]bench.Figure, error)
	// once: the suite runs a single round whatever --rounds says (its
	// figures are latencies or memory over a million rows, not ratios).
	once bool
}

// benchSuites are the benchmarks `redrive bench --suite` can run.
var benchSuites = map[string]benchSuite{
	"ingest": {run: figuresOf(bench.Ingest)},
	"ingest-avro": {run: func(ctx context.Context, cfg bench.Config) ([]bench.Figure, error) {
		r, err := bench.IngestAvro(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return bench.AvroFigures(r), nil
	}},
	"redeliver": {run: figuresOf(bench.Redeliver)},
	"prune":     {run: figuresOf(bench.Prune)},
	"fairness":  {run: figuresOf(bench.Fairness)},
	"workers":   {run: figuresOf(bench.Workers)},
	"api": {once: true, run: func(ctx context.Context, cfg bench.Config) ([]bench.Figure, error) {
		return nil, bench.API(ctx, cfg)
	}},
	"abuse": {once: true, run: func(ctx context.Context, cfg bench.Config) ([]bench.Figure, error) {
		_, err := bench.Abuse(ctx, cfg)
		return nil, err
	}},
	"memory": {once: true, run: func(ctx context.Context, cfg bench.Config) ([]bench.Figure, error) {
		_, err := bench.Memory(ctx, cfg)
		return nil, err
	}},
}

func figuresOf[R interface{ Figures() []bench.Figure }](run func(context.Context, bench.Config) (R, error)) func(context.Context, bench.Config) ([]bench.Figure, error) {
	return func(ctx context.Context, cfg bench.Config) ([]bench.Figure, error) {
		res, err := run(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return res.Figures(), nil
	}
}

func benchCmd() *cobra.Command {
	var cfg bench.Config
	var cpuProfile string
	var suites []string
	var noRules bool
	var rounds int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the hot paths against raw baselines in the same run (throwaway Postgres, in-process Kafka)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.OutOrStdout()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			cfg.NoIngestRules = noRules
			for _, n := range cfg.APIRecords {
				if n < 1 {
					return fmt.Errorf("--api-records: want sizes of at least 1 record, got %d", n)
				}
			}
			if rounds < 1 {
				return fmt.Errorf("--rounds: want at least 1, got %d", rounds)
			}
			for _, suite := range suites {
				if _, ok := benchSuites[suite]; !ok {
					return fmt.Errorf("--suite: unknown suite %q (want one of %s)", suite, strings.Join(slices.Sorted(maps.Keys(benchSuites)), ", "))
				}
			}
			figures := make([][]bench.Figure, rounds)
			for round := range rounds {
				for _, name := range suites {
					suite := benchSuites[name]
					if suite.once && round > 0 {
						continue
					}
					if rounds > 1 {
						fmt.Fprintf(cfg.Out, "[round %d of %d] ", round+1, rounds)
					}
					got, err := suite.run(cmd.Context(), cfg)
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					figures[round] = append(figures[round], got...)
				}
			}
			fmt.Fprintln(cfg.Out)
			bench.Summarize(cfg.Out, figures)
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Records, "records", 200_000, "DLQ records to ingest")
	cmd.Flags().BoolVar(&noRules, "no-ingest-rules", false, "run the ingest suite without its capacity rule and ingest filter on the benched topic")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 1024, "bytes per record value")
	cmd.Flags().StringVar(&cfg.DatabaseURL, "database-url", "", "server to create a scratch database on (default: a throwaway cluster)")
	cmd.Flags().StringVar(&cfg.RiverPeer, "river-peer", "", "riverpeer binary the redelivery suite runs as its peer (make bench builds internal/bench/riverpeer); empty: River is not measured")
	cmd.Flags().IntVar(&cfg.MemoryRecords, "memory-records", 1_000_000, "records the memory suite ingests and bulk-retries")
	cmd.Flags().IntSliceVar(&cfg.APIRecords, "api-records", []int{bench.APIRecords}, "records the api suite stores before measuring; several sizes (1000000,5000000) run one after the other and print each query's growth")
	cmd.Flags().IntVar(&cfg.Abuse.Streams, "abuse-streams", 20_000, "idle event streams the abuse suite opens at once")
	cmd.Flags().IntVar(&cfg.Abuse.DistinctTypes, "abuse-types", 50_000, "records of distinct types the abuse suite stores")
	cmd.Flags().IntVar(&cfg.Abuse.DistinctTopics, "abuse-topics", 20_000, "records of distinct source topics the abuse suite stores")
	cmd.Flags().IntVar(&cfg.Abuse.BigValues, "abuse-big-values", 200, "900 KB records the abuse suite lists with 4 readers")
	cmd.Flags().StringSliceVar(&cfg.Abuse.Phases, "abuse-phases", nil, "attacks the abuse suite runs: poison, big-values, streams, cardinality (default: all)")
	cmd.Flags().StringSliceVar(&suites, "suite", []string{"ingest", "ingest-avro", "redeliver", "fairness", "prune", "api", "memory"}, "suites to run, in order")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "rounds of each suite; the summary gives each ratio's median and range (api runs once)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return cmd
}
