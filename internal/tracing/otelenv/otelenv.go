// Package otelenv builds the tracer provider the standard OTEL_* environment
// variables configure (docs/operations.md, Tracing). It is apart from package
// tracing so that the client library, which uses tracing, never links the
// SDK and its exporters.
package otelenv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Setup is the tracer provider the OTEL_* environment configures.
type Setup struct {
	// Provider is the provider to give Redrive's parts: a no-op one when
	// tracing is off.
	Provider trace.TracerProvider
	// Exporter says what spans go to: "none", "otlp (http/protobuf)" or
	// "otlp (grpc)".
	Exporter string
	shutdown func(context.Context) error
}

// Enabled reports whether spans are exported.
func (s *Setup) Enabled() bool { return s.shutdown != nil }

// Shutdown flushes the spans not exported yet and stops the exporter.
func (s *Setup) Shutdown(ctx context.Context) error {
	if s.shutdown == nil {
		return nil
	}
	return s.shutdown(ctx)
}

// Off is the Setup of tracing off.
func Off() *Setup { return &Setup{Provider: noop.NewTracerProvider(), Exporter: "none"} }

// FromEnv reads the standard OpenTelemetry environment variables
// (getenv is os.Getenv in production):
//
//   - OTEL_SDK_DISABLED=true turns tracing off;
//   - OTEL_TRACES_EXPORTER is otlp or none; unset, it is otlp when
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
//     set and none otherwise, so tracing costs nothing unless asked for;
//   - OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL is http/protobuf (the default)
//     or grpc.
//
// The exporter reads its own OTEL_EXPORTER_OTLP_* settings (endpoint,
// headers, timeout, certificates, compression), the SDK OTEL_TRACES_SAMPLER
// and OTEL_BSP_*, the resource OTEL_SERVICE_NAME (default "redrive") and
// OTEL_RESOURCE_ATTRIBUTES. Errors name the variable.
func FromEnv(ctx context.Context, getenv func(string) string, version string) (*Setup, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Off(), nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	if exporter == "" {
		exporter = "none"
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			exporter = "otlp"
		}
	}
	switch exporter {
	case "none":
		return Off(), nil
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported: use otlp or none", exporter)
	}
	protoVar, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		protoVar, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		proto = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%s: %q is not supported: use http/protobuf or grpc", protoVar, proto)
	}
	if err != nil {
		return nil, fmt.Errorf("create the otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("redrive"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Setup{Provider: tp, Exporter: "otlp (" + proto + ")", shutdown: tp.Shutdown}, nil
}
