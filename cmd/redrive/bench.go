package main

import (
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/bench"
)

func benchCmd() *cobra.Command {
	var cfg bench.Config
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure ingest throughput against a raw COPY baseline (throwaway Postgres, in-process Kafka)",
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
			_, err := bench.Ingest(cmd.Context(), cfg)
			return err
		},
	}
	cmd.Flags().IntVar(&cfg.Records, "records", 200_000, "DLQ records to ingest")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 1024, "bytes per record value")
	cmd.Flags().StringVar(&cfg.DatabaseURL, "database-url", "", "server to create a scratch database on (default: a throwaway cluster)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return cmd
}
