package app_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/apptest"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/pgtest"
)

// A start that fails half-way closes everything it opened. Binding the HTTP
// address is the last step of New: with the address taken, the Kafka
// clients of the scheduler, the archiver, ingest and the events producer,
// the Postgres pool and the SIGHUP relay were all opened before it, and must
// all be closed again. goleak finds any goroutine of theirs left running
// (a franz-go client runs several until it is closed).
//
// Not parallel: goleak looks at every goroutine of the process.
func TestAFailedStartClosesWhatItOpened(t *testing.T) {
	brokers := kafkatest.New(t, dlqTopic, dlqTopic+".archive", dlqTopic+".events")
	dbURL := pgtest.URL(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	opts := apptest.Options(t, brokers, dbURL, app.Options{}, "REDRIVE_HTTP_ADDR", taken.Addr().String())

	before := goleak.IgnoreCurrent() // the test's own Kafka and the goroutines of earlier tests
	a, err := app.New(context.Background(), opts)
	if err == nil {
		_ = a.Run(canceled())
		t.Fatalf("the app started on %s, an address already taken", taken.Addr())
	}
	if !strings.Contains(err.Error(), "listen on "+taken.Addr().String()) {
		t.Fatalf("New = %v, want the listen failure", err)
	}
	// The runtime's signal relay lives as long as the process once anything
	// asked for signals; it is not the app's.
	goleak.VerifyNone(t, before, goleak.IgnoreAnyFunction("os/signal.loop"))
}

// canceled is a context that has ended.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
