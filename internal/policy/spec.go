package policy

import (
	"bytes"
	"encoding/json"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/internal/dlq"
)

// The spec types are partial policies as people write them: a nil field is "not
// set here, inherit it". Their json tags are the field names of the policy file,
// the API and the redrive.retry header alike.

// RetrySpec is a partial OJS RetryPolicy (spec §2.1, plus backoff_strategy).
// Merge it onto an effective policy with Retry.Merge.
type RetrySpec struct {
	MaxAttempts        *int            `json:"max_attempts,omitempty"`
	InitialInterval    *Duration       `json:"initial_interval,omitempty"`
	BackoffCoefficient *float64        `json:"backoff_coefficient,omitempty"`
	MaxInterval        *Duration       `json:"max_interval,omitempty"`
	Jitter             *bool           `json:"jitter,omitempty"`
	NonRetryableErrors []string        `json:"non_retryable_errors,omitempty"` // nil: inherit; empty: none
	OnExhaustion       *dlq.Exhaustion `json:"on_exhaustion,omitempty"`
	BackoffStrategy    *Strategy       `json:"backoff_strategy,omitempty"`
}

// DecodeRetry strictly decodes a JSON RetryPolicy, such as a record's redrive.retry
// header or the retry of an API override. Unknown fields, wrong types, malformed
// durations and out-of-range values are errors naming the field
// ("retry.max_attempts: must be >= 0, got -1"); the returned error is an Errors.
// Cross-field rules (max_interval >= initial_interval) need the merged result:
// check that with Retry.Validate after Merge.
func DecodeRetry(data []byte) (*RetrySpec, error) {
	var s RetrySpec
	d := decodeJSON(data, "retry", &s)
	d.checkRetrySpec(&s, "retry")
	if err := d.err(); err != nil {
		return nil, err
	}
	return &s, nil
}

// UnmarshalJSON decodes strictly, as DecodeRetry does, without the range checks.
func (s *RetrySpec) UnmarshalJSON(data []byte) error {
	var v RetrySpec
	if err := decodeJSON(data, "", &v).err(); err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalYAML decodes strictly, without the range checks.
func (s *RetrySpec) UnmarshalYAML(n *yaml.Node) error {
	var v RetrySpec
	d := newDecoder("")
	d.value(n, reflect.ValueOf(&v).Elem(), "")
	if err := d.err(); err != nil {
		return err
	}
	*s = v
	return nil
}

// TopicSpec is a partial topic policy: the _default entry, a topics entry, a type
// override, or a topic configured through the API.
type TopicSpec struct {
	Retry         *RetrySpec      `json:"retry,omitempty"`
	MaxAge        *Duration       `json:"max_age,omitempty"`
	DeadLetter    *DeadLetterSpec `json:"dead_letter,omitempty"`
	Retention     *RetentionSpec  `json:"retention,omitempty"`
	PruningPolicy *PruningPolicy  `json:"pruning_policy,omitempty"`
	Redelivery    *RedeliverySpec `json:"redelivery,omitempty"`
	State         *TopicState     `json:"state,omitempty"`
	// Completion and AckTimeout say what completes a redelivered record; a
	// topic's records are settled together, so a type override may not set them.
	Completion *Completion `json:"completion,omitempty"`
	AckTimeout *Duration   `json:"ack_timeout,omitempty"`
	// ReplayRules are merged by name onto the inherited rules; see ReplayRuleSpec.
	ReplayRules []ReplayRuleSpec `json:"replay_rules,omitempty"`
	// Types are per-type overrides, keyed by exact type name. Only a topics entry
	// may have them.
	Types map[string]*TopicSpec `json:"types,omitempty"`

	// Ingest-side rules: capacity (capacity.go), access (access.go) and
	// ingest filters (filters.go). None of them may be set per type.
	MaxSize         *int            `json:"max_size,omitempty"`
	MaxSizeBytes    *int            `json:"max_size_bytes,omitempty"`
	OverflowPolicy  *OverflowPolicy `json:"overflow_policy,omitempty"`
	AllowedJobTypes []string        `json:"allowed_job_types,omitempty"` // nil: inherit
	// StrictQueues is a _default setting only.
	StrictQueues *bool `json:"strict_queues,omitempty"`
	// Filters merge by name onto the inherited filters, as replay rules do;
	// policy files only (_default and topics entries).
	Filters []FilterSpec `json:"filters,omitempty"`
	// Masking is what callers without unmask do not see of the records
	// (masking.go); policy files only, per topic.
	Masking *MaskingSpec `json:"masking,omitempty"`
	// Backpressure bounds the jobs published over HTTP (backpressure.go);
	// per topic only.
	Backpressure *BackpressureSpec `json:"backpressure,omitempty"`
}

// DeadLetterSpec is the dead_letter section (OJS dead-letter spec §5).
type DeadLetterSpec struct {
	Retention *DeadLetterRetentionSpec `json:"retention,omitempty"`
}

// DeadLetterRetentionSpec bounds how many dead letters are kept, and how long.
type DeadLetterRetentionSpec struct {
	MaxAge   *Duration `json:"max_age,omitempty"`
	MaxCount *int      `json:"max_count,omitempty"`
}

// RetentionSpec is how long other terminal records are kept (queue-config spec §6.3).
type RetentionSpec struct {
	Discarded *Duration `json:"discarded,omitempty"`
	Completed *Duration `json:"completed,omitempty"`
	// Cancelled is how long records an operator discarded by hand (exhaustion
	// cancelled: a queue deleted with strategy discard) are kept.
	Cancelled *Duration `json:"cancelled,omitempty"`
}

// RedeliverySpec is how records are produced back to Kafka.
type RedeliverySpec struct {
	RateLimit     *float64 `json:"rate_limit,omitempty"`
	TargetTopic   *string  `json:"target_topic,omitempty"`
	KeepPartition *bool    `json:"keep_partition,omitempty"`
	// Mode is how due records are delivered: kafka or pull (mode.go).
	Mode *Mode `json:"mode,omitempty"`
	// Target is who gets a redelivery to the source topic: the consumer
	// group that failed the record, or every group on the topic.
	Target *Target `json:"target,omitempty"`
}

// ReplayRuleSpec is a partial replay rule (OJS dead-letter spec §7). Rules merge
// by name: a rule in a more specific layer with the name of an inherited rule
// changes only the fields it sets, so {name: x, enabled: false} turns rule x off
// for one topic.
type ReplayRuleSpec struct {
	Name string `json:"name"`
	// Filter selects dead letters like a bulk-retry filter. It is kept as a generic
	// map; the replay engine interprets it.
	Filter     map[string]any `json:"filter,omitempty"`
	Delay      *Duration      `json:"delay,omitempty"`
	MaxReplays *int           `json:"max_replays,omitempty"`
	Enabled    *bool          `json:"enabled,omitempty"`
	// RateLimit caps replays per second; 0 is unlimited.
	RateLimit *float64 `json:"rate_limit,omitempty"`
	// Window limits replays to a daily time of day.
	Window *WindowSpec `json:"window,omitempty"`
}

// WindowSpec is a daily time window: "HH:MM" start and end in an IANA time
// zone (default UTC); an end before the start wraps past midnight.
type WindowSpec struct {
	Start    string `json:"start"`
	End      string `json:"end"`
	TimeZone string `json:"time_zone,omitempty"`
}

// DecodeTopicSpec strictly decodes a JSON topic policy, such as the body of
// PUT /queues/{name}/config. Errors name the field path; types is rejected
// because only a policy file's topics entries may carry per-type overrides.
func DecodeTopicSpec(data []byte) (*TopicSpec, error) {
	var s TopicSpec
	d := decodeJSON(data, "", &s)
	d.checkTopicSpec(&s, "", levelOverride)
	if err := d.err(); err != nil {
		return nil, err
	}
	return &s, nil
}

// UnmarshalJSON decodes strictly, as DecodeTopicSpec does, without the range checks.
func (s *TopicSpec) UnmarshalJSON(data []byte) error {
	var v TopicSpec
	if err := decodeJSON(data, "", &v).err(); err != nil {
		return err
	}
	*s = v
	return nil
}

// PruningPolicy is what happens to records pruned by retention (OJS dead-letter spec §8.2).
type PruningPolicy string

const (
	// PruneDelete removes pruned records for good. The system default.
	PruneDelete PruningPolicy = "delete"
	// PruneArchive copies pruned records to the archive topic before removing them.
	PruneArchive PruningPolicy = "archive"
)

// Valid reports whether p is a known pruning policy.
func (p PruningPolicy) Valid() bool { return p == PruneDelete || p == PruneArchive }

// TopicState is a topic's lifecycle state (queue-config spec §5.1).
type TopicState string

const (
	// TopicActive: failures are ingested and retries redelivered. The default.
	TopicActive TopicState = "active"
	// TopicPaused: failures are ingested, but nothing is redelivered.
	TopicPaused TopicState = "paused"
	// TopicDraining: the topic is being retired: retries already scheduled still
	// go out, but no new work (replay-rule replays) should start for it.
	TopicDraining TopicState = "draining"
)

// Valid reports whether s is a known topic state.
func (s TopicState) Valid() bool { return s == TopicActive || s == TopicPaused || s == TopicDraining }

// Completion is what completes a redelivered record (docs/policies.md).
type Completion string

const (
	// CompletionRedelivered: a record is completed when it is produced back to
	// its topic; a repeat failure that comes back re-opens it. The default.
	CompletionRedelivered Completion = "redelivered"
	// CompletionAck: a record waits, available, for the client library's
	// acknowledgement (AckCompletions), and is marked unacknowledged when
	// none comes within ack_timeout.
	CompletionAck Completion = "ack"
)

// Valid reports whether c is a known completion.
func (c Completion) Valid() bool { return c == CompletionRedelivered || c == CompletionAck }

// Target is who a redelivery to the source topic is for (docs/redelivery.md,
// Targeting).
type Target string

const (
	// TargetGroup: only the consumer group that failed the record (its
	// source.group) handles the redelivery; the record carries
	// redrive.target.group and the client library skips it in every other
	// group. A failure that names no group goes to the whole topic. The
	// default.
	TargetGroup Target = "group"
	// TargetTopic: every consumer group on the topic gets the redelivery,
	// as any record produced to it.
	TargetTopic Target = "topic"
)

// Valid reports whether t is a known target.
func (t Target) Valid() bool { return t == TargetGroup || t == TargetTopic }

// enumValues lists the allowed values of the string enums that spec fields use,
// so the decoder can say "must be one of ...".
func enumValues(t reflect.Type) ([]string, bool) {
	switch t {
	case reflect.TypeFor[Strategy]():
		return []string{string(StrategyExponential), string(StrategyPolynomial), string(StrategyLinear), string(StrategyNone)}, true
	case reflect.TypeFor[dlq.Exhaustion]():
		return []string{string(dlq.ExhaustionDiscard), string(dlq.ExhaustionDeadLetter)}, true
	case reflect.TypeFor[PruningPolicy]():
		return []string{string(PruneDelete), string(PruneArchive)}, true
	case reflect.TypeFor[TopicState]():
		return []string{string(TopicActive), string(TopicPaused), string(TopicDraining)}, true
	case reflect.TypeFor[Completion]():
		return []string{string(CompletionRedelivered), string(CompletionAck)}, true
	case reflect.TypeFor[Mode]():
		return []string{string(ModeKafka), string(ModePull)}, true
	case reflect.TypeFor[Target]():
		return []string{string(TargetGroup), string(TargetTopic)}, true
	case reflect.TypeFor[OverflowPolicy]():
		// block decodes, so that checkIngestRules can say why it is refused.
		return []string{string(OverflowReject), string(OverflowDropOldest), string(OverflowBlock)}, true
	case reflect.TypeFor[BackpressureStrategy]():
		// block and drop_oldest decode, so that checkBackpressure can say
		// they are not supported.
		return []string{string(BackpressureReject), string(BackpressureBlock), string(BackpressureDropOldest)}, true
	case reflect.TypeFor[FilterAction]():
		return []string{string(FilterDiscard), string(FilterSkipRetry)}, true
	}
	return nil, false
}

// enumAliases are other spellings an enum accepts, each decoded as the value
// it stands for (and written back as that value).
func enumAliases(t reflect.Type) map[string]string {
	if t == reflect.TypeFor[Strategy]() {
		// "Constant backoff" is what most retry libraries call it.
		return map[string]string{"constant": string(StrategyNone)}
	}
	return nil
}

// retrySpecOf returns the spec that sets every field of r, the inverse of
// Default().Merge. It is how an effective policy is written back out.
func retrySpecOf(r Retry) *RetrySpec {
	in, mi := Duration(r.InitialInterval), Duration(r.MaxInterval)
	return &RetrySpec{
		MaxAttempts:        &r.MaxAttempts,
		InitialInterval:    &in,
		BackoffCoefficient: &r.BackoffCoefficient,
		MaxInterval:        &mi,
		Jitter:             &r.Jitter,
		NonRetryableErrors: append([]string{}, r.NonRetryableErrors...),
		OnExhaustion:       &r.OnExhaustion,
		BackoffStrategy:    &r.BackoffStrategy,
	}
}

// retryJSON is the OJS wire shape of an effective Retry: every field present.
type retryJSON struct {
	MaxAttempts        int            `json:"max_attempts"`
	InitialInterval    Duration       `json:"initial_interval"`
	BackoffCoefficient jsonFloat      `json:"backoff_coefficient"`
	MaxInterval        Duration       `json:"max_interval"`
	Jitter             bool           `json:"jitter"`
	NonRetryableErrors []string       `json:"non_retryable_errors"`
	OnExhaustion       dlq.Exhaustion `json:"on_exhaustion"`
	BackoffStrategy    Strategy       `json:"backoff_strategy"`
}

// MarshalJSON writes r in OJS shape with ISO 8601 durations, every field present:
// {"max_attempts":3,"initial_interval":"PT1S","backoff_coefficient":2.0,...}.
func (r Retry) MarshalJSON() ([]byte, error) {
	return json.Marshal(retryJSON{
		MaxAttempts:        r.MaxAttempts,
		InitialInterval:    Duration(r.InitialInterval),
		BackoffCoefficient: jsonFloat(r.BackoffCoefficient),
		MaxInterval:        Duration(r.MaxInterval),
		Jitter:             r.Jitter,
		NonRetryableErrors: append([]string{}, r.NonRetryableErrors...),
		OnExhaustion:       r.OnExhaustion,
		BackoffStrategy:    r.BackoffStrategy,
	})
}

// UnmarshalJSON reads a (possibly partial) OJS RetryPolicy: strict decoding, merged
// onto Default, validated. It is the inverse of MarshalJSON.
func (r *Retry) UnmarshalJSON(data []byte) error {
	v, err := ParseRetry(data)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRetry decodes a JSON RetryPolicy, merges it onto the OJS defaults and
// validates the result: what an OJS job's options.retry means.
func ParseRetry(data []byte) (Retry, error) {
	return Default().WithOverride(data)
}

// WithOverride decodes a JSON RetryPolicy (a record's redrive.retry header, an API
// override), merges it onto r and validates the result. Empty or null data returns
// r unchanged. On error r is returned unchanged too, so a caller can log the
// error and carry on with the policy it had.
func (r Retry) WithOverride(data []byte) (Retry, error) {
	if isEmptyJSON(data) {
		return r, nil
	}
	s, err := DecodeRetry(data)
	if err != nil {
		return r, err
	}
	merged := r.Merge(s)
	if err := merged.Validate(); err != nil {
		return r, err
	}
	return merged, nil
}

func isEmptyJSON(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) == 0 || string(t) == "null"
}

// jsonFloat marshals integral values with a ".0" (2.0, not 2), as the OJS examples
// write backoff_coefficient; the value is the same either way.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(float64(f))
	if err != nil {
		return nil, err
	}
	for _, c := range b {
		if c == '.' || c == 'e' || c == 'E' {
			return b, nil
		}
	}
	return append(b, '.', '0'), nil
}
