// Package apptest runs a whole Redrive processor inside a test: the app that
// `redrive serve` runs, against in-process Kafka (kafkatest) and a test
// database (pgtest), configured as an operator would, by REDRIVE_* settings.
package apptest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redrive/redrive/internal/app"
	"github.com/redrive/redrive/internal/config"
	"github.com/redrive/redrive/internal/kafkatest"
)

// Start runs a processor on brokers and the database at dbURL, with the
// options Options fills.
//
// stop cancels the processor and waits for it to return, failing the test if
// it returned an error; the test's cleanup calls it too.
func Start(t testing.TB, brokers []string, dbURL string, opts app.Options, env ...string) (a *app.App, stop func()) {
	t.Helper()
	opts = Options(t, brokers, dbURL, opts, env...)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("app Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return a, stop
}

// Options fills opts for a processor on brokers and the database at dbURL.
// Its settings are a test's defaults (the API on a free port of 127.0.0.1,
// auth off, no policy files) overridden by env, given as "NAME", "value"
// pairs; opts gets the Config and the in-process Kafka's client options.
func Options(t testing.TB, brokers []string, dbURL string, opts app.Options, env ...string) app.Options {
	t.Helper()
	settings := map[string]string{
		"REDRIVE_KAFKA_BROKERS": strings.Join(brokers, ","),
		"REDRIVE_DATABASE_URL":  dbURL,
		"REDRIVE_HTTP_ADDR":     "127.0.0.1:0",
		"REDRIVE_AUTH_DISABLED": "true",
		"REDRIVE_POLICIES_DIR":  "",
	}
	for i := 0; i+1 < len(env); i += 2 {
		settings[env[i]] = env[i+1]
	}
	cfg, err := config.Load(func(k string) (string, bool) {
		v, ok := settings[k]
		return v, ok
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Config = cfg
	opts.ExtraKafkaOpts = append(opts.ExtraKafkaOpts, kafkatest.ClientOpts(brokers)...)
	return opts
}
