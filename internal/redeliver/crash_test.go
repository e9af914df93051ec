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

	"github.com/redrive/redrive/internal/clock"
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
// before settling its claim.
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

func TestCrashBetweenProduceAndSettleRedeliversAgain(t *testing.T) {
	b := setup(t, "orders")
	rec := b.due(t, "orders", 1)[0]

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildEnv+"=1", crashDBEnv+"="+b.url, crashBrokersEnv+"="+strings.Join(b.brokers, ","))
	err := child.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != crashExitCode {
		t.Fatalf("child scheduler: %v, want exit code %d (killed between produce and settle)", err, crashExitCode)
	}
	first := kafkatest.Consume(t, b.brokers, "orders", 1, 10*time.Second)
	if header(first[0], "redrive.id") != rec.ID {
		t.Fatalf("the child produced %q before dying, want %s", header(first[0], "redrive.id"), rec.ID)
	}
	// The claim was committed before the produce: the record is in flight
	// while its lease runs on, shown as it was (retryable, attempt 1, never
	// redelivered): nobody knows yet whether the produce landed.
	got, err := b.store.Get(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != dlq.StateRetryable || got.Attempt != 1 || got.RedeliveredAt != nil || !got.InFlight {
		t.Fatalf("after the crash the record is %s attempt %d redelivered %v in flight %t; want retryable, attempt 1, never, in flight",
			got.State, got.Attempt, got.RedeliveredAt, got.InFlight)
	}
	survivor := b.scheduler(t, nil)
	if n, err := survivor.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("a survivor redelivered %d (%v) while the dead child's lease still ran", n, err)
	}

	// Once the lease passed, a surviving replica rescues the claim and
	// redelivers the record again with the same id and attempt: at least
	// once, never lost, and a consumer can dedupe.
	b.clock.Advance(31 * time.Second)
	if n, err := survivor.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("after the lease the survivor redelivered %d (%v), want 1", n, err)
	}
	both := kafkatest.Consume(t, b.brokers, "orders", 2, 10*time.Second)
	for _, r := range both {
		if header(r, "redrive.id") != rec.ID || header(r, "redrive.attempt") != "2" {
			t.Fatalf("redelivery %v: want redrive.id %s attempt 2 (a consumer can dedupe)", r.Headers, rec.ID)
		}
	}
	if got, _ := b.store.Get(context.Background(), rec.ID); got.State != dlq.StateCompleted || got.Attempt != 2 || got.InFlight {
		t.Fatalf("after redelivery the record is %s attempt %d in flight %t, want completed 2, settled", got.State, got.Attempt, got.InFlight)
	}
	var claims int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM redrive_claim").Scan(&claims); err != nil || claims != 0 {
		t.Fatalf("%d claims left (%v), want 0", claims, err)
	}
}

func TestShutdownAfterProduceSettlesTheBatch(t *testing.T) {
	b := setup(t, "orders")
	recs := b.due(t, "orders", 20)
	// One worker: the one claim takes all 20. (With two, a second claim may
	// still be running when the shutdown cancels it; its records are then
	// rightly never claimed, which is not what this test is about.)
	s := b.scheduler(t, nil, func(c *redeliver.Config) { c.Clock, c.Workers = clock.Wall, 1 })
	ctx, cancel := context.WithCancel(context.Background())
	// SIGTERM arrives while the batch is produced.
	redeliver.SetAfterProduce(s, cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		got, err := b.store.Get(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != dlq.StateCompleted || got.Attempt != 2 || got.NextRetryAt != nil || got.InFlight {
			t.Fatalf("record %s after a shutdown mid-batch: %s attempt %d next %v in flight %t; want completed 2, settled (it was produced)",
				r.ID, got.State, got.Attempt, got.NextRetryAt, got.InFlight)
		}
	}
	var claims int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM redrive_claim").Scan(&claims); err != nil || claims != 0 {
		t.Fatalf("%d claims left open after shutdown (%v): the batch was not settled", claims, err)
	}
}
