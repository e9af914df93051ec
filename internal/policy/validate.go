package policy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// Range checks for decoded policies (OJS retry spec §11, RET-16/RET-20). Types and
// duration syntax are checked by the decoder; these are the rules on values.

// Validate checks an effective policy against OJS retry spec §11. The error is an
// Errors naming each bad field, e.g. "retry.max_attempts: must be >= 0, got -1".
func (r Retry) Validate() error {
	l := &errorList{}
	l.checkRetry(r, "retry")
	return l.err()
}

// checkRetry checks every field of an effective policy, cross-field rules included.
func (l *errorList) checkRetry(r Retry, p string) {
	l.checkMaxAttempts(r.MaxAttempts, child(p, "max_attempts"))
	l.checkPositive(r.InitialInterval, child(p, "initial_interval"))
	l.checkCoefficient(r.BackoffCoefficient, child(p, "backoff_coefficient"))
	if r.MaxInterval < r.InitialInterval {
		l.addf(child(p, "max_interval"), "must be >= initial_interval (%s), got %s",
			FormatDuration(r.InitialInterval), FormatDuration(r.MaxInterval))
	}
	l.checkErrorPatterns(r.NonRetryableErrors, child(p, "non_retryable_errors"))
	if !r.OnExhaustion.Valid() {
		l.addf(child(p, "on_exhaustion"), "must be one of discard, dead_letter, got %q", r.OnExhaustion)
	}
	if !r.BackoffStrategy.Valid() {
		l.addf(child(p, "backoff_strategy"), "must be one of exponential, polynomial, linear, none, got %q", r.BackoffStrategy)
	}
}

// checkRetrySpec checks the fields a partial policy sets. max_interval against
// initial_interval is checked here only when both are set in the same place; the
// merged result is checked again wherever policies are layered.
func (l *errorList) checkRetrySpec(s *RetrySpec, p string) {
	if s == nil {
		return
	}
	if s.MaxAttempts != nil {
		l.checkMaxAttempts(*s.MaxAttempts, child(p, "max_attempts"))
	}
	if s.InitialInterval != nil {
		l.checkPositive(s.InitialInterval.Std(), child(p, "initial_interval"))
	}
	if s.BackoffCoefficient != nil {
		l.checkCoefficient(*s.BackoffCoefficient, child(p, "backoff_coefficient"))
	}
	if s.MaxInterval != nil {
		l.checkPositive(s.MaxInterval.Std(), child(p, "max_interval"))
		if s.InitialInterval != nil && *s.MaxInterval < *s.InitialInterval {
			l.addf(child(p, "max_interval"), "must be >= initial_interval (%s), got %s", s.InitialInterval, s.MaxInterval)
		}
	}
	l.checkErrorPatterns(s.NonRetryableErrors, child(p, "non_retryable_errors"))
	if s.OnExhaustion != nil && !s.OnExhaustion.Valid() {
		l.addf(child(p, "on_exhaustion"), "must be one of discard, dead_letter, got %q", *s.OnExhaustion)
	}
	if s.BackoffStrategy != nil && !s.BackoffStrategy.Valid() {
		l.addf(child(p, "backoff_strategy"), "must be one of exponential, polynomial, linear, none, got %q", *s.BackoffStrategy)
	}
	l.checkLimits(s, p)
}

func (l *errorList) checkMaxAttempts(v int, p string) {
	if v < 0 {
		l.addf(p, "must be >= 0, got %d", v)
	}
}

// Upper bounds: beyond them a value is a mistake (1e308, P1000Y), and the
// arithmetic of delays would overflow.
const (
	maxCoefficient = 100
	maxInterval    = 366 * 24 * time.Hour
)

func (l *errorList) checkPositive(d time.Duration, p string) {
	switch {
	case d <= 0:
		l.addf(p, "must be greater than zero, got %s", FormatDuration(d))
	case d > maxInterval:
		l.addf(p, "must be at most P366D, got %s", FormatDuration(d))
	}
}

func (l *errorList) checkCoefficient(c float64, p string) {
	switch {
	case !(c >= 1) || math.IsInf(c, 0): // RET-03; the negation also catches NaN
		l.addf(p, "must be >= 1.0, got %v", c)
	case c > maxCoefficient:
		l.addf(p, "must be at most %d, got %v", maxCoefficient, c)
	}
}

func (l *errorList) checkErrorPatterns(patterns []string, p string) {
	for i, e := range patterns {
		switch {
		case e == "":
			l.addf(index(p, i), "must not be empty")
		case strings.Contains(e, "*") && (!strings.HasSuffix(e, ".*") || strings.Count(e, "*") > 1 || len(e) < 3):
			l.addf(index(p, i), `%q: a wildcard is only allowed at the end, as "prefix.*"`, e)
		}
	}
}

// level says where in a file a TopicSpec sits, which decides whether it may have types.
type level int

const (
	levelDefault  level = iota // the _default entry
	levelTopic                 // a topics entry
	levelType                  // a type override inside a topics entry
	levelOverride              // a topic configured through the API
)

// checkTopicSpec checks the fields a partial topic policy sets.
func (l *errorList) checkTopicSpec(s *TopicSpec, p string, lvl level) {
	if s == nil {
		return
	}
	l.checkRetrySpec(s.Retry, child(p, "retry"))
	if dl := s.DeadLetter; dl != nil && dl.Retention != nil {
		rp := child(child(p, "dead_letter"), "retention")
		if dl.Retention.MaxAge != nil && *dl.Retention.MaxAge <= 0 {
			l.addf(child(rp, "max_age"), "must be greater than zero: dead letters are never kept without a bound")
		}
		if dl.Retention.MaxCount != nil && *dl.Retention.MaxCount < 0 {
			l.addf(child(rp, "max_count"), "must be >= 0 (0: no limit on the count; max_age still applies), got %d", *dl.Retention.MaxCount)
		}
	}
	if r := s.Retention; r != nil {
		if r.Discarded != nil {
			l.checkPositive(r.Discarded.Std(), child(child(p, "retention"), "discarded"))
		}
		if r.Completed != nil {
			l.checkPositive(r.Completed.Std(), child(child(p, "retention"), "completed"))
		}
		if r.Cancelled != nil {
			l.checkPositive(r.Cancelled.Std(), child(child(p, "retention"), "cancelled"))
		}
	}
	if s.PruningPolicy != nil && !s.PruningPolicy.Valid() {
		l.addf(child(p, "pruning_policy"), "must be one of delete, archive, got %q", *s.PruningPolicy)
	}
	if s.State != nil && !s.State.Valid() {
		l.addf(child(p, "state"), "must be one of active, paused, draining, got %q", *s.State)
	}
	if s.Completion != nil && !s.Completion.Valid() {
		l.addf(child(p, "completion"), "must be one of redelivered, ack, got %q", *s.Completion)
	}
	if s.AckTimeout != nil {
		l.checkPositive(s.AckTimeout.Std(), child(p, "ack_timeout"))
	}
	if lvl == levelType {
		// The scheduler settles a topic's redeliveries together, whatever
		// their type.
		const perTopic = "is set per topic, not per type: a topic's redeliveries are settled together; set it in the topics entry"
		if s.Completion != nil {
			l.addf(child(p, "completion"), perTopic)
		}
		if s.AckTimeout != nil {
			l.addf(child(p, "ack_timeout"), perTopic)
		}
		if s.Redelivery != nil && s.Redelivery.Mode != nil {
			l.addf(child(child(p, "redelivery"), "mode"), "is set per topic, not per type: the scheduler and workers take a topic's records together; set it in the topics entry")
		}
	}
	if r := s.Redelivery; r != nil {
		rp := child(p, "redelivery")
		if r.RateLimit != nil && !(*r.RateLimit == 0 || *r.RateLimit >= MinRateLimit) || r.RateLimit != nil && math.IsInf(*r.RateLimit, 0) {
			l.addf(child(rp, "rate_limit"), "must be 0 (unlimited) or at least %v records per second, got %v", MinRateLimit, *r.RateLimit)
		}
		if r.Target != nil && !r.Target.Valid() {
			l.addf(child(rp, "target"), "must be one of group, topic, got %q", *r.Target)
		}
		if r.TargetTopic != nil && *r.TargetTopic != "" {
			// Kafka's internal topics are never a redelivery's target; the
			// API also refuses Redrive's own (dlq.ReservedTopics).
			if msg := (dlq.ReservedTopics{}).Problem(*r.TargetTopic); msg != "" {
				l.addf(child(rp, "target_topic"), "%q %s", *r.TargetTopic, msg)
			}
		}
	}
	l.checkReplayRuleSpecs(s.ReplayRules, child(p, "replay_rules"))
	l.checkIngestRules(s, p, lvl)
	l.checkBackpressure(s.Backpressure, p, lvl)
	l.checkMasking(s.Masking, p, lvl)
	if s.Types != nil && lvl != levelTopic {
		l.addf(child(p, "types"), "per-type overrides are only allowed in a topics entry")
		return
	}
	for name, ts := range s.Types {
		tp := child(child(p, "types"), name)
		switch {
		case name == "":
			l.addf(tp, "a type name must not be empty")
		case strings.Contains(name, "*"):
			l.addf(tp, "type names are matched exactly; wildcards are not supported")
		}
		l.checkTopicSpec(ts, tp, levelType)
	}
}

func (l *errorList) checkReplayRuleSpecs(rules []ReplayRuleSpec, p string) {
	seen := map[string]bool{}
	for i, r := range rules {
		rp := index(p, i)
		switch {
		case r.Name == "":
			l.addf(child(rp, "name"), "required: every replay rule needs a name")
		case seen[r.Name]:
			l.addf(child(rp, "name"), "duplicate replay rule name %q", r.Name)
		}
		seen[r.Name] = true
		if r.MaxReplays != nil && *r.MaxReplays < 1 {
			l.addf(child(rp, "max_replays"), "must be >= 1, got %d (set enabled: false to turn a rule off)", *r.MaxReplays)
		}
		if r.RateLimit != nil && !(*r.RateLimit == 0 || *r.RateLimit >= MinRateLimit) || r.RateLimit != nil && math.IsInf(*r.RateLimit, 0) {
			l.addf(child(rp, "rate_limit"), "must be 0 (unlimited) or at least %v replays per second, got %v", MinRateLimit, *r.RateLimit)
		}
		if w := r.Window; w != nil {
			if _, err := ParseWindow(w.Start, w.End, w.TimeZone); err != nil {
				l.addf(child(rp, "window"), "%v", err)
			}
		}
		l.checkReplayFilter(r.Filter, child(rp, "filter"))
	}
}

// topicNameProblem says what is wrong with a Kafka topic name (or, with glob, a
// topic pattern using '*'), or returns "".
func topicNameProblem(name string, glob bool) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > 249:
		return "is longer than Kafka's limit of 249 characters"
	case name == "." || name == "..":
		return "is not a legal Kafka topic name"
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || (glob && c == '*')
		if !ok {
			if glob {
				return "may only contain letters, digits, '.', '_', '-' and the wildcard '*'"
			}
			return "may only contain letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}

// checkReplayFilter reads a replay rule's filter as the replay engine will
// (filter.ParseMap): an unknown key, a value of the wrong kind or past its
// bound is refused when the file loads instead of failing every replay pass.
func (l *errorList) checkReplayFilter(f map[string]any, p string) {
	_, err := filter.ParseMap(f, filter.Rule, "")
	var errs filter.Errors
	if !errors.As(err, &errs) {
		return
	}
	for _, e := range errs {
		// The filter's line: the decoder reads it as one value.
		fp := child(p, e.Field)
		l.add(&FieldError{File: l.file, Path: fp, Line: cmp.Or(l.lines[fp], l.lines[p]), Msg: e.Msg})
	}
}

// CheckTargets refuses a redelivery.target_topic that names one of Redrive's
// own topics (r.Own): a policy file is checked on its own, without knowing
// them, so the Watcher checks its Set again with them. Internal topics are
// refused by every check already. The error is an Errors naming each field.
func (s *Set) CheckTargets(r dlq.ReservedTopics) error {
	if s == nil {
		return nil
	}
	l := &errorList{}
	entries := slices.Concat([]*entry{s.def}, slices.Collect(maps.Values(s.exact)), s.globs)
	for _, e := range entries {
		if e == nil {
			continue
		}
		l.file = e.file
		l.checkOwnTarget(e.spec, e.path, e.lines, r)
		for name, ts := range e.spec.Types {
			l.checkOwnTarget(ts, child(child(e.path, "types"), name), e.lines, r)
		}
	}
	return l.err()
}

// CheckTargets refuses a redelivery.target_topic that names one of Redrive's
// own topics (r.Own), for a partial policy from elsewhere (the API).
func (s *TopicSpec) CheckTargets(r dlq.ReservedTopics) error {
	l := &errorList{}
	l.checkOwnTarget(s, "", nil, r)
	for name, ts := range s.Types {
		l.checkOwnTarget(ts, child("types", name), nil, r)
	}
	return l.err()
}

func (l *errorList) checkOwnTarget(s *TopicSpec, p string, lines map[string]int, r dlq.ReservedTopics) {
	if s == nil || s.Redelivery == nil || s.Redelivery.TargetTopic == nil || !r.Own(*s.Redelivery.TargetTopic) {
		return
	}
	fp := child(child(p, "redelivery"), "target_topic")
	l.add(&FieldError{File: l.file, Path: fp, Line: lines[fp], Msg: fmt.Sprintf(
		"%q %s; name the topic a consumer reads", *s.Redelivery.TargetTopic, r.Problem(*s.Redelivery.TargetTopic))})
}
