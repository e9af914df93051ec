package main

import (
	"errors"
	"fmt"
	"net"
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
such as kcat can reach (--kafka-port or REDRIVE_KAFKA_PORT moves it; --http-addr
or REDRIVE_HTTP_ADDR moves the API), uses DATABASE_URL (or REDRIVE_DATABASE_URL)
if set or else a throwaway Postgres from the local PostgreSQL binaries, applies
migrations, and serves the API without authentication. Nothing it stores
survives a restart unless DATABASE_URL is set. Once ready it prints where
everything is, and the REDRIVE_API_URL to export for the admin commands.

Dev's clients use its own broker: the Kafka connection settings of serve
(--kafka-brokers, the Kafka TLS and SASL flags) do not apply, are not listed
here, and are refused when given; their REDRIVE_KAFKA_* variables are ignored
with a warning. To process a Kafka of yours, run redrive serve.`,
		Args: cobra.NoArgs,
		RunE: runDev,
	}
	config.RegisterFlags(cmd.Flags())
	config.RegisterDevFlags(cmd.Flags())
	for _, s := range devIgnored() {
		_ = cmd.Flags().MarkHidden(s.Flag) // registered just above
	}
	return cmd
}

// devIgnored are the settings of serve that do not apply to dev: how to
// reach and authenticate to a broker of yours. Dev's clients use its
// in-process broker, in plain text.
func devIgnored() []config.Setting {
	var out []config.Setting
	for _, s := range config.Settings {
		if s.Flag == "kafka-brokers" || strings.HasPrefix(s.Flag, "kafka-tls") ||
			strings.HasPrefix(s.Flag, "kafka-sasl") || strings.HasPrefix(s.Flag, "kafka-oauth") {
			out = append(out, s)
		}
	}
	return out
}

// checkDevIgnored refuses a flag of devIgnored given to dev, and returns the
// variables of them that are set, which dev ignores (a shell may well hold
// them for serve).
func checkDevIgnored(cmd *cobra.Command, lookup config.Lookup) ([]string, error) {
	var ignored []string
	for _, s := range devIgnored() {
		if cmd.Flags().Changed(s.Flag) {
			return nil, fmt.Errorf("--%s does not apply to redrive dev: it runs its own Kafka on 127.0.0.1 "+
				"(--kafka-port or REDRIVE_KAFKA_PORT moves it); to process a Kafka of yours, run redrive serve", s.Flag)
		}
		if _, ok := lookup(s.Env); ok {
			ignored = append(ignored, s.Env)
		}
	}
	return ignored, nil
}

// devBanner is what dev prints on stdout once it is ready: where the
// console, the API and Kafka are, and the line that points the admin
// commands (redrive dlq …) at this API. The README's tour shows it.
func devBanner(httpAddr string, brokers []string) string {
	base := devBaseURL(httpAddr)
	return fmt.Sprintf(`redrive dev is ready (auth is off; nothing is kept unless DATABASE_URL is set):
  console  %s/ui/
  API      %s/ojs/v1/dead-letter
  Kafka    %s
The admin commands (redrive dlq …) find this API with:
  export REDRIVE_API_URL=%s
`, base, base, strings.Join(brokers, ","), base)
}

// devBaseURL is the URL of the API listening on addr, as a browser or the
// CLI on this machine reaches it: localhost for a wildcard or loopback
// address, else the host it listens on.
func devBaseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || host == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func runDev(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	ignored, err := checkDevIgnored(cmd, os.LookupEnv)
	if err != nil {
		return err
	}
	cfg, err := config.LoadDev(os.LookupEnv, cmd.Flags())
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	if len(ignored) > 0 {
		log.Warn("redrive dev uses its in-process Kafka: these settings do not apply to it and are ignored",
			"component", "dev", "ignored", ignored)
	}
	cfg.Kafka = config.KafkaSecurity{} // plain text, as the in-process broker speaks
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

	port := cfg.DevKafkaPort
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
		return fmt.Errorf("start in-process kafka on 127.0.0.1:%d (is the port taken? REDRIVE_KAFKA_PORT or --kafka-port moves it): %w", port, err)
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
	base := devBaseURL(a.Addr())
	log.Info("redrive dev is ready", "component", "dev", "console", base+"/ui/", "api", base+"/ojs/v1/dead-letter")
	fmt.Fprint(cmd.OutOrStdout(), devBanner(a.Addr(), cfg.KafkaBrokers))
	return a.Run(ctx)
}
