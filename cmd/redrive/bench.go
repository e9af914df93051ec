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

// benchSuites are the benchmarks `redrive bench --suite` can run.
var benchSuites = map[string]func(context.Context, bench.Config) error{
	"ingest": func(ctx context.Context, cfg bench.Config) error { _, err := bench.Ingest(ctx, cfg); return err },
	"redeliver": func(ctx context.Context, cfg bench.Config) error {
		_, err := bench.Redeliver(ctx, cfg)
		return err
	},
	"prune": bench.Prune,
	"api":   bench.API,
}

func benchCmd() *cobra.Command {
	var cfg bench.Config
	var cpuProfile string
	var suites []string
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
			for _, suite := range suites {
				run, ok := benchSuites[suite]
				if !ok {
					return fmt.Errorf("--suite: unknown suite %q (want one of %s)", suite, strings.Join(slices.Sorted(maps.Keys(benchSuites)), ", "))
				}
				if err := run(cmd.Context(), cfg); err != nil {
					return fmt.Errorf("%s: %w", suite, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Records, "records", 200_000, "DLQ records to ingest")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 1024, "bytes per record value")
	cmd.Flags().StringVar(&cfg.DatabaseURL, "database-url", "", "server to create a scratch database on (default: a throwaway cluster)")
	cmd.Flags().StringSliceVar(&suites, "suite", []string{"ingest", "redeliver", "prune", "api"}, "suites to run, in order")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return cmd
}
