package policy

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/testdate"
)

// The policies/ directory shipped with Redrive loads and declares no topic —
// a fresh start shows no queue nobody created — and the examples in
// policies/examples (never loaded from there) load over it and resolve the
// Integr8sCode topic profiles as that write-up describes them.
func TestShippedPolicies(t *testing.T) {
	t.Parallel()
	shipped, err := LoadDir("../../policies")
	if err != nil {
		t.Fatalf("shipped policies do not load:\n%v", err)
	}
	if got := shipped.Files(); len(got) != 1 || filepath.Base(got[0]) != "default.yaml" {
		t.Errorf("policies/ loads %q; examples belong in policies/examples", got)
	}
	if len(shipped.Topics()) != 0 {
		t.Errorf("policies/ declares topics %v: they would show as queues on a fresh overview", shipped.Topics())
	}
	examples, _ := filepath.Glob("../../policies/examples/*.y*ml")
	if len(examples) == 0 {
		t.Fatal("no examples in policies/examples")
	}
	set, err := LoadFiles(append([]string{"../../policies/default.yaml"}, examples...)...)
	if err != nil {
		t.Fatalf("example policies do not load over policies/default.yaml:\n%v", err)
	}

	// _default: production defaults for any topic without an entry.
	other := set.Resolve("billing.invoices", "invoice.created")
	if other.DeclaredIn != "" {
		t.Errorf("billing.invoices declared in %q", other.DeclaredIn)
	}
	if filepath.Base(set.Topics()["execution-requests"]) != "integr8scode.yaml" {
		t.Errorf("Topics() = %v", set.Topics())
	}
	r := other.Retry
	if r.OnExhaustion != dlq.ExhaustionDeadLetter || other.PruningPolicy != PruneArchive || r.BackoffStrategy != StrategyExponential ||
		!r.Jitter || r.MaxAttempts < 3 || other.MaxAge != 7*day || other.DeadLetter.Retention != (DeadLetterRetention{180 * day, 10000}) ||
		other.Retention != (Retention{30 * day, 7 * day, 7 * day}) || other.State != TopicActive {
		t.Errorf("_default = %+v", other)
	}

	type profile struct {
		strategy    Strategy
		maxAttempts int
		delays      []time.Duration // BaseDelay(1..)
		jitter      bool
		maxAge      time.Duration
		exhaustion  dlq.Exhaustion
	}
	profiles := map[string]profile{
		// Critical user operations: aggressive exponential backoff (5 retries, 30s doubling to 5m).
		"execution-requests": {StrategyExponential, 6, []time.Duration{30 * sec, 60 * sec, 120 * sec, 240 * sec, 300 * sec}, true, 7 * day, dlq.ExhaustionDeadLetter},
		// Monitoring events: fewer retries with longer delays (3 retries, 1m tripling, cap 10m).
		"pod-events": {StrategyExponential, 4, []time.Duration{60 * sec, 180 * sec, 540 * sec}, true, 7 * day, dlq.ExhaustionDeadLetter},
		// Quick resolution: immediate retries.
		"resource-allocation": {StrategyNone, 4, []time.Duration{sec, sec, sec}, false, 7 * day, dlq.ExhaustionDeadLetter},
		// Real-time updates: a fixed interval, and they go stale quickly.
		"websocket-events": {StrategyNone, 11, []time.Duration{10 * sec, 10 * sec, 10 * sec, 10 * sec, 10 * sec, 10 * sec, 10 * sec, 10 * sec, 10 * sec, 10 * sec}, false, 5 * time.Minute, dlq.ExhaustionDiscard},
	}
	for topic, p := range profiles {
		got := set.Resolve(topic, "")
		if filepath.Base(got.DeclaredIn) != "integr8scode.yaml" || got.Pattern != topic {
			t.Errorf("%s: declared in %q as %q", topic, got.DeclaredIn, got.Pattern)
		}
		r := got.Retry
		if r.BackoffStrategy != p.strategy || r.MaxAttempts != p.maxAttempts || r.Jitter != p.jitter ||
			got.MaxAge != p.maxAge || r.OnExhaustion != p.exhaustion {
			t.Errorf("%s: %+v, max_age %v", topic, r, got.MaxAge)
		}
		if len(p.delays) != r.MaxAttempts-1 {
			t.Errorf("%s: test lists %d delays for %d retries", topic, len(p.delays), r.MaxAttempts-1)
		}
		for i, want := range p.delays {
			if d := r.BaseDelay(i + 1); d != want {
				t.Errorf("%s: BaseDelay(%d) = %v, want %v", topic, i+1, d, want)
			}
		}
		if d := r.Decide(r.MaxAttempts, "x.y", dlq.CodeRetry, 0.5); d.State != dlq.StateDiscarded || d.Exhaustion != p.exhaustion {
			t.Errorf("%s: last attempt: %+v", topic, d)
		}
		// Every shipped profile explains without error.
		var buf bytes.Buffer
		if err := Explain(got, &buf); err != nil {
			t.Errorf("%s: Explain: %v", topic, err)
		}
	}

	// websocket-events: a failure from 6 minutes ago is past its max_age.
	ws := set.Resolve("websocket-events", "")
	now := testdate.Now()
	if d := ws.Decide(2, "ws.send_failed", "", now.Add(-6*time.Minute), now, 0.5); d.Reason != ReasonMaxAge || d.Exhaustion != dlq.ExhaustionDiscard {
		t.Errorf("websocket-events stale failure: %+v", d)
	}
}
