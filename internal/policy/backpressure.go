package policy

// Backpressure: the bound on jobs published over HTTP (OJS backpressure spec,
// urn:ojs:ext:backpressure). A topic's backpressure section bounds its depth —
// its jobs not yet settled and not held by a worker (backpressure spec §3:
// "available + scheduled + retryable") — and a publish (POST /ojs/v1/jobs,
// /jobs/batch) that would take it past max_depth is refused with 429
// QUEUE_FULL (§5.1, §7.1). It is the publisher's bound, on the HTTP path:
// failures read from a DLQ topic are never refused (they are already
// stored in Kafka); capacity (max_size, overflow_policy) is their bound.

// BackpressureStrategy is what happens to a publish past a topic's bound
// (backpressure spec §5).
type BackpressureStrategy string

const (
	// BackpressureReject refuses the publish with 429 QUEUE_FULL and
	// Retry-After (§5.1). The default, and the only strategy Redrive applies.
	BackpressureReject BackpressureStrategy = "reject"
	// BackpressureBlock (§5.2) would hold the request open until the topic
	// has room. Not supported: refused where it is set.
	BackpressureBlock BackpressureStrategy = "block"
	// BackpressureDropOldest (§5.3) would discard the topic's oldest
	// available job to admit the new one. Not supported: refused where it is
	// set.
	BackpressureDropOldest BackpressureStrategy = "drop_oldest"
)

// Supported reports whether Redrive applies strategy s (reject only).
func (s BackpressureStrategy) Supported() bool { return s == BackpressureReject }

// DefaultWarningThreshold is the fraction of max_depth past which a publish's
// answer carries X-OJS-Queue-Pressure (backpressure spec §6.2's default).
const DefaultWarningThreshold = 0.8

// BackpressureSpec is a partial backpressure section (backpressure spec
// §6.2), as a policy file or PUT /queues/{name}/config writes it.
type BackpressureSpec struct {
	// MaxDepth is the most jobs the topic may hold not yet settled and not
	// held by a worker; 0 is unbounded.
	MaxDepth *int `json:"max_depth,omitempty"`
	// MaxSizeBytes is the spec's size bound. Not supported: only 0
	// (unbounded) is accepted.
	MaxSizeBytes *int `json:"max_size_bytes,omitempty"`
	// Strategy is what happens past the bound.
	Strategy *BackpressureStrategy `json:"strategy,omitempty"`
	// WarningThreshold is the fraction of MaxDepth (0 to 1) past which a
	// publish's answer says the pressure.
	WarningThreshold *float64 `json:"warning_threshold,omitempty"`
}

// Backpressure is the effective backpressure section of a Topic.
type Backpressure struct {
	// MaxDepth bounds the topic's depth; 0 is unbounded. Default 0.
	MaxDepth int64
	// Strategy is what happens past MaxDepth. Default reject.
	Strategy BackpressureStrategy
	// WarningThreshold is the fraction of MaxDepth past which a publish's
	// answer carries the pressure. Default 0.8.
	WarningThreshold float64
}

// Bounded reports whether the topic has a depth bound.
func (b Backpressure) Bounded() bool { return b.MaxDepth > 0 }

// defaultBackpressure is the system default: unbounded (backpressure spec §6.3).
func defaultBackpressure() Backpressure {
	return Backpressure{Strategy: BackpressureReject, WarningThreshold: DefaultWarningThreshold}
}

// mergeBackpressure layers the backpressure section of s onto t.
func mergeBackpressure(t *Topic, s *TopicSpec) {
	b := s.Backpressure
	if b == nil {
		return
	}
	if b.MaxDepth != nil {
		t.Backpressure.MaxDepth = int64(*b.MaxDepth)
	}
	if b.Strategy != nil {
		t.Backpressure.Strategy = *b.Strategy
	}
	if b.WarningThreshold != nil {
		t.Backpressure.WarningThreshold = *b.WarningThreshold
	}
}

// spec is the BackpressureSpec that sets every field of b.
func (b Backpressure) spec() *BackpressureSpec {
	depth, none, strategy, threshold := int(b.MaxDepth), 0, b.Strategy, b.WarningThreshold
	return &BackpressureSpec{MaxDepth: &depth, MaxSizeBytes: &none, Strategy: &strategy, WarningThreshold: &threshold}
}

// backpressureJSON is the wire shape of an effective Backpressure: every
// field present, max_size_bytes always 0 (unbounded).
type backpressureJSON struct {
	MaxDepth         int64                `json:"max_depth"`
	MaxSizeBytes     int64                `json:"max_size_bytes"`
	Strategy         BackpressureStrategy `json:"strategy"`
	WarningThreshold float64              `json:"warning_threshold"`
}

func (b Backpressure) json() backpressureJSON {
	return backpressureJSON{MaxDepth: b.MaxDepth, Strategy: b.Strategy, WarningThreshold: b.WarningThreshold}
}

// UnsupportedBackpressure says which field of a backpressure section asks
// for what the spec defines and Redrive does not do — a strategy other than
// reject, a size bound — and why ("" when none): the API answers it 422
// unsupported rather than a validation error.
func UnsupportedBackpressure(b *BackpressureSpec) (field, msg string) {
	switch {
	case b == nil:
		return "", ""
	case b.Strategy != nil && (*b.Strategy == BackpressureBlock || *b.Strategy == BackpressureDropOldest):
		return "strategy", string(*b.Strategy) + " is not supported: Redrive applies reject only (429 QUEUE_FULL with Retry-After)"
	case b.MaxSizeBytes != nil && *b.MaxSizeBytes != 0:
		return "max_size_bytes", "a size bound is not supported: bound the depth with max_depth (0 here: unbounded)"
	}
	return "", ""
}

// checkBackpressure checks the backpressure section of a partial policy at
// level lvl.
func (l *errorList) checkBackpressure(b *BackpressureSpec, p string, lvl level) {
	if b == nil {
		return
	}
	bp := child(p, "backpressure")
	if lvl == levelType {
		l.addf(bp, "is set per topic, not per type: the bound is on the topic's depth; set it in the topics entry")
		return
	}
	if b.MaxDepth != nil && *b.MaxDepth < 0 {
		l.addf(child(bp, "max_depth"), "must be >= 0 (0: unbounded), got %d", *b.MaxDepth)
	}
	if b.Strategy != nil {
		if field, msg := UnsupportedBackpressure(&BackpressureSpec{Strategy: b.Strategy}); field != "" {
			l.addf(child(bp, field), "%s", msg)
		}
	}
	if b.MaxSizeBytes != nil {
		if field, msg := UnsupportedBackpressure(&BackpressureSpec{MaxSizeBytes: b.MaxSizeBytes}); field != "" {
			l.addf(child(bp, field), "%s, got %d", msg, *b.MaxSizeBytes)
		}
	}
	if w := b.WarningThreshold; w != nil && !(*w >= 0 && *w <= 1) {
		l.addf(child(bp, "warning_threshold"), "must be a fraction from 0.0 to 1.0, got %v", *w)
	}
}
