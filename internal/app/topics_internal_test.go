package app

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/logtest"
)

// With creation off, a missing topic is reported again every recheck
// interval, and the setup ends once the topic exists.
func TestMissingTopicIsReportedAgainUntilItExists(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, "dlq")
	// Metadata no older than 10ms: the topic shows as soon as it is created.
	adm := kadm.NewClient(kafkatest.Client(t, brokers, kgo.MetadataMinAge(10*time.Millisecond)))
	var logs logtest.Buffer
	s := &topicSetup{
		admin: adm, topics: []ownTopic{{"dlq.archive", "archive"}}, log: logs.TextLogger(slog.LevelInfo),
		minWait: time.Millisecond, maxWait: time.Millisecond, recheck: 20 * time.Millisecond,
		reportEvery: time.Hour, attemptTimeout: 10 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { _ = s.loop().Run(ctx); close(done) }()

	const line = `level=ERROR msg="topic does not exist and REDRIVE_CREATE_TOPICS is false: create it" topic=dlq.archive used_for=archive`
	eventually.Nil(t, "the missing topic reported twice", func() error {
		if logs.Count(line) < 2 {
			return fmt.Errorf("the log says:\n%s", logs.String())
		}
		return nil
	})
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "dlq.archive"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the setup did not end once the topic existed")
	}
}
