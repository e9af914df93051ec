package policy

import (
	"math"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// Strategy is how the delay grows between attempts (OJS retry spec §3). It is the
// backoff_strategy extension field of the RetryPolicy.
type Strategy string

const (
	// StrategyExponential: initial_interval × backoff_coefficient^(n-1). The default.
	StrategyExponential Strategy = "exponential"
	// StrategyPolynomial: initial_interval × n^backoff_coefficient (Sidekiq-style).
	StrategyPolynomial Strategy = "polynomial"
	// StrategyLinear: initial_interval × n; backoff_coefficient is ignored.
	StrategyLinear Strategy = "linear"
	// StrategyNone: always initial_interval; backoff_coefficient is ignored.
	StrategyNone Strategy = "none"
)

// Strategies lists every Strategy.
var Strategies = []Strategy{StrategyExponential, StrategyPolynomial, StrategyLinear, StrategyNone}

// Valid reports whether s is a known strategy.
func (s Strategy) Valid() bool {
	switch s {
	case StrategyExponential, StrategyPolynomial, StrategyLinear, StrategyNone:
		return true
	}
	return false
}

// Retry is an effective (fully populated) OJS RetryPolicy. Build one with Default
// and Merge; check one built by hand with Validate.
type Retry struct {
	// MaxAttempts is the exact upper bound on executions, the first one included
	// (RET-01). 0 and 1 both mean "never retried". Default 3.
	MaxAttempts int
	// InitialInterval is the delay before the first retry. Must be > 0. Default PT1S.
	InitialInterval time.Duration
	// BackoffCoefficient is the growth factor (exponential) or exponent
	// (polynomial). Must be >= 1. Default 2.0.
	BackoffCoefficient float64
	// MaxInterval caps every delay, before and after jitter. Must be >=
	// InitialInterval. Default PT5M.
	MaxInterval time.Duration
	// Jitter multiplies each capped delay by a uniform factor in [0.5, 1.5).
	// Default true.
	Jitter bool
	// NonRetryableErrors are error types that are never retried: exact names, or
	// "prefix.*" for every type starting with "prefix.". Default empty.
	NonRetryableErrors []string
	// OnExhaustion is how a record is kept when Redrive gives up on it. Default discard.
	OnExhaustion dlq.Exhaustion
	// BackoffStrategy selects the delay formula. Default exponential.
	BackoffStrategy Strategy
}

// Default returns the OJS default retry policy (spec §8), which applies to every
// field nobody set (RET-09).
func Default() Retry {
	return Retry{
		MaxAttempts:        3,
		InitialInterval:    time.Second,
		BackoffCoefficient: 2.0,
		MaxInterval:        5 * time.Minute,
		Jitter:             true,
		NonRetryableErrors: []string{},
		OnExhaustion:       dlq.ExhaustionDiscard,
		BackoffStrategy:    StrategyExponential,
	}
}

// Merge returns r with every field that s sets replaced (spec §8.1, RET-10). Lists
// are replaced, not appended to: non_retryable_errors: [] clears an inherited list.
// A nil s returns r unchanged. Merge does not validate; see Validate.
func (r Retry) Merge(s *RetrySpec) Retry {
	r.NonRetryableErrors = append([]string{}, r.NonRetryableErrors...) // never alias the base
	if s == nil {
		return r
	}
	if s.MaxAttempts != nil {
		r.MaxAttempts = *s.MaxAttempts
	}
	if s.InitialInterval != nil {
		r.InitialInterval = s.InitialInterval.Std()
	}
	if s.BackoffCoefficient != nil {
		r.BackoffCoefficient = *s.BackoffCoefficient
	}
	if s.MaxInterval != nil {
		r.MaxInterval = s.MaxInterval.Std()
	}
	if s.Jitter != nil {
		r.Jitter = *s.Jitter
	}
	if s.NonRetryableErrors != nil {
		r.NonRetryableErrors = append([]string{}, s.NonRetryableErrors...)
	}
	if s.OnExhaustion != nil {
		r.OnExhaustion = *s.OnExhaustion
	}
	if s.BackoffStrategy != nil {
		r.BackoffStrategy = *s.BackoffStrategy
	}
	return r
}

// BaseDelay is the delay before the retry that follows failed attempt `attempt`
// (1-based; retry n = attempt n+1 comes after failed attempt n), by the backoff
// formula and capped at MaxInterval, before jitter (spec §3, Appendix A). An
// attempt below 1 counts as 1.
func (r Retry) BaseDelay(attempt int) time.Duration {
	n := float64(max(attempt, 1))
	i := float64(r.InitialInterval)
	var raw float64
	switch r.BackoffStrategy {
	case StrategyNone:
		raw = i
	case StrategyLinear:
		raw = i * n
	case StrategyPolynomial:
		raw = i * math.Pow(n, r.BackoffCoefficient)
	default: // exponential, also for an unset strategy
		raw = i * math.Pow(r.BackoffCoefficient, n-1)
	}
	return capDelay(raw, r.MaxInterval)
}

// Delay is BaseDelay with jitter applied when Jitter is set: the capped delay is
// multiplied by 0.5+u, then capped at MaxInterval again (RET-04, RET-05, RET-06).
// u is a uniform sample in [0, 1) supplied by the caller, which keeps Delay
// deterministic in tests; values outside [0, 1) are clamped into it.
func (r Retry) Delay(attempt int, u float64) time.Duration {
	d := r.BaseDelay(attempt)
	if !r.Jitter || d <= 0 {
		return d
	}
	switch {
	case !(u >= 0): // also NaN
		u = 0
	case u >= 1:
		u = math.Nextafter(1, 0)
	}
	// In float64, 0.5+u rounds up to 1.5 for u just below 1, and d×m can round up
	// past the bound for large d, so clamp into [⌈d/2⌉, ⌈3d/2⌉-1] in integers.
	j := time.Duration(float64(d) * (0.5 + u))
	lo := d/2 + d%2
	hi := d + d/2 + d%2 - 1
	j = min(max(j, lo), hi)
	return min(j, r.MaxInterval)
}

// capDelay returns min(raw, maxInterval) as a Duration; a NaN or infinite raw
// (an absurd coefficient, or an invalid zero interval) is capped as well.
func capDelay(raw float64, maxInterval time.Duration) time.Duration {
	if !(raw < float64(maxInterval)) {
		return maxInterval
	}
	if raw < 0 {
		return 0
	}
	return time.Duration(raw)
}

// NonRetryable reports whether errType matches an entry of NonRetryableErrors:
// an exact match, or an entry "prefix.*" and errType starting with "prefix."
// (spec §6.2). "auth.*" matches "auth.expired" but not "auth" nor "external.auth.x".
func (r Retry) NonRetryable(errType string) bool {
	for _, e := range r.NonRetryableErrors {
		if e == errType {
			return true
		}
		if prefix, ok := strings.CutSuffix(e, "*"); ok && strings.HasSuffix(prefix, ".") && strings.HasPrefix(errType, prefix) {
			return true
		}
	}
	return false
}

// Reason says why a Decision was taken; it is meant for logs, events and metrics.
type Reason string

const (
	// ReasonRetry: attempts are left and the error is retryable.
	ReasonRetry Reason = "retry"
	// ReasonHandlerCode: the handler said DISCARD, DEAD_LETTER or FAIL (spec §7.2).
	ReasonHandlerCode Reason = "handler_code"
	// ReasonNonRetryable: the error type matches non_retryable_errors (spec §6.3).
	ReasonNonRetryable Reason = "non_retryable"
	// ReasonExhausted: max_attempts executions have failed (RET-01).
	ReasonExhausted Reason = "exhausted"
	// ReasonMaxAge: the failure is older than the topic's max_age.
	ReasonMaxAge Reason = "max_age"
)

// Decision is what becomes of a record after a failed attempt.
type Decision struct {
	State      dlq.State      // StateRetryable or StateDiscarded
	Exhaustion dlq.Exhaustion // set when State is StateDiscarded
	Delay      time.Duration  // set when State is StateRetryable: wait this long, then redeliver
	Reason     Reason
}

// Decide applies the policy to failed attempt `attempt` (1-based: the original
// consumption is attempt 1) with the handler's code and error type. u is a
// uniform sample in [0, 1) used for jitter.
//
// Precedence (spec §7.2): the handler's code beats the policy. DISCARD gives up
// as a discard and DEAD_LETTER as a dead letter, whatever max_attempts and
// on_exhaustion say; FAIL, a recognised permanent failure, is discarded like
// DISCARD (§7.1, §7.2 item 4) but keeps its own code in the error history, so
// metrics and events can tell the two apart. RETRY, an empty code or
// an unknown one apply the policy: a non-retryable error type, or attempt >=
// max_attempts, gives up per on_exhaustion; otherwise the record is retried
// after Delay(attempt, u).
func (r Retry) Decide(attempt int, errType string, code dlq.Code, u float64) Decision {
	switch code {
	case dlq.CodeDiscard, dlq.CodeFail:
		return Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDiscard, Reason: ReasonHandlerCode}
	case dlq.CodeDeadLetter:
		return Decision{State: dlq.StateDiscarded, Exhaustion: dlq.ExhaustionDeadLetter, Reason: ReasonHandlerCode}
	}
	if r.NonRetryable(errType) {
		return Decision{State: dlq.StateDiscarded, Exhaustion: r.OnExhaustion, Reason: ReasonNonRetryable}
	}
	if attempt >= r.MaxAttempts {
		return Decision{State: dlq.StateDiscarded, Exhaustion: r.OnExhaustion, Reason: ReasonExhausted}
	}
	return Decision{State: dlq.StateRetryable, Delay: r.Delay(attempt, u), Reason: ReasonRetry}
}
