package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// decodeBatch is how many pending records one step reads and decodes.
const decodeBatch = 500

// SchemaDecoder decodes, in the background, the records ingest stored raw
// because their schema was not held yet (docs/schema-registry.md): it
// fetches each missing schema (from Postgres's schema cache, else the
// registry, the blocking path ingest never takes), decodes the records
// awaiting it and stores the result. An unknown schema id or bytes that do
// not match their schema end in the record's decode_error; while the
// registry is unreachable the records stay pending, nothing else waits,
// and it tries again with a growing backoff. What is left to do is in the
// data (decode_pending), so a restart resumes where it stopped.
//
// Ingest nudges it (Nudge) when a batch leaves records pending; it also
// looks every Interval. One replica does it at a time (a Postgres advisory
// lock; the others try again at their next pass).
type SchemaDecoder struct {
	service.Base
	loop *service.Loop
	wake chan struct{}
	warm func(ctx context.Context)
}

// SchemaDecoderConfig configures a SchemaDecoder. Zero fields take the
// defaults noted.
type SchemaDecoderConfig struct {
	// Store and Registry are required; Registry should be the one ingest
	// decodes with, so that a schema fetched here serves ingest from then on.
	Store    *store.Store
	Registry *schema.Registry
	// Interval is the longest wait between passes without a nudge. Default 1m.
	Interval time.Duration
	// Backoff is the wait after a pass the registry could not serve: from
	// 1s doubling to 1m by default.
	Backoff service.Backoff
	// Warm is how many schemas of Postgres's cache (the most recently
	// stored first) are loaded into the Registry's memory when the decoder
	// starts, in the background, so that after a restart ingest decodes
	// known schemas at once. Default 1000 (every schema of most
	// deployments; a compiled schema costs some memory, so the bound keeps
	// a huge cache from costing it at every start: older schemas are
	// fetched from Postgres when a record needs them). Negative: none.
	Warm int
	// Clock is what the waits are on. Default: clock.Wall.
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

func (c SchemaDecoderConfig) withDefaults() SchemaDecoderConfig {
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Warm == 0 {
		c.Warm = 1000
	}
	if c.Backoff.Min <= 0 {
		c.Backoff = service.Backoff{Min: time.Second, Max: time.Minute}
	}
	c.Clock = clock.Or(c.Clock)
	c.Logger = orLogger(c.Logger)
	c.Metrics = metrics.Or(c.Metrics)
	return c
}

// NewSchemaDecoder returns the decoder; Start it.
func NewSchemaDecoder(cfg SchemaDecoderConfig) *SchemaDecoder {
	cfg = cfg.withDefaults()
	d := &SchemaDecoder{wake: make(chan struct{}, 1)}
	log := cfg.Logger.With("component", "schema_decoder")
	d.warm = func(ctx context.Context) {
		n, err := cfg.Registry.Warm(ctx, cfg.Warm)
		switch {
		case err != nil && ctx.Err() == nil:
			// Not fatal: a schema missing from memory is fetched when a
			// record needs it.
			log.Warn("could not load the cached schemas into memory", "err", err)
		case n > 0:
			log.Info("loaded cached schemas into memory", "schemas", n)
		}
	}
	d.loop = &service.Loop{Clock: cfg.Clock, Logger: log, What: "decode records awaiting their schema",
		Interval: cfg.Interval, Wake: d.wake, Backoff: cfg.Backoff,
		Pass: func(ctx context.Context) (service.Next, error) {
			lock, ok, err := cfg.Store.TryAdvisoryLock(ctx, lockSchemaDecode)
			if err != nil {
				return service.Next{}, err
			}
			if !ok {
				log.Debug("another replica is decoding records; trying again later", "retry_in", cfg.Interval)
				return service.Next{}, nil
			}
			res, err := decodePending(ctx, &cfg)
			lock.Release()
			if res.decoded+res.failed > 0 {
				log.Info("decoded records awaiting their schema", "decoded", res.decoded, "failed", res.failed, "waiting", res.waiting)
			}
			return service.Next{}, err
		}}
	return d
}

// Nudge makes the decoder look for pending records now. It never blocks.
func (d *SchemaDecoder) Nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Name implements service.Service.
func (d *SchemaDecoder) Name() string { return "schema_decoder" }

// Start runs the decoder in the background: it first loads the schemas of
// Postgres's cache into memory (start-up never waits on it), then decodes.
func (d *SchemaDecoder) Start(ctx context.Context) error { return d.Go(ctx, d.Run) }

// Run loads the cached schemas into memory, then runs the decoder until
// ctx ends.
func (d *SchemaDecoder) Run(ctx context.Context) error {
	d.warm(ctx)
	return d.loop.Run(ctx)
}

type decodeCounts struct{ decoded, failed, waiting int }

// decodePending is one pass over every pending record, in id order. It
// returns an error wrapping schema.ErrRegistryUnavailable when some records
// had to be left pending, so that the loop backs off.
func decodePending(ctx context.Context, cfg *SchemaDecoderConfig) (decodeCounts, error) {
	var res decodeCounts
	var unavailable error // once the registry fails, no more fetches this pass
	fetched := map[int]error{}
	fetch := func(id int) error {
		if err, ok := fetched[id]; ok {
			return err
		}
		if _, ok := cfg.Registry.Cached(id); !ok && unavailable != nil {
			return unavailable
		}
		_, err := cfg.Registry.Fetch(ctx, id)
		if errors.Is(err, schema.ErrRegistryUnavailable) {
			unavailable = err
		}
		fetched[id] = err
		return err
	}
	after := ""
	for {
		recs, err := cfg.Store.PendingDecodes(ctx, after, decodeBatch)
		if err != nil {
			return res, err
		}
		if len(recs) == 0 {
			break
		}
		out := make([]store.Decoding, 0, len(recs))
		for _, r := range recs {
			d := store.Decoding{ID: r.ID}
			var errs []string
			wait := false
			for _, part := range []struct {
				name string
				b    []byte
			}{{"value", r.Value}, {"key", r.Key}} {
				id, _, err := schema.SplitHeader(part.b)
				if err != nil {
					continue
				}
				if err := fetch(id); err != nil {
					if errors.Is(err, schema.ErrRegistryUnavailable) || ctx.Err() != nil {
						wait = true
						continue
					}
					errs = append(errs, part.name+": "+err.Error())
					cfg.Metrics.Schema.Decoded("", metrics.DecodeError)
					continue
				}
				dec, err := cfg.Registry.Decode(part.b)
				if err != nil {
					errs = append(errs, part.name+": "+err.Error())
					s, _ := cfg.Registry.Cached(id)
					cfg.Metrics.Schema.Decoded(formatOf(s), metrics.DecodeError)
					continue
				}
				cfg.Metrics.Schema.Decoded(string(dec.Format), metrics.DecodeDecoded)
				if part.name == "value" {
					d.ValueSchema, d.Payload = store.SchemaRefOf(dec), dec.Payload
				} else {
					d.KeySchema, d.KeyPayload = store.SchemaRefOf(dec), dec.Payload
				}
			}
			if wait {
				res.waiting++
				continue
			}
			if len(errs) > 0 {
				d.DecodeError = errs[0]
				if len(errs) > 1 {
					d.DecodeError += "; " + errs[1]
				}
				res.failed++
			} else {
				res.decoded++
			}
			out = append(out, d)
		}
		if err := cfg.Store.SetDecoded(ctx, out); err != nil {
			return res, err
		}
		if len(recs) < decodeBatch {
			break
		}
		after = recs[len(recs)-1].ID
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if res.waiting > 0 && unavailable != nil {
		return res, fmt.Errorf("%d records wait for their schema: %w", res.waiting, unavailable)
	}
	return res, nil
}

func formatOf(s *schema.Schema) string {
	if s == nil {
		return ""
	}
	return string(s.Source.Format)
}
