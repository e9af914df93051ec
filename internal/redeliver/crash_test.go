package redeliver_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/redeliver"
	"github.com/redrive/redrive/internal/store"
)

const (
	crashChildEnv   = "REDRIVE_CRASH_CHILD"
	crashDBEnv      = "REDRIVE_CRASH_DB"
	crashBrokersEnv = "REDRIVE_CRASH_BROKERS"
	crashExitCode   = 3
)

// crashChild runs a scheduler that dies, for real, right after producing and
// before marking anything.
func crashChild() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(crashDBEnv))
	if err != nil {
		os.Exit(1)
	}
	brokers := strings.Split(os.Getenv(crashBrokersEnv), ",")
	s, err := redeliver.New(redeliver.Config{Brokers: brokers, ClientOpts: kafkatest.ClientOpts(brokers)}, store.New(pool))
	if err != nil {
		os.Exit(1)
	}
	redeliver.SetAfterProduce(s, func() { os.Exit(crashExitCode) })
	_, _ = s.RunOnce(ctx)
	os.Exit(0) // not reached when anything was due
}

func TestCrashBetweenProduceAndMarkRedeliversAgain(t *testing.T) {
	b := setup(t, "orders")
	rec := b.due(t, "orders", 1)[0]

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildEnv+"=1", crashDBEnv+"="+b.url, crashBrokersEnv+"="+strings.Join(b.brokers, ","))
	err := child.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != crashExitCode {
		t.Fatalf("child scheduler: %v, want exit code %d (killed between produce and mark)", err, crashExitCode)
	}
	first := kafkatest.Consume(t, b.brokers, "orders", 1, 10*time.Second)
	if header(first[0], "redrive.id") != rec.ID {
		t.Fatalf("the child produced %q before dying, want %s", header(first[0], "redrive.id"), rec.ID)
	}
	got, err := b.store.Get(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != dlq.StateRetryable || got.Attempt != 1 || got.NextRetryAt == nil {
		t.Fatalf("after the crash the record is %s attempt %d next %v; want still retryable and due", got.State, got.Attempt, got.NextRetryAt)
	}

	// A surviving replica redelivers it again: at least once, never lost. The
	// dead child's locks go when Postgres notices its session is gone.
	survivor := b.scheduler(t, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := survivor.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record was never redelivered again after the crash")
		}
		time.Sleep(20 * time.Millisecond)
	}
	both := kafkatest.Consume(t, b.brokers, "orders", 2, 10*time.Second)
	for _, r := range both {
		if header(r, "redrive.id") != rec.ID || header(r, "redrive.attempt") != "2" {
			t.Fatalf("redelivery %v: want redrive.id %s attempt 2 (a consumer can dedupe)", r.Headers, rec.ID)
		}
	}
	if got, _ := b.store.Get(context.Background(), rec.ID); got.State != dlq.StateAvailable || got.Attempt != 2 {
		t.Fatalf("after redelivery the record is %s attempt %d, want available 2", got.State, got.Attempt)
	}
}
