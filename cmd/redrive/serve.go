package main

import (
	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/config"
)

func serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the processor: ingest DLQ topics into Postgres and serve the API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			log := newLogger(cfg)
			tp, stop, err := startTracing(cmd.Context(), log)
			if err != nil {
				return err
			}
			defer stop()
			a, err := app.New(cmd.Context(), app.Options{Config: cfg, Logger: log, TracerProvider: tp.Provider})
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	config.RegisterFlags(cmd.Flags())
	return cmd
}
