package task

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store"
)

// A canary (docs/redelivery.md, Canary): the task retries its sample — the
// first SampleSize records of its filter, in id order — and notes what each
// was before (store.AddSample); once the whole sample is retried
// (sampled), it waits for the scheduler to redeliver it, at most one watch
// long, then watches it for one watch; then the verdict: aborted when the
// share of the sample that failed again the way it failed before reached
// AbortIfRefail; inconclusive when the watch ended with outcomes of the
// sample still pending (not redelivered, or not acknowledged), which stops
// the task (aborted) unless its canary says on_inconclusive: continue; else
// passed, and the task goes on with the rest. Every step
// is in the task's row (phase, sampled_at, watch_until on the runner's
// clock, the outcomes of the sample), so a runner that takes a task over
// resumes where the last one was.

// sampled notes that the whole sample was retried: it now waits for its
// redelivery.
func (r *Runner) sampled(ctx context.Context, t *store.Task, log *slog.Logger) (*store.Task, error) {
	now := r.cfg.Clock.Now()
	nt, err := r.store.UpdateCanary(ctx, t, store.CanaryUpdate{SampledAt: &now}, r.cfg.Lease)
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		log.Warn("task lease lost; another replica has it")
		return nil, err
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("canary: note the sample retried", "err", err)
		}
		r.release(t, log)
		return nil, err
	}
	log.Info("canary sample retried; waiting for its redelivery", "sample", nt.CanaryState.Sampled)
	return nt, nil
}

// watch runs the canary from its sample's redelivery to its verdict. It
// returns the task once the verdict let it go on (phase passed), or stop
// when the task ended here (aborted, cancelled, released, lost).
func (r *Runner) watch(ctx context.Context, t *store.Task, log *slog.Logger) (_ *store.Task, stop bool) {
	if t.CanaryState.SampledAt == nil {
		var err error
		if t, err = r.sampled(ctx, t, log); err != nil {
			return nil, true
		}
	}
	spec := t.Canary
	errs := 0
	for {
		if ctx.Err() != nil {
			r.release(t, log)
			return nil, true
		}
		if cancel, err := r.store.TaskCancelRequested(ctx, t.ID); err == nil && cancel {
			r.finish(ctx, t, store.TaskCancelled, log)
			return nil, true
		}
		rep, final, err := r.judge(ctx, t)
		if err != nil {
			errs++
			if errs == 1 || !store.Unavailable(err) {
				log.Warn("canary: cannot read the sample; trying again", "err", err)
			}
			if !clock.Sleep(ctx, r.cfg.Clock, min(outageBackoffCap, time.Duration(errs)*200*time.Millisecond)) {
				r.release(t, log)
				return nil, true
			}
			continue
		}
		errs = 0
		now := r.cfg.Clock.Now()
		u := store.CanaryUpdate{Report: &rep}
		phase := t.CanaryState.Phase
		if phase == store.CanarySample {
			// Redelivered (or gone) whole, or waited for one watch: the
			// watch begins. Records not redelivered by then stay pending.
			if rep.Delivered+rep.Deleted >= rep.Sample || !now.Before(t.CanaryState.SampledAt.Add(spec.WatchDuration())) {
				until := now.Add(spec.WatchDuration())
				u.Phase, u.WatchUntil, phase = store.CanaryWatch, &until, store.CanaryWatch
			}
		}
		switch {
		case refailed(&rep, spec):
			u.Phase = store.CanaryAborted
		case phase == store.CanaryWatch && final >= rep.Sample:
			// Every record's outcome is known for good (failed,
			// acknowledged or deleted): the rest may go.
			u.Phase = store.CanaryPassed
		case phase == store.CanaryWatch && u.WatchUntil == nil && !now.Before(*t.CanaryState.WatchUntil):
			// Watched long enough: the rest may go, unless outcomes are
			// still pending (not redelivered yet, or not acknowledged):
			// a sample nobody has seen through proves nothing.
			u.Phase = store.CanaryPassed
			if rep.Pending > 0 {
				u.Phase = store.CanaryInconclusive
			}
		}
		nt, err := r.store.UpdateCanary(ctx, t, u, r.cfg.Lease)
		if errors.Is(err, store.ErrLeaseLost) {
			log.Warn("task lease lost; another replica has it")
			return nil, true
		}
		if err != nil {
			log.Warn("canary: cannot save the report; trying again", "err", err)
			if !clock.Sleep(ctx, r.cfg.Clock, time.Second) {
				r.release(t, log)
				return nil, true
			}
			continue
		}
		t = nt
		if u.Phase != "" && u.Phase != store.CanarySample {
			r.cfg.OnCanary(t)
			log.Info("canary "+u.Phase, "sample", rep.Sample, "delivered", rep.Delivered, "completed", rep.Completed,
				"failed_same", rep.FailedSame, "failed_different", rep.FailedDifferent, "pending", rep.Pending,
				"deleted", rep.Deleted, "watch_until", t.CanaryState.WatchUntil)
		}
		switch t.CanaryState.Phase {
		case store.CanaryAborted:
			r.finish(ctx, t, store.TaskAborted, log)
			return nil, true
		case store.CanaryInconclusive:
			if spec.OnInconclusive == store.CanaryContinue {
				return t, false
			}
			r.finish(ctx, t, store.TaskAborted, log)
			return nil, true
		case store.CanaryPassed:
			return t, false
		}
		wait := r.cfg.Poll
		if w := t.CanaryState.WatchUntil; w != nil && t.CanaryState.Phase == store.CanaryWatch {
			wait = min(wait, max(w.Sub(now), time.Millisecond))
		}
		if !clock.Sleep(ctx, r.cfg.Clock, wait) {
			r.release(t, log)
			return nil, true
		}
	}
}

// refailed is the verdict "abort": the share of the sample that failed
// again the same way reached abort_if_refail (with 0, any one record).
func refailed(rep *store.CanaryReport, spec *store.CanarySpec) bool {
	return rep.Sample > 0 && rep.FailedSame > 0 && float64(rep.FailedSame)/float64(rep.Sample) >= spec.AbortIfRefail
}

// judge counts the sample's outcomes now, noting for good the records seen
// failing again, and how many outcomes are final (failed, acknowledged,
// deleted: nothing changes them any more).
func (r *Runner) judge(ctx context.Context, t *store.Task) (store.CanaryReport, int64, error) {
	recs, err := r.store.Sample(ctx, t.ID)
	if err != nil {
		return store.CanaryReport{}, 0, err
	}
	rep := store.CanaryReport{Sample: int64(len(recs))}
	var final int64
	var ids, outcomes []string
	for i := range recs {
		rec := &recs[i]
		outcome := rec.Outcome
		if outcome == "" && rec.FirstNew != nil {
			outcome = store.OutcomeFailedDifferent
			if failedSame(rec) {
				outcome = store.OutcomeFailedSame
			}
			ids, outcomes = append(ids, rec.ID), append(outcomes, outcome)
		}
		switch {
		case outcome == store.OutcomeFailedSame:
			rep.FailedSame++
		case outcome == store.OutcomeFailedDifferent:
			rep.FailedDifferent++
		case !rec.Present:
			rep.Deleted++
			final++
			continue
		case rec.Queued:
			rep.Pending++
			continue
		case rec.State == dlq.StateCompleted:
			rep.Completed++
			if rec.CompletedBy == dlq.CompletedByAck {
				final++
			}
		default: // redelivered, waiting for an acknowledgement (or changed by an operator)
			rep.Pending++
		}
		rep.Delivered++
		if outcome != "" {
			final++
		}
	}
	if err := r.store.SetSampleOutcomes(ctx, t.ID, ids, outcomes); err != nil {
		return store.CanaryReport{}, 0, err
	}
	return rep, final, nil
}

// failedSame says whether a sample record's first failure since its retry
// has the fingerprint it had before (its incident), or, stored before it
// had one, its latest error's then.
func failedSame(rec *store.SampleRecord) bool {
	before := rec.Fingerprint
	if before == "" && rec.LastError != nil {
		before = fingerprint.Of(rec.LastError.Type, rec.LastError.Message, rec.LastError.Backtrace)
	}
	e := rec.FirstNew
	return fingerprint.Of(e.Type, e.Message, e.Backtrace) == before
}
