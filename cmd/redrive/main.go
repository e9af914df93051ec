// Command redrive is Redrive's single binary: the processor (serve), the
// embedded development stack (dev), schema migrations and admin commands.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/redrive/redrive/internal/config"
)

func main() {
	if err := execute(); err != nil {
		fmt.Fprintln(os.Stderr, "redrive:", err)
		os.Exit(1)
	}
}

func execute() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return rootCmd().ExecuteContext(ctx)
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "redrive",
		Short:         "Redrive: a Kafka-native dead-letter processor",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), devCmd(), brokerCmd(), migrateCmd(), benchCmd(), policyCmd(), healthCmd())
	root.AddCommand(dlqCmd(), tasksCmd(), topicsCmd(), incidentsCmd(), apikeyCmd(), workersCmd())
	return root
}

// loadConfig reads the configuration from the environment and the command's flags.
func loadConfig(cmd *cobra.Command) (config.Config, error) {
	return config.Load(os.LookupEnv, cmd.Flags())
}

// newLogger builds the process logger from the configuration.
func newLogger(cfg config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	logger := slog.New(h)
	slog.SetDefault(logger)
	return logger
}
