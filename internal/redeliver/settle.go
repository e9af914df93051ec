package redeliver

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/store"
)

// settleWithinLease runs settle — the end of a claim whose records were
// produced — again while it fails (Postgres unreachable), with backoff,
// until the claim's lease would pass on clk (the claim expires at claimedAt
// plus lease): past it the claim is rescued and its records are produced
// again (the documented duplicate window), so trying longer would only race
// the rescuer. It reports whether the claim was settled.
func settleWithinLease(log *slog.Logger, clk clock.Clock, lease time.Duration, claimedAt time.Time, records int, settle func() error) bool {
	wait := 100 * time.Millisecond
	for {
		err := settle()
		switch {
		case err == nil:
			return true
		case errors.Is(err, store.ErrLeaseLost):
			log.Warn("claim expired before it was settled; its records are produced again", "records", records)
			return false
		case clock.Since(clk, claimedAt)+wait >= lease:
			log.Error("cannot settle claim within its lease; it will be rescued and its records produced again",
				"records", records, "err", err)
			return false
		}
		log.Warn("settle claim failed; retrying", "retry_in", wait, "err", err)
		// Not cut short at shutdown: what was produced is settled if it can be.
		clock.Sleep(context.Background(), clk, wait)
		wait = min(wait*2, 2*time.Second)
	}
}
