package policy

import (
	"fmt"
	"strings"

	"github.com/redrive/redrive/internal/dlq"
)

// Capacity and access: the ingest-side rules of the queue-config spec
// (§6.1 capacity, §6.5 access control, §5.2 strict_queues). Ingest applies
// them to each new failure (internal/ingest); a record they turn away is
// kept, discarded, with an error entry saying why — never dropped.

// OverflowPolicy is what happens to a record past a topic's capacity.
type OverflowPolicy string

const (
	// OverflowReject keeps a new record past the limit discarded, with the
	// error code QUEUE_FULL, instead of scheduling it. The default.
	OverflowReject OverflowPolicy = "reject"
	// OverflowDropOldest discards the topic's oldest waiting (retryable)
	// records, with the error type overflow, to make room for new ones.
	OverflowDropOldest OverflowPolicy = "drop_oldest"
	// OverflowBlock is the spec's third policy. Redrive refuses it: ingest
	// would stop consuming the DLQ partition, and every other topic whose
	// failures share it would stall behind the full one.
	OverflowBlock OverflowPolicy = "block"
)

// Valid reports whether p is a policy Redrive applies (block is not one).
func (p OverflowPolicy) Valid() bool { return p == OverflowReject || p == OverflowDropOldest }

// Capacity bounds a topic's non-terminal records (retryable and available).
type Capacity struct {
	// MaxSize is the most non-terminal records; 0 is no limit. Default 0.
	MaxSize int64
	// MaxSizeBytes is the most bytes of key and value over the non-terminal
	// records; 0 is no limit. Default 0.
	MaxSizeBytes int64
	// Overflow is what happens past either limit. Default reject.
	Overflow OverflowPolicy
}

// Limited reports whether either limit is set.
func (c Capacity) Limited() bool { return c.MaxSize > 0 || c.MaxSizeBytes > 0 }

// Error codes and types of the records the ingest-side rules turn away.
const (
	// CodeQueueFull is the code of the entry a record rejected past a
	// topic's capacity gets (overflow_policy reject); its type is
	// ErrorTypeQueueFull.
	CodeQueueFull dlq.Code = "QUEUE_FULL"
	// CodeJobTypeNotAllowed: the record's type matches none of the topic's
	// allowed_job_types.
	CodeJobTypeNotAllowed dlq.Code = "JOB_TYPE_NOT_ALLOWED"
	// CodeQueueNotFound: strict_queues is on and no policy file or API
	// config declares the topic.
	CodeQueueNotFound dlq.Code = "QUEUE_NOT_FOUND"
	// CodeOverflow: the record was among the oldest waiting ones of a full
	// topic under overflow_policy drop_oldest.
	CodeOverflow dlq.Code = "OVERFLOW"
	// CodeFiltered: an ingest filter matched (the entry's message names it).
	CodeFiltered dlq.Code = "FILTERED"

	ErrorTypeQueueFull         = "queue_full"
	ErrorTypeJobTypeNotAllowed = "job_type_not_allowed"
	ErrorTypeQueueNotFound     = "queue_not_found"
	ErrorTypeOverflow          = "overflow"
	ErrorTypeFiltered          = "filtered"
)

// TurnedAwayErrorTypes are the error types of the entries the ingest-side
// rules add: replay rules leave such records alone.
func TurnedAwayErrorTypes() []string {
	return []string{ErrorTypeQueueFull, ErrorTypeJobTypeNotAllowed, ErrorTypeQueueNotFound, ErrorTypeOverflow, ErrorTypeFiltered}
}

// AllowsType reports whether a record of type typ may be retried in the
// topic: typ matches one of AllowedJobTypes ('*' matches any run of
// characters; a record without a type is "").
func (t Topic) AllowsType(typ string) bool {
	for _, g := range t.AllowedJobTypes {
		if g == "*" || matchGlob(g, typ) {
			return true
		}
	}
	return false
}

// maxPatterns bounds allowed_job_types and a filter's when_env.
const maxPatterns = 100

// mergeIngestRules layers the capacity and access fields of s onto t.
func mergeIngestRules(t *Topic, s *TopicSpec) {
	if s.MaxSize != nil {
		t.Capacity.MaxSize = int64(*s.MaxSize)
	}
	if s.MaxSizeBytes != nil {
		t.Capacity.MaxSizeBytes = int64(*s.MaxSizeBytes)
	}
	if s.OverflowPolicy != nil {
		t.Capacity.Overflow = *s.OverflowPolicy
	}
	if s.AllowedJobTypes != nil {
		t.AllowedJobTypes = s.AllowedJobTypes
	}
	if s.StrictQueues != nil {
		t.StrictQueues = *s.StrictQueues
	}
}

// ingestSpec sets the ingest-side fields of spec from t (Topic.Spec).
func (t Topic) ingestSpec(spec *TopicSpec) {
	size, bytes, overflow, strict := int(t.Capacity.MaxSize), int(t.Capacity.MaxSizeBytes), t.Capacity.Overflow, t.StrictQueues
	spec.MaxSize, spec.MaxSizeBytes, spec.OverflowPolicy, spec.StrictQueues = &size, &bytes, &overflow, &strict
	spec.AllowedJobTypes = append([]string{}, t.AllowedJobTypes...)
	spec.Filters = make([]FilterSpec, len(t.Filters))
	for i, f := range t.Filters {
		spec.Filters[i] = f.spec()
	}
}

// ingestJSON is the wire shape of the ingest-side fields of a Topic.
type ingestJSON struct {
	MaxSize         int64          `json:"max_size"`
	MaxSizeBytes    int64          `json:"max_size_bytes"`
	OverflowPolicy  OverflowPolicy `json:"overflow_policy"`
	AllowedJobTypes []string       `json:"allowed_job_types"`
	StrictQueues    bool           `json:"strict_queues"`
	Filters         []FilterSpec   `json:"filters"`
}

func (t Topic) ingestJSON() ingestJSON {
	j := ingestJSON{MaxSize: t.Capacity.MaxSize, MaxSizeBytes: t.Capacity.MaxSizeBytes, OverflowPolicy: t.Capacity.Overflow,
		AllowedJobTypes: append([]string{}, t.AllowedJobTypes...), StrictQueues: t.StrictQueues, Filters: make([]FilterSpec, len(t.Filters))}
	for i, f := range t.Filters {
		j.Filters[i] = f.spec()
	}
	return j
}

// checkIngestRules checks the capacity, access and filter fields of a
// partial policy at level lvl.
func (l *errorList) checkIngestRules(s *TopicSpec, p string, lvl level) {
	if s.MaxSize != nil && *s.MaxSize < 0 {
		l.addf(child(p, "max_size"), "must be >= 0 (0: no limit), got %d", *s.MaxSize)
	}
	if s.MaxSizeBytes != nil && *s.MaxSizeBytes < 0 {
		l.addf(child(p, "max_size_bytes"), "must be >= 0 (0: no limit), got %d", *s.MaxSizeBytes)
	}
	if s.OverflowPolicy != nil && !s.OverflowPolicy.Valid() {
		if *s.OverflowPolicy == OverflowBlock {
			l.addf(child(p, "overflow_policy"), "block is not supported: ingest would stop consuming the DLQ partition until the topic has room, "+
				"and every other topic whose failures share that partition would stall behind it; use reject or drop_oldest")
		} else {
			l.addf(child(p, "overflow_policy"), "must be one of reject, drop_oldest, got %q", *s.OverflowPolicy)
		}
	}
	if s.AllowedJobTypes != nil {
		ap := child(p, "allowed_job_types")
		switch {
		case len(s.AllowedJobTypes) == 0:
			l.addf(ap, `must list at least one type or glob; ["*"] allows every type`)
		case len(s.AllowedJobTypes) > maxPatterns:
			l.addf(ap, "must list at most %d patterns, got %d", maxPatterns, len(s.AllowedJobTypes))
		}
		for i, g := range s.AllowedJobTypes {
			l.checkPattern(g, index(ap, i), dlq.MaxNameBytes)
		}
	}
	if s.StrictQueues != nil && lvl != levelDefault && lvl != levelOverride {
		l.addf(child(p, "strict_queues"), "is a _default setting: it says what happens to topics no entry declares, so set it under _default")
	}
	if lvl == levelType {
		const perTopic = "is set per topic, not per type; set it in the topics entry"
		for _, f := range []struct {
			name string
			set  bool
		}{{"max_size", s.MaxSize != nil}, {"max_size_bytes", s.MaxSizeBytes != nil}, {"overflow_policy", s.OverflowPolicy != nil},
			{"allowed_job_types", s.AllowedJobTypes != nil}, {"filters", s.Filters != nil}} {
			if f.set {
				l.addf(child(p, f.name), perTopic)
			}
		}
		return
	}
	l.checkFilterSpecs(s.Filters, child(p, "filters"))
}

// checkPattern checks a glob: not empty, at most maxBytes, no control characters.
func (l *errorList) checkPattern(g, p string, maxBytes int) {
	switch {
	case g == "":
		l.addf(p, "must not be empty")
	case len(g) > maxBytes:
		l.addf(p, "must be at most %d bytes, got %d", maxBytes, len(g))
	case strings.ContainsFunc(g, func(r rune) bool { return r < ' ' || r == 0x7f }):
		l.addf(p, "must not contain control characters, got %q", g)
	}
}

// CheckAPIConfig refuses what a config set through the API may not hold:
// ingest filters (policy files only: their names are metric labels, and
// `redrive policy validate` reviews them) and, but for the _default layer,
// strict_queues. The error is an Errors naming each field.
func (s *TopicSpec) CheckAPIConfig(isDefault bool) error {
	var errs Errors
	if s == nil {
		return nil
	}
	if s.StrictQueues != nil && !isDefault {
		errs = append(errs, &FieldError{Path: "strict_queues",
			Msg: "is a _default setting: it says what happens to topics nothing declares; set it with PUT /ojs/v1/queues/_default/config"})
	}
	if len(s.Filters) > 0 {
		errs = append(errs, &FieldError{Path: "filters",
			Msg: "ingest filters are set in policy files only (_default or a topics entry), where redrive policy validate reviews them"})
	}
	if e := checkMaskingAPI(s); e != nil {
		errs = append(errs, e)
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// explainIngestRules writes the capacity, access and filter rows of explain.
func explainIngestRules(t Topic, env *string, row func(k string, v any)) {
	c := t.Capacity
	if !c.Limited() {
		row("capacity", "no limit (max_size 0, max_size_bytes 0)")
	} else {
		limit := func(n int64, unit string) string {
			if n == 0 {
				return "no limit"
			}
			return fmt.Sprintf("%d %s", n, unit)
		}
		what := "a new record past the limit is kept discarded (QUEUE_FULL)"
		if c.Overflow == OverflowDropOldest {
			what = "the oldest retryable records are discarded (overflow) to make room"
		}
		row("capacity", fmt.Sprintf("max_size %s, max_size_bytes %s, overflow_policy %s (%s)",
			limit(c.MaxSize, "records"), limit(c.MaxSizeBytes, "bytes"), c.Overflow, what))
	}
	row("allowed_job_types", strings.Join(t.AllowedJobTypes, ", "))
	if t.StrictQueues {
		row("strict_queues", "true (records of topics no policy file or API config declares are kept discarded, QUEUE_NOT_FOUND)")
	} else {
		row("strict_queues", "false")
	}
	if len(t.Filters) == 0 {
		row("filters", "none")
	}
	for _, f := range t.Filters {
		state := "enabled"
		if !f.Enabled {
			state = "disabled"
		}
		where := "every environment"
		if f.WhenEnv != nil {
			where = "when_env " + strings.Join(f.WhenEnv, ", ")
			if env != nil {
				switch {
				case *env == "":
					where += " (does not apply here: REDRIVE_ENVIRONMENT is not set)"
				case f.AppliesIn(*env) || !f.Enabled && (&Filter{Enabled: true, WhenEnv: f.WhenEnv}).AppliesIn(*env):
					where += " (applies here: REDRIVE_ENVIRONMENT=" + *env + ")"
				default:
					where += " (does not apply here: REDRIVE_ENVIRONMENT=" + *env + ")"
				}
			}
		}
		row("filters."+f.Name, fmt.Sprintf("%s, %s, %s; match %s", state, f.Action, where, f.Match.Describe()))
	}
}
