package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/pgcluster"
)

// devKafkaPort is where `redrive dev` serves its in-process Kafka, so that real
// clients (kcat -b 127.0.0.1:9092) can reach it.
const devKafkaPort = 9092

const noPostgresHelp = `redrive dev needs PostgreSQL, and found neither DATABASE_URL nor the PostgreSQL server binaries.
Do one of:
  - install the PostgreSQL server (Debian/Ubuntu: sudo apt-get install postgresql; macOS: brew install postgresql)
    and run 'make run' again: dev starts a throwaway cluster from those binaries;
  - point it at a server you have: DATABASE_URL=postgres://user:pass@localhost:5432/redrive make run;
  - or run the full stack in containers: docker compose up`

// tourTopics are the source topics the README's tour uses.
var tourTopics = []string{"orders", "inventory"}

func devCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: in-process Kafka on 127.0.0.1:9092, a throwaway Postgres, the API on :8080",
		Long: `dev is the embedded default for trying Redrive and for local development.
It starts an in-process Kafka broker (kfake) on 127.0.0.1:9092 that real clients
such as kcat can reach (--kafka-port moves it), uses DATABASE_URL (or REDRIVE_DATABASE_URL) if set or else
a throwaway Postgres from the local PostgreSQL binaries, applies migrations, and
serves the API without authentication. Nothing it stores survives a restart
unless DATABASE_URL is set.`,
		Args: cobra.NoArgs,
		RunE: runDev,
	}
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().Int("kafka-port", devKafkaPort, "port of the in-process Kafka (0: any free port)")
	return cmd
}

// devBanner is what dev prints on stdout once it is ready: where the
// console, the API and Kafka are. The README's tour shows it.
func devBanner(httpAddr string, brokers []string) string {
	base := "http://localhost" + portOf(httpAddr)
	return fmt.Sprintf(`redrive dev is ready (auth is off; nothing is kept unless DATABASE_URL is set):
  console  %s/ui/
  API      %s/ojs/v1/dead-letter
  Kafka    %s
`, base, base, strings.Join(brokers, ","))
}

func runDev(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	cfg, err := loadConfig(cmd)
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	cfg.MigrateOnStart = true
	cfg.AuthDisabled = true
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	if cfg.DatabaseURL == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
		if errors.Is(err, pgcluster.ErrNoBinaries) {
			return errors.New(noPostgresHelp)
		}
		if err != nil {
			return fmt.Errorf("start throwaway postgres: %w", err)
		}
		defer cluster.Stop()
		cfg.DatabaseURL = cluster.URL("postgres")
		log.Info("throwaway postgres started; its data is deleted on exit",
			"component", "dev", "psql", "psql -h "+cluster.SocketDir()+" -U postgres")
	}

	port, err := cmd.Flags().GetInt("kafka-port")
	if err != nil {
		return err
	}
	broker, err := kfake.NewCluster(
		kfake.Ports(port),
		kfake.DefaultNumPartitions(3),
		kfake.AllowAutoTopicCreation(),
		kfake.SeedTopics(3, cfg.DLQTopics...),
		// The README tour's source topics: consuming one before its first
		// redelivery must not fail with "Unknown topic".
		kfake.SeedTopics(3, tourTopics...),
	)
	if err != nil {
		return fmt.Errorf("start in-process kafka on 127.0.0.1:%d (is the port taken?): %w", port, err)
	}
	defer broker.Close()
	cfg.KafkaBrokers = broker.ListenAddrs()
	log.Info("in-process kafka started", "component", "dev", "brokers", cfg.KafkaBrokers, "dlq_topics", cfg.DLQTopics)

	// Topics appear on first use, as on a laptop broker: redelivering to a
	// topic nobody created yet (the README's tour) just works.
	tp, stop, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stop()
	a, err := app.New(ctx, app.Options{Config: cfg, Logger: log, ExtraKafkaOpts: []kgo.Opt{kgo.AllowAutoTopicCreation()},
		TracerProvider: tp.Provider})
	if err != nil {
		return err
	}
	base := "http://localhost" + portOf(a.Addr())
	log.Info("redrive dev is ready", "component", "dev", "console", base+"/ui/", "api", base+"/ojs/v1/dead-letter")
	fmt.Fprint(cmd.OutOrStdout(), devBanner(a.Addr(), cfg.KafkaBrokers))
	return a.Run(ctx)
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i:]
		}
	}
	return addr
}
