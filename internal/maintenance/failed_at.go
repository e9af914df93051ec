package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/store"
)

// fillBatch is how many records one step of FillFailedAt looks at.
const fillBatch = 1000

// FillFailedAt gives the records stored before failed_at existed (the key
// of the list's "last failed" sort) their failed_at, walking every record
// once in id order, a batch at a time. It returns when it is through or ctx
// ends; a failed batch is tried again after a pause.
func FillFailedAt(ctx context.Context, st *store.Store, log *slog.Logger) {
	log = orLogger(log).With("component", "failed_at")
	after, done := "", 0
	for ctx.Err() == nil {
		last, n, err := st.FillFailedAt(ctx, after, fillBatch)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("fill failed_at of older records", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			continue
		}
		done += n
		if last == "" {
			if done > 0 {
				log.Info("filled failed_at of records stored before it existed", "records", done)
			}
			return
		}
		after = last
	}
}
