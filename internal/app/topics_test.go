package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
)

// partitions returns each topic's partition count; a missing topic is absent.
func partitions(t *testing.T, adm *kadm.Client, topics ...string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	out := map[string]int{}
	for _, d := range details {
		if !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			out[d.Topic] = len(d.Partitions)
		}
	}
	return out
}

// Against a cluster that does not auto-create topics, serve creates an archive
// topic per DLQ topic and the events topic, with the configured partition
// count, and logs each.
func TestArchiveAndEventsTopicsAreCreatedAtStart(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders")
	var logs logtest.Buffer
	start(t, brokers, logs.JSONLogger(slog.LevelDebug), "REDRIVE_DLQ_TOPICS", dlqTopic+",orders", "REDRIVE_TOPIC_PARTITIONS", "5")
	want := []string{dlqTopic + ".archive", dlqTopic + ".events", "orders.archive"}
	for _, topic := range want {
		eventually.True(t, "the log of "+topic, func() bool {
			return len(logs.Find("topic created", map[string]any{"level": "INFO", "component": "app", "topic": topic})) == 1
		})
	}
	// A new client: metadata fetched after the creation.
	got := partitions(t, kadm.NewClient(kafkatest.Client(t, brokers)), want...)
	if !slices.Equal(sortedKeys(got), want) {
		t.Fatalf("topics %v, want %v", got, want)
	}
	for _, topic := range want {
		if got[topic] != 5 {
			t.Errorf("%s has %d partitions, want 5 (REDRIVE_TOPIC_PARTITIONS)", topic, got[topic])
		}
	}
}

// The broker's defaults apply when the partition count is left at -1; a
// single archive topic is created once for every DLQ topic; "off" creates none.
func TestTopicCreationDefaultsAndOff(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders")
	var logs logtest.Buffer
	start(t, brokers, logs.JSONLogger(slog.LevelDebug), "REDRIVE_DLQ_TOPICS", dlqTopic+",orders", "REDRIVE_ARCHIVE_TOPIC", "all.archive", "REDRIVE_EVENTS_TOPIC", "off")
	eventually.True(t, "the archive topic", func() bool { return len(logs.Find("topic created", map[string]any{"topic": "all.archive"})) == 1 })
	got := partitions(t, kadm.NewClient(kafkatest.Client(t, brokers)), "all.archive", dlqTopic+".events", dlqTopic+".archive", "orders.archive")
	if len(got) != 1 || got["all.archive"] != kafkatest.Partitions {
		t.Errorf("topics %v, want only all.archive with the broker's default of %d partitions", got, kafkatest.Partitions)
	}
	if n := len(logs.Find("topic created", nil)); n != 1 {
		t.Errorf("%d topics created, want 1", n)
	}
}

// With REDRIVE_CREATE_TOPICS=false nothing is created, and an error names
// every missing topic.
func TestMissingTopicsAreOnlyReportedWhenCreationIsOff(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, dlqTopic, "orders")
	var logs logtest.Buffer
	start(t, brokers, logs.JSONLogger(slog.LevelDebug), "REDRIVE_CREATE_TOPICS", "false")
	for _, topic := range []string{dlqTopic + ".archive", dlqTopic + ".events"} {
		eventually.True(t, "an error naming "+topic, func() bool {
			return len(logs.Find("topic does not exist", map[string]any{"level": "ERROR", "component": "app", "topic": topic})) == 1
		})
	}
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	if got := partitions(t, adm, dlqTopic+".archive", dlqTopic+".events"); len(got) != 0 {
		t.Errorf("topics created with REDRIVE_CREATE_TOPICS=false: %v", got)
	}
	if got := logs.Find("topic created", nil); len(got) != 0 {
		t.Errorf("logged %v", got)
	}
}

// Kafka down at start holds nothing up: the API serves at once, and the
// topics are created once the broker is there.
func TestTopicsAreCreatedWhenKafkaComesUpAfterStart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	brokers := []string{ln.Addr().String()}
	var logs logtest.Buffer
	b := start(t, brokers, logs.JSONLogger(slog.LevelDebug))
	if code := b.get(t, "/healthz", nil); code != http.StatusOK {
		t.Fatalf("healthz = %d while Kafka is down", code)
	}

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DefaultNumPartitions(kafkatest.Partitions),
		kfake.SeedTopics(kafkatest.Partitions, dlqTopic))
	if err != nil {
		t.Fatalf("start kfake on port %d: %v", port, err)
	}
	t.Cleanup(c.Close)
	want := []string{dlqTopic + ".archive", dlqTopic + ".events"}
	for _, topic := range want {
		eventually.True(t, topic+" created once Kafka came up", func() bool {
			return len(logs.Find("topic created", map[string]any{"topic": topic})) > 0
		}, eventually.Within(60*time.Second))
	}
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	if got := partitions(t, adm, want...); !slices.Equal(sortedKeys(got), want) {
		t.Errorf("topics %v, want %v", got, want)
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// /readyz fails, naming it, while a DLQ topic does not exist, and turns ready
// once it is created.
func TestReadinessNamesAMissingDLQTopic(t *testing.T) {
	b := setup(t, "REDRIVE_DLQ_TOPICS", dlqTopic+",orders.dlq")
	var notReady struct {
		Error struct {
			Details struct {
				Checks map[string]string `json:"checks"`
			} `json:"details"`
		} `json:"error"`
	}
	code := b.get(t, "/readyz", &notReady)
	checks := notReady.Error.Details.Checks
	if code != http.StatusServiceUnavailable || checks["dlq_topics"] != `DLQ topic "orders.dlq" does not exist` ||
		checks["kafka"] != "ok" || checks["postgres"] != "ok" {
		t.Fatalf("readyz = %d %v, want 503 naming orders.dlq and only it", code, checks)
	}

	adm := kadm.NewClient(kafkatest.Client(t, b.brokers))
	if _, err := adm.CreateTopic(context.Background(), 1, -1, nil, "orders.dlq"); err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	eventually.Nil(t, "/readyz ok after orders.dlq was created", func() error {
		if code := b.get(t, "/readyz", nil); code != http.StatusOK {
			return fmt.Errorf("readyz = %d", code)
		}
		return nil
	})
	if code := b.get(t, "/readyz", &ready); code != http.StatusOK || ready.Checks["dlq_topics"] != "ok" {
		t.Errorf("readyz = %d %v", code, ready.Checks)
	}
}
