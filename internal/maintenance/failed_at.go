package maintenance

import (
	"context"

	"github.com/redrive/redrive/internal/service"
)

// fillBatch is how many records one step of FailedAtFill looks at.
const fillBatch = 1000

// FailedAtFill gives the records stored before failed_at existed (the key
// of the list's "last failed" sort) their failed_at, walking every record
// once in id order, a batch at a time; a failed batch is tried again after
// Retry. It is a service.Service whose work ends when it is through.
type FailedAtFill struct {
	service.Base
	loop *service.Loop
}

// NewFailedAtFill returns the fill; Start it, or Run it to the end.
func NewFailedAtFill(cfg BackfillConfig) *FailedAtFill {
	cfg = cfg.withDefaults()
	st, log := cfg.Store, cfg.Logger.With("component", "failed_at")
	after, done := "", 0
	return &FailedAtFill{loop: &service.Loop{Clock: cfg.Clock, Logger: log, What: "fill failed_at of older records",
		Interval: cfg.Retry, Pass: func(ctx context.Context) (service.Next, error) {
			last, n, err := st.FillFailedAt(ctx, after, fillBatch)
			if err != nil {
				return service.Next{}, err
			}
			done += n
			if last == "" {
				if done > 0 {
					log.Info("filled failed_at of records stored before it existed", "records", done)
				}
				return service.Next{Done: true}, nil
			}
			after = last
			return service.Next{More: true}, nil
		}}}
}

// Name implements service.Service.
func (f *FailedAtFill) Name() string { return "failed_at" }

// Start runs the fill in the background.
func (f *FailedAtFill) Start(ctx context.Context) error { return f.Go(ctx, f.Run) }

// Run does the fill and returns when it is through or ctx ends.
func (f *FailedAtFill) Run(ctx context.Context) error { return f.loop.Run(ctx) }
