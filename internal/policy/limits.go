package policy

import (
	"fmt"
	"time"
)

// Limits bound the retry policies Redrive accepts, wherever they come from:
// policy files and topic configs set through the API are refused past them
// (an error naming the field), and a record's redrive.retry header, which
// nobody reviews, is clamped into them at ingest (Clamp). They keep one
// record, or one forged header, from being redelivered without end or in a
// tight loop: a header of 1 ms intervals and 2,000,000,000 attempts once
// looped a record about 75 times a second.
type Limits struct {
	// MaxAttempts is the largest max_attempts a policy may set. Default
	// DefaultMaxAttemptsCeiling (REDRIVE_RETRY_MAX_ATTEMPTS).
	MaxAttempts int
	// MinInterval is the shortest initial_interval and max_interval a
	// policy may set. Default DefaultMinInterval (REDRIVE_RETRY_MIN_INTERVAL).
	MinInterval time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxAttemptsCeiling = 100
	DefaultMinInterval        = time.Second
)

// MinRateLimit is the smallest non-zero redelivery.rate_limit (records per
// second) and replay rule rate_limit: one record every 1,000 s. Below it a
// limit is a mistake, and the wait it implies overflows a time.Duration.
const MinRateLimit = 0.001

// DefaultLimits returns the default Limits.
func DefaultLimits() Limits {
	return Limits{MaxAttempts: DefaultMaxAttemptsCeiling, MinInterval: DefaultMinInterval}
}

// WithDefaults fills zero fields with their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxAttempts == 0 {
		l.MaxAttempts = DefaultMaxAttemptsCeiling
	}
	if l.MinInterval == 0 {
		l.MinInterval = DefaultMinInterval
	}
	return l
}

// Validate checks the limits themselves: a ceiling of at least 1 and a
// floor within the range intervals may take.
func (l Limits) Validate() error {
	switch {
	case l.MaxAttempts < 1:
		return fmt.Errorf("the max_attempts ceiling must be at least 1, got %d", l.MaxAttempts)
	case l.MinInterval <= 0 || l.MinInterval > maxInterval:
		return fmt.Errorf("the interval floor must be greater than zero and at most P366D, got %s", FormatDuration(l.MinInterval))
	}
	return nil
}

// Clamp brings r within the limits: max_attempts down to the ceiling, each
// interval up to the floor (max_interval stays at least initial_interval).
// It returns what it changed, one note per field ("max_attempts 2000000000
// → 100"), none when r was within them.
func (l Limits) Clamp(r Retry) (Retry, []string) {
	l = l.WithDefaults()
	var notes []string
	if r.MaxAttempts > l.MaxAttempts {
		notes = append(notes, fmt.Sprintf("max_attempts %d → %d", r.MaxAttempts, l.MaxAttempts))
		r.MaxAttempts = l.MaxAttempts
	}
	if r.InitialInterval < l.MinInterval {
		notes = append(notes, fmt.Sprintf("initial_interval %s → %s", FormatDuration(r.InitialInterval), FormatDuration(l.MinInterval)))
		r.InitialInterval = l.MinInterval
	}
	if floor := max(l.MinInterval, r.InitialInterval); r.MaxInterval < floor {
		notes = append(notes, fmt.Sprintf("max_interval %s → %s", FormatDuration(r.MaxInterval), FormatDuration(floor)))
		r.MaxInterval = floor
	}
	return r, notes
}

// Check checks the fields a partial retry policy sets against the limits,
// as a policy file's are: an Errors naming each field ("retry.max_attempts"),
// nil when within them. For a retry policy that comes from elsewhere, such as
// the override.retry of a retry through the API.
func (l Limits) Check(s *RetrySpec) error {
	el := &errorList{limits: &l}
	el.checkLimits(s, "retry")
	return el.err()
}

// checkLimits checks the fields a partial retry policy sets against the
// limits, when the list has any (policy files, API configs; not the bare
// decoding of a spec).
func (l *errorList) checkLimits(s *RetrySpec, p string) {
	if l.limits == nil || s == nil {
		return
	}
	lim := l.limits.WithDefaults()
	if s.MaxAttempts != nil && *s.MaxAttempts > lim.MaxAttempts {
		l.addf(child(p, "max_attempts"), "must be at most %d (REDRIVE_RETRY_MAX_ATTEMPTS), got %d", lim.MaxAttempts, *s.MaxAttempts)
	}
	for field, d := range map[string]*Duration{"initial_interval": s.InitialInterval, "max_interval": s.MaxInterval} {
		if d != nil && d.Std() > 0 && d.Std() < lim.MinInterval {
			l.addf(child(p, field), "must be at least %s (REDRIVE_RETRY_MIN_INTERVAL), got %s", FormatDuration(lim.MinInterval), FormatDuration(d.Std()))
		}
	}
}

// checkDefaultLimits checks what no layer set against the limits: the
// system defaults (max_attempts 3, initial_interval PT1S, max_interval
// PT5M) under limits moved past them. What a layer sets is checked where it
// is set (checkLimits).
func (l *errorList) checkDefaultLimits(r Retry) {
	if l.limits == nil {
		return
	}
	lim, def := l.limits.WithDefaults(), Default()
	const fix = "; set it in _default"
	if r.MaxAttempts == def.MaxAttempts && r.MaxAttempts > lim.MaxAttempts {
		l.addf("retry.max_attempts", "the system default %d is above REDRIVE_RETRY_MAX_ATTEMPTS (%d)"+fix, r.MaxAttempts, lim.MaxAttempts)
	}
	if r.InitialInterval == def.InitialInterval && r.InitialInterval < lim.MinInterval {
		l.addf("retry.initial_interval", "the system default %s is below REDRIVE_RETRY_MIN_INTERVAL (%s)"+fix,
			FormatDuration(r.InitialInterval), FormatDuration(lim.MinInterval))
	}
	if r.MaxInterval == def.MaxInterval && r.MaxInterval < lim.MinInterval {
		l.addf("retry.max_interval", "the system default %s is below REDRIVE_RETRY_MIN_INTERVAL (%s)"+fix,
			FormatDuration(r.MaxInterval), FormatDuration(lim.MinInterval))
	}
}

// LoadDir is the package's LoadDir within l.
func (l Limits) LoadDir(dir string) (*Set, error) {
	paths, err := policyFiles(dir)
	if err != nil {
		return nil, err
	}
	return l.LoadFiles(paths...)
}

// LoadFiles is the package's LoadFiles within l.
func (l Limits) LoadFiles(paths ...string) (*Set, error) {
	sources, err := readSources(paths)
	if err != nil {
		return nil, err
	}
	return loadWithin(sources, l)
}

// ApplyWithin is Apply with the layer also checked against l: how a topic
// config set through the API is validated.
func (t Topic) ApplyWithin(l Limits, source string, s *TopicSpec) (Topic, error) {
	return t.apply(&l, source, s)
}
