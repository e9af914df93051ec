package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/mask"
)

// Topic is the effective policy for one source topic (and optionally one record
// type): every field populated, every layer merged. Get one from Set.Resolve.
// Treat it as a value; its slices and maps may be shared with the Set.
type Topic struct {
	// Name and Type are what was resolved. Type is empty when none was given.
	Name string
	Type string
	// DeclaredIn is the policy file of the most specific topics entry that
	// matched, empty when only _default and system defaults apply. A topic
	// declared in a file is read-only over the API.
	DeclaredIn string
	// Pattern is the key of that entry: Name itself, or a glob such as "orders.*".
	Pattern string
	// Layers names what was merged, least specific first, for explain output
	// and debugging: "system defaults", "_default (policies/default.yaml)", ...
	Layers []string

	// Retry is the effective OJS retry policy.
	Retry Retry
	// MaxAge: failures older than this are not retried any more (0: no limit).
	// Default: no limit.
	MaxAge time.Duration
	// DeadLetter is how long, and how many, dead letters are kept.
	DeadLetter DeadLetter
	// Retention is how long discarded, completed and cancelled records are kept.
	Retention Retention
	// PruningPolicy is what pruning does with expired records. Default delete.
	PruningPolicy PruningPolicy
	// Redelivery is how records are produced back to Kafka.
	Redelivery Redelivery
	// State is the topic's lifecycle state. Default active.
	State TopicState
	// Completion is what completes a redelivered record: its produce
	// (CompletionRedelivered, the default) or the consumer's acknowledgement
	// (CompletionAck).
	Completion Completion
	// AckTimeout is how long a record redelivered under CompletionAck waits
	// for its acknowledgement before it is marked unacknowledged. Default PT1H.
	AckTimeout time.Duration
	// ReplayRules are the rules that apply to this topic's dead letters, merged
	// by name across layers, in declaration order. Disabled rules are included.
	ReplayRules []ReplayRule

	// Ingest-side rules (capacity.go, access.go, filters.go).
	// Capacity bounds the topic's non-terminal records. Default: no limit.
	Capacity Capacity
	// AllowedJobTypes are globs on the record type; a record of another type
	// is kept discarded (JOB_TYPE_NOT_ALLOWED). Default ["*"].
	AllowedJobTypes []string
	// StrictQueues: a record for a topic no policy file or API config
	// declares is kept discarded (QUEUE_NOT_FOUND). From _default only.
	// Default false.
	StrictQueues bool
	// Filters are the ingest filters, merged by name across layers, in
	// declaration order. Disabled filters are included.
	Filters []Filter

	// Masking is what callers without unmask on the topic do not see of
	// its records (masking.go); nil when nothing is masked. Default nil.
	Masking *mask.Rules

	// Backpressure bounds the jobs published over HTTP (backpressure.go).
	// Default: unbounded, reject, warning threshold 0.8.
	Backpressure Backpressure
}

// DeadLetter is the dead_letter section of an effective Topic.
type DeadLetter struct {
	Retention DeadLetterRetention
}

// DeadLetterRetention bounds the dead letters kept; a record is pruned when it
// exceeds either bound (OJS dead-letter spec §5.1).
type DeadLetterRetention struct {
	MaxAge   time.Duration // default P180D
	MaxCount int           // default 10000
}

// Retention is how long non-dead-letter terminal records are kept.
type Retention struct {
	Discarded time.Duration // default P30D
	Completed time.Duration // default P7D
	// Cancelled: discarded records kept as cancelled (an operator gave up on
	// them by hand). Default P7D.
	Cancelled time.Duration
}

// Redelivery is how records are produced back to Kafka.
type Redelivery struct {
	// RateLimit is the most records per second redelivered for the topic; 0
	// means unlimited. Default 0.
	RateLimit float64
	// TargetTopic receives redeliveries; empty means the source topic. Default empty.
	TargetTopic string
	// KeepPartition produces to the record's original partition instead of
	// letting the partitioner choose by key. Default false: with the same key and
	// partition count the partitioner picks the same partition anyway, and a
	// target topic may have fewer partitions.
	KeepPartition bool
	// Mode is how due records are delivered: produced by the scheduler
	// (ModeKafka, the default) or fetched by workers over HTTP (ModePull).
	Mode Mode
	// Target is who gets a redelivery to the record's source topic: the
	// group that failed it (TargetGroup, the default) or the whole topic.
	// A redelivery to another topic (TargetTopic, an operator's
	// override.queue) always goes to the whole topic.
	Target Target
}

// ReplayRule is an effective automatic replay rule (OJS dead-letter spec §7).
type ReplayRule struct {
	Name string
	// Filter selects the dead letters the rule replays: the filter of the
	// spec, read by the filter package.
	Filter filter.Filter
	// Delay is how long after a record is discarded it is replayed.
	Delay time.Duration
	// MaxReplays is how many times this rule may replay one record.
	MaxReplays int
	// Enabled rules run; a disabled rule is kept so that it can be shown.
	// Default true.
	Enabled bool
	// RateLimit caps replays per second; 0 is unlimited.
	RateLimit float64
	// Window limits replays to a time of day; nil is any time.
	Window *Window
	// WindowSpec is Window as written, for showing the rule.
	WindowSpec *WindowSpec
}

// DefaultAckTimeout is how long a record redelivered under completion ack
// waits for its acknowledgement unless the policy says otherwise.
const DefaultAckTimeout = time.Hour

// DefaultTopic returns the system defaults, the bottom layer of every Topic: the
// OJS default retry policy, dead letters kept P180D / 10000, discarded P30D,
// completed P7D, cancelled P7D, pruning delete, no max_age, no rate limit, state active,
// completion redelivered (ack_timeout PT1H).
func DefaultTopic() Topic {
	return Topic{
		Layers:          []string{"system defaults"},
		Retry:           Default(),
		DeadLetter:      DeadLetter{Retention: DeadLetterRetention{MaxAge: 180 * day, MaxCount: 10000}},
		Retention:       Retention{Discarded: 30 * day, Completed: 7 * day, Cancelled: 7 * day},
		PruningPolicy:   PruneDelete,
		State:           TopicActive,
		Completion:      CompletionRedelivered,
		AckTimeout:      DefaultAckTimeout,
		Capacity:        Capacity{Overflow: OverflowReject},
		AllowedJobTypes: []string{"*"},
		Redelivery:      Redelivery{Mode: ModeKafka, Target: TargetGroup},
		Backpressure:    defaultBackpressure(),
	}
}

// AwaitsAck reports whether the topic's redelivered records wait for the
// consumer's acknowledgement (completion ack) instead of completing when
// they are produced.
func (t Topic) AwaitsAck() bool { return t.Completion == CompletionAck }

// Expired reports whether a record that first failed at failedAt is past max_age
// at now. A zero failedAt or MaxAge never expires.
func (t Topic) Expired(failedAt, now time.Time) bool {
	return t.MaxAge > 0 && !failedAt.IsZero() && now.Sub(failedAt) > t.MaxAge
}

// Decide is Retry.Decide plus max_age: a failure that would be retried but first
// failed more than MaxAge before now is not retried; it is discarded per
// on_exhaustion with ReasonMaxAge. failedAt is when the record first failed (its
// first redrive.failed_at). The check is made when the failure is decided, not
// when the retry is due, so a retry scheduled just before the deadline still goes out.
func (t Topic) Decide(attempt int, errType string, code dlq.Code, failedAt, now time.Time, u float64) Decision {
	d := t.Retry.Decide(attempt, errType, code, u)
	if d.State == dlq.StateRetryable && t.Expired(failedAt, now) {
		return Decision{State: dlq.StateDiscarded, Exhaustion: t.Retry.OnExhaustion, Reason: ReasonMaxAge}
	}
	return d
}

// WithRecordOverride merges a record's redrive.retry header (a partial OJS
// RetryPolicy in JSON) onto t.Retry, the last layer of the policy layering (docs/policies.md). Empty or null
// raw returns t unchanged. On error (unknown field, bad duration, invalid merged
// policy) it returns t unchanged and the error, so ingest can keep the record on
// the topic's own policy and note why.
func (t Topic) WithRecordOverride(raw json.RawMessage) (Topic, error) {
	if isEmptyJSON(raw) {
		return t, nil
	}
	r, err := t.Retry.WithOverride(raw)
	if err != nil {
		return t, fmt.Errorf("record retry override: %w", err)
	}
	t.Retry = r
	t.Layers = append(slices.Clip(t.Layers), "redrive.retry header")
	return t, nil
}

// Apply merges a partial topic policy onto t as one more layer named source (e.g.
// "api"), and validates the result; it is how a topic configured through the API
// is layered over the files. On error t is returned unchanged.
func (t Topic) Apply(source string, s *TopicSpec) (Topic, error) { return t.apply(nil, source, s) }

// apply is Apply, with the layer checked against lim when it is set.
func (t Topic) apply(lim *Limits, source string, s *TopicSpec) (Topic, error) {
	l := &errorList{limits: lim}
	l.checkTopicSpec(s, "", levelOverride)
	merged := build(t, []layer{{name: "", label: source, spec: s}}, l)
	if err := l.err(); err != nil {
		return t, err
	}
	return merged, nil
}

// layer is one partial policy in a merge chain.
type layer struct {
	name  string // the entry's path in its file: "_default", `topics."orders.*"`, "" for top-level rules
	label string // for Topic.Layers
	file  string
	spec  *TopicSpec
	lines map[string]int // path → line in file, for errors
}

// ruleAcc is a replay rule being merged, and the layer that touched it last.
type ruleAcc struct {
	spec ReplayRuleSpec
	from *layer
	path string
}

// build merges layers onto base. With l non-nil it also checks what only the
// merged result can show (max_interval >= initial_interval, replay rules
// complete), blaming the most specific layer involved.
func build(base Topic, layers []layer, l *errorList) Topic {
	t := base
	t.Layers = slices.Clone(base.Layers)
	rules := make([]*ruleAcc, 0, len(base.ReplayRules))
	for _, r := range base.ReplayRules {
		rules = append(rules, &ruleAcc{spec: specOfRule(r)})
	}
	var retryFrom *layer // last layer that set an interval
	filters := newFilterMerge(base.Filters)
	var masking maskingAcc
	if base.Masking != nil {
		masking.add(maskingSpecOf(base.Masking))
	}
	maskingSet := false
	for i := range layers {
		ly := &layers[i]
		if ly.label != "" {
			t.Layers = append(t.Layers, ly.label)
		}
		s := ly.spec
		if s == nil {
			continue
		}
		if s.Retry != nil {
			t.Retry = t.Retry.Merge(s.Retry)
			if s.Retry.InitialInterval != nil || s.Retry.MaxInterval != nil {
				retryFrom = ly
			}
		}
		if s.MaxAge != nil {
			t.MaxAge = s.MaxAge.Std()
		}
		if dl := s.DeadLetter; dl != nil && dl.Retention != nil {
			if dl.Retention.MaxAge != nil {
				t.DeadLetter.Retention.MaxAge = dl.Retention.MaxAge.Std()
			}
			if dl.Retention.MaxCount != nil {
				t.DeadLetter.Retention.MaxCount = *dl.Retention.MaxCount
			}
		}
		if r := s.Retention; r != nil {
			if r.Discarded != nil {
				t.Retention.Discarded = r.Discarded.Std()
			}
			if r.Completed != nil {
				t.Retention.Completed = r.Completed.Std()
			}
			if r.Cancelled != nil {
				t.Retention.Cancelled = r.Cancelled.Std()
			}
		}
		if s.PruningPolicy != nil {
			t.PruningPolicy = *s.PruningPolicy
		}
		if r := s.Redelivery; r != nil {
			if r.RateLimit != nil {
				t.Redelivery.RateLimit = *r.RateLimit
			}
			if r.TargetTopic != nil {
				t.Redelivery.TargetTopic = *r.TargetTopic
			}
			if r.KeepPartition != nil {
				t.Redelivery.KeepPartition = *r.KeepPartition
			}
			if r.Mode != nil {
				t.Redelivery.Mode = *r.Mode
			}
			if r.Target != nil {
				t.Redelivery.Target = *r.Target
			}
		}
		if s.State != nil {
			t.State = *s.State
		}
		if s.Completion != nil {
			t.Completion = *s.Completion
		}
		if s.AckTimeout != nil {
			t.AckTimeout = s.AckTimeout.Std()
		}
		mergeIngestRules(&t, s)
		mergeBackpressure(&t, s)
		filters.add(s.Filters, ly)
		if s.Masking != nil {
			masking.add(s.Masking)
			maskingSet = true
		}
		for j, rs := range s.ReplayRules {
			path := index(child(ly.name, "replay_rules"), j)
			k := slices.IndexFunc(rules, func(a *ruleAcc) bool { return a.spec.Name == rs.Name })
			if k < 0 {
				rules = append(rules, &ruleAcc{spec: rs, from: ly, path: path})
				continue
			}
			rules[k].spec = mergeRule(rules[k].spec, rs)
			rules[k].from, rules[k].path = ly, path
		}
	}
	// A layer that sets both intervals wrongly was already reported on its own.
	if l != nil && t.Retry.MaxInterval < t.Retry.InitialInterval && retryFrom != nil &&
		(retryFrom.spec.Retry.InitialInterval == nil || retryFrom.spec.Retry.MaxInterval == nil) {
		field := "max_interval"
		if retryFrom.spec.Retry.MaxInterval == nil {
			field = "initial_interval"
		}
		p := child(child(retryFrom.name, "retry"), field)
		l.add(&FieldError{File: retryFrom.file, Path: p, Line: retryFrom.lines[p], Msg: fmt.Sprintf(
			"merged policy has max_interval %s < initial_interval %s; max_interval must be >= initial_interval (merged: %s)",
			FormatDuration(t.Retry.MaxInterval), FormatDuration(t.Retry.InitialInterval), joinLayers(t.Layers))})
	}
	if l != nil {
		l.checkDefaultLimits(t.Retry)
	}
	t.Filters = filters.result(l)
	if maskingSet {
		t.Masking = masking.rules()
	}
	t.ReplayRules = nil
	for _, a := range rules {
		r, missing := ruleOf(a.spec)
		if len(missing) > 0 {
			if l != nil && a.from != nil {
				l.add(&FieldError{File: a.from.file, Path: a.path, Line: a.from.lines[a.path], Msg: fmt.Sprintf(
					"replay rule %q is incomplete: %s required, here or in an inherited rule of the same name",
					a.spec.Name, strings.Join(missing, ", "))})
			}
			continue
		}
		t.ReplayRules = append(t.ReplayRules, r)
	}
	return t
}

func joinLayers(ls []string) string {
	s := ""
	for i, l := range ls {
		if i > 0 {
			s += " ← "
		}
		s += l
	}
	return s
}

func mergeRule(base, s ReplayRuleSpec) ReplayRuleSpec {
	if s.Filter != nil {
		base.Filter = s.Filter
	}
	if s.Delay != nil {
		base.Delay = s.Delay
	}
	if s.MaxReplays != nil {
		base.MaxReplays = s.MaxReplays
	}
	if s.Enabled != nil {
		base.Enabled = s.Enabled
	}
	if s.RateLimit != nil {
		base.RateLimit = s.RateLimit
	}
	if s.Window != nil {
		base.Window = s.Window
	}
	return base
}

// ruleOf completes a merged rule spec; missing lists the required fields it
// lacks. A filter the filter package refuses counts as missing: specs are
// checked (checkReplayFilter) before they are merged, so only a spec built in
// Go can hold one.
func ruleOf(s ReplayRuleSpec) (r ReplayRule, missing []string) {
	r = ReplayRule{Name: s.Name, Enabled: true}
	if s.Filter == nil {
		missing = append(missing, "filter")
	} else if f, err := filter.ParseMap(s.Filter, filter.Rule, "filter"); err != nil {
		missing = append(missing, "a valid filter ("+err.Error()+")")
	} else {
		r.Filter = f
	}
	if s.Delay == nil {
		missing = append(missing, "delay")
	} else {
		r.Delay = s.Delay.Std()
	}
	if s.MaxReplays == nil {
		missing = append(missing, "max_replays")
	} else {
		r.MaxReplays = *s.MaxReplays
	}
	if s.Enabled != nil {
		r.Enabled = *s.Enabled
	}
	if s.RateLimit != nil {
		r.RateLimit = *s.RateLimit
	}
	if w := s.Window; w != nil {
		// Validated when the file was loaded.
		r.Window, _ = ParseWindow(w.Start, w.End, w.TimeZone)
		r.WindowSpec = w
	}
	return r, missing
}

func specOfRule(r ReplayRule) ReplayRuleSpec {
	d, n, e := Duration(r.Delay), r.MaxReplays, r.Enabled
	rate := r.RateLimit
	return ReplayRuleSpec{Name: r.Name, Filter: r.Filter.Map(), Delay: &d, MaxReplays: &n, Enabled: &e, RateLimit: &rate, Window: r.WindowSpec}
}

// Spec returns the TopicSpec that sets every field of t (no types): the inverse
// of DefaultTopic().Apply. The API can store or show it as a complete config.
func (t Topic) Spec() *TopicSpec {
	maxAge, dlAge, disc, comp, canc := Duration(t.MaxAge), Duration(t.DeadLetter.Retention.MaxAge),
		Duration(t.Retention.Discarded), Duration(t.Retention.Completed), Duration(t.Retention.Cancelled)
	count, rate, target, keep, to := t.DeadLetter.Retention.MaxCount, t.Redelivery.RateLimit,
		t.Redelivery.TargetTopic, t.Redelivery.KeepPartition, t.Redelivery.Target
	pp, st, completion, ackTimeout, mode := t.PruningPolicy, t.State, t.Completion, Duration(t.AckTimeout), t.Redelivery.Mode
	rules := make([]ReplayRuleSpec, len(t.ReplayRules))
	for i, r := range t.ReplayRules {
		rules[i] = specOfRule(r)
	}
	spec := &TopicSpec{
		Retry:         retrySpecOf(t.Retry),
		MaxAge:        &maxAge,
		DeadLetter:    &DeadLetterSpec{Retention: &DeadLetterRetentionSpec{MaxAge: &dlAge, MaxCount: &count}},
		Retention:     &RetentionSpec{Discarded: &disc, Completed: &comp, Cancelled: &canc},
		PruningPolicy: &pp,
		Redelivery:    &RedeliverySpec{RateLimit: &rate, TargetTopic: &target, KeepPartition: &keep, Mode: &mode, Target: &to},
		State:         &st,
		Completion:    &completion,
		AckTimeout:    &ackTimeout,
		ReplayRules:   rules,
	}
	t.ingestSpec(spec)
	spec.Backpressure = t.Backpressure.spec()
	if t.Masking != nil {
		spec.Masking = maskingSpecOf(t.Masking)
	}
	return spec
}

// topicJSON is the wire shape of an effective topic policy: the policy-file shape
// with every field present.
type topicJSON struct {
	Retry      Retry    `json:"retry"`
	MaxAge     Duration `json:"max_age"`
	DeadLetter struct {
		Retention struct {
			MaxAge   Duration `json:"max_age"`
			MaxCount int      `json:"max_count"`
		} `json:"retention"`
	} `json:"dead_letter"`
	Retention struct {
		Discarded Duration `json:"discarded"`
		Completed Duration `json:"completed"`
		Cancelled Duration `json:"cancelled"`
	} `json:"retention"`
	PruningPolicy PruningPolicy `json:"pruning_policy"`
	Redelivery    struct {
		RateLimit     float64 `json:"rate_limit"`
		TargetTopic   string  `json:"target_topic"`
		KeepPartition bool    `json:"keep_partition"`
		Mode          Mode    `json:"mode"`
		Target        Target  `json:"target"`
	} `json:"redelivery"`
	State       TopicState       `json:"state"`
	Completion  Completion       `json:"completion"`
	AckTimeout  Duration         `json:"ack_timeout"`
	ReplayRules []replayRuleJSON `json:"replay_rules"`
	ingestJSON
	// Masking is shown when the topic masks anything.
	Masking      *MaskingSpec     `json:"masking,omitempty"`
	Backpressure backpressureJSON `json:"backpressure"`
}

type replayRuleJSON struct {
	Name       string          `json:"name"`
	Filter     json.RawMessage `json:"filter"`
	Delay      Duration        `json:"delay"`
	MaxReplays int             `json:"max_replays"`
	Enabled    bool            `json:"enabled"`
	RateLimit  float64         `json:"rate_limit"`
	Window     *WindowSpec     `json:"window,omitempty"`
}

// MarshalJSON writes the effective policy in policy-file shape with every field
// present and ISO 8601 durations. Name, Type and the other metadata are not
// included. DecodeTopicSpec reads it back.
func (t Topic) MarshalJSON() ([]byte, error) {
	var j topicJSON
	j.Retry = t.Retry
	j.MaxAge = Duration(t.MaxAge)
	j.DeadLetter.Retention.MaxAge = Duration(t.DeadLetter.Retention.MaxAge)
	j.DeadLetter.Retention.MaxCount = t.DeadLetter.Retention.MaxCount
	j.Retention.Discarded = Duration(t.Retention.Discarded)
	j.Retention.Completed = Duration(t.Retention.Completed)
	j.Retention.Cancelled = Duration(t.Retention.Cancelled)
	j.PruningPolicy = t.PruningPolicy
	j.Redelivery.RateLimit = t.Redelivery.RateLimit
	j.Redelivery.TargetTopic = t.Redelivery.TargetTopic
	j.Redelivery.KeepPartition = t.Redelivery.KeepPartition
	j.Redelivery.Mode = t.Redelivery.Mode
	j.Redelivery.Target = t.Redelivery.Target
	j.State = t.State
	j.Completion = t.Completion
	j.AckTimeout = Duration(t.AckTimeout)
	j.ReplayRules = make([]replayRuleJSON, len(t.ReplayRules))
	for i, r := range t.ReplayRules {
		j.ReplayRules[i] = replayRuleJSON{Name: r.Name, Filter: r.Filter.Canonical(), Delay: Duration(r.Delay), MaxReplays: r.MaxReplays, Enabled: r.Enabled,
			RateLimit: r.RateLimit, Window: r.WindowSpec}
	}
	j.ingestJSON = t.ingestJSON()
	j.Backpressure = t.Backpressure.json()
	if t.Masking != nil {
		j.Masking = maskingSpecOf(t.Masking)
	}
	return json.Marshal(j)
}
