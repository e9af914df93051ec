package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// brokerOptions are the flags of `redrive broker`.
type brokerOptions struct {
	port       int
	partitions int
	topics     []string
	autoCreate bool
	discard    bool
	logLevel   string
}

func brokerCmd() *cobra.Command {
	var o brokerOptions
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a one-broker in-process Kafka (kfake) until SIGTERM or SIGINT, for tests and local experiments",
		Long: `broker serves a fake Kafka (github.com/twmb/franz-go/pkg/kfake) in a process of
its own, so that a test can kill and restart 'redrive serve' while the broker and
its data stay up. It listens on 127.0.0.1 only, keeps everything in memory (all
data is gone when it exits), and logs the address it listens on. It is not a
production broker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBroker(cmd, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.port, "port", devKafkaPort, "port to listen on (0: any free port; the log says which)")
	f.IntVar(&o.partitions, "partitions", 3, "partitions of seeded topics and of topics created with the broker's default")
	f.StringSliceVar(&o.topics, "topics", nil, "topics to create at start, comma-separated")
	f.BoolVar(&o.autoCreate, "auto-create-topics", false, "create a topic when a client asks for one that does not exist")
	f.BoolVar(&o.discard, "discard-produced", false, "acknowledge produced records without keeping them (benchmarks: the broker's memory stays flat)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

func runBroker(cmd *cobra.Command, o brokerOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", o.logLevel)
	}
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port: %d is not a port (0 to 65535)", o.port)
	}
	if o.partitions < 1 {
		return fmt.Errorf("--partitions: %d must be at least 1", o.partitions)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "broker")

	opts := []kfake.Opt{kfake.Ports(o.port), kfake.DefaultNumPartitions(o.partitions)}
	var topics []string
	for _, t := range o.topics {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.partitions), topics...))
	}
	if o.autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if o.discard {
		opts = append(opts, kfake.BlackholeProduce())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start kfake on 127.0.0.1:%d (is the port taken?): %w", o.port, err)
	}
	defer cluster.Close()
	// Tests read this line to learn the address when they asked for port 0.
	log.Info("kafka broker listening", "addr", strings.Join(cluster.ListenAddrs(), ","),
		"partitions", o.partitions, "topics", topics, "auto_create_topics", o.autoCreate)

	<-cmd.Context().Done() // main's context ends on SIGTERM or SIGINT
	log.Info("kafka broker stopping")
	return nil
}
