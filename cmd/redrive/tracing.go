package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/redrive/redrive/internal/tracing/otelenv"
)

// startTracing builds the tracer provider the OTEL_* environment asks for
// (docs/operations.md, Tracing) and says which one it is. stop flushes the
// spans not exported yet.
func startTracing(ctx context.Context, log *slog.Logger) (tp *otelenv.Setup, stop func(), err error) {
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	tp, err = otelenv.FromEnv(ctx, os.Getenv, version)
	if err != nil {
		return nil, nil, err
	}
	if tp.Enabled() {
		log.Info("tracing on", "component", "tracing", "exporter", tp.Exporter)
	}
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("flush spans at exit", "component", "tracing", "err", err)
		}
	}, nil
}
