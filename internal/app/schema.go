package app

import (
	"fmt"

	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/schema"
)

// initSchemas builds the Schema Registry client and the background decoder
// when a registry is configured (docs/schema-registry.md): ingest decodes
// with the schemas the client holds, the decoder fetches the others, and
// the store keeps every schema fetched, so known ones decode while the
// registry is unreachable, across restarts.
func (a *App) initSchemas() error {
	cfg := a.opts.Config.SchemaRegistry
	if !cfg.Enabled() {
		return nil
	}
	tlsCfg, err := cfg.TLSConfig()
	if err != nil {
		return err
	}
	a.schemas, err = schema.New(schema.Config{
		URLs: cfg.URLs, Username: cfg.Username, Password: cfg.Password, BearerToken: cfg.BearerToken,
		TLS: tlsCfg, Timeout: cfg.Timeout, Observe: a.metrics.Schema.Observe, Logger: a.log,
	}, a.store)
	if err != nil {
		return fmt.Errorf("schema registry: %w", err)
	}
	a.decoder = maintenance.NewSchemaDecoder(maintenance.SchemaDecoderConfig{
		Store: a.store, Registry: a.schemas, Clock: a.clock, Logger: a.log, Metrics: a.metrics,
	})
	return nil
}

// decodePending nudges the background decoder; nil without a registry.
func (a *App) decodePending() func() {
	if a.decoder == nil {
		return nil
	}
	return a.decoder.Nudge
}
