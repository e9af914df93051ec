// Package queue layers the topic (queue) configurations set through the API
// over the policy files: a policy.Resolver for the scheduler, ingest and the
// API. Files win: a topic the files declare (by name or glob) ignores API
// configs and is read-only over the API.
//
// It keeps an in-memory copy of the API configs, refreshed after each change
// made through this replica and every few seconds for the changes of others;
// it never blocks Resolve on Postgres.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// DefaultName is the reserved name of the _default layer (queue-config spec §7.1).
const DefaultName = "_default"

// Resolver resolves effective topic configs: system defaults ← file _default
// (or, when the files have none, the API's _default) ← file topic entry, or
// for a topic no file declares, the API's config for it.
type Resolver struct {
	reserved dlq.ReservedTopics // set by Reserve before use
	files    func() *policy.Set
	store    *store.Store
	log      *slog.Logger
	specs    atomic.Pointer[map[string]*entry]
	// limits bound the retry policies of configs set through the API.
	limits policy.Limits
}

type entry struct {
	cfg  store.QueueConfig
	spec *policy.TopicSpec
}

// New returns a Resolver over the files' current Set (nil: no files) and the
// API configs in st. Call Refresh to load the API configs, and run
// Refresher to keep them fresh.
func New(files func() *policy.Set, st *store.Store, logger *slog.Logger) *Resolver {
	if files == nil {
		files = func() *policy.Set { return nil }
	}
	if logger == nil {
		logger = slog.Default()
	}
	r := &Resolver{files: files, store: st, log: logger.With("component", "queue"), limits: policy.DefaultLimits()}
	empty := map[string]*entry{}
	r.specs.Store(&empty)
	return r
}

// Within sets the limits the retry policies of API configs are checked
// against (Validate); the default is policy.DefaultLimits. Call it before
// the Resolver is used.
func (r *Resolver) Within(l policy.Limits) *Resolver {
	r.limits = l
	return r
}

// Limits are the limits Validate checks against, for other checks of retry
// policies set through the API (a record's override).
func (r *Resolver) Limits() policy.Limits { return r.limits }

// Files returns the policy files' current Set.
func (r *Resolver) Files() *policy.Set { return r.files() }

// Refresh reloads the API configs from Postgres.
func (r *Resolver) Refresh(ctx context.Context) error {
	qs, err := r.store.QueueConfigs(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]*entry, len(qs))
	for _, q := range qs {
		spec, err := policy.DecodeTopicSpec(q.Config)
		if err != nil {
			// Only valid configs are stored; one that no longer decodes (a
			// newer or older version wrote it) is left out, loudly.
			r.log.Error("ignoring invalid stored queue config", "queue", q.Name, "err", err)
			continue
		}
		m[q.Name] = &entry{cfg: q, spec: spec}
	}
	r.specs.Store(&m)
	return nil
}

// Refresher is the service that refreshes the API configs every interval
// on clk, for the changes other replicas make (the first refresh is New's
// caller's: Refresh).
func (r *Resolver) Refresher(interval time.Duration, clk clock.Clock) service.Service {
	return service.NewLoop("queue configs", &service.Loop{Clock: clk, Logger: r.log, What: "refresh queue configs",
		Interval: interval, Delay: true, Pass: func(ctx context.Context) (service.Next, error) {
			return service.Next{}, r.Refresh(ctx)
		}})
}

// DeclaredIn returns the policy file that declares topic (by name or glob),
// or "" when no file does. For DefaultName it is the file with _default.
func (r *Resolver) DeclaredIn(topic string) string {
	set := r.files()
	if topic == DefaultName {
		return fileDefault(set)
	}
	return set.Resolve(topic, "").DeclaredIn
}

// fileDefault finds the file declaring _default from the resolved layers.
func fileDefault(set *policy.Set) string {
	for _, l := range set.Resolve("", "").Layers {
		if rest, ok := strings.CutPrefix(l, DefaultName+" ("); ok {
			return strings.TrimSuffix(rest, ")")
		}
	}
	return ""
}

// Resolve implements policy.Resolver.
func (r *Resolver) Resolve(topic, typ string) policy.Topic {
	set := r.files()
	t := set.Resolve(topic, typ)
	if t.DeclaredIn != "" {
		return t
	}
	specs := *r.specs.Load()
	if e := specs[DefaultName]; e != nil && fileDefault(set) == "" {
		t = r.apply(t, "_default (api)", e.spec)
	}
	if e := specs[topic]; e != nil && topic != DefaultName {
		t = r.apply(t, "api", e.spec)
	}
	return t
}

func (r *Resolver) apply(t policy.Topic, label string, spec *policy.TopicSpec) policy.Topic {
	nt, err := t.Apply(label, spec)
	if err != nil {
		r.log.Error("stored queue config does not apply; ignoring it", "queue", t.Name, "layer", label, "err", err)
		return t
	}
	return nt
}

// Known reports whether a policy file (by name or glob) or an API config
// declares topic: strict_queues turns the records of the other topics away.
func (r *Resolver) Known(topic string) bool {
	if topic == DefaultName {
		return false
	}
	if r.files().Known(topic) {
		return true
	}
	_, ok := (*r.specs.Load())[topic]
	return ok
}

// Default resolves the default layer itself: system defaults ← the files'
// _default, or (when the files have none) the API's. Resolve(DefaultName, "")
// is the policy of a Kafka topic named _default instead, which follows the
// layer but may also match a glob of the files.
func (r *Resolver) Default() policy.Topic {
	set := r.files()
	t := set.Default()
	if e := (*r.specs.Load())[DefaultName]; e != nil && fileDefault(set) == "" {
		t = r.apply(t, "_default (api)", e.spec)
	}
	return t
}

// Config returns the API config of name, if one is stored.
func (r *Resolver) Config(name string) (store.QueueConfig, *policy.TopicSpec, bool) {
	e := (*r.specs.Load())[name]
	if e == nil {
		return store.QueueConfig{}, nil, false
	}
	return e.cfg, e.spec, true
}

// Names lists the topics with an API config (DefaultName excluded).
func (r *Resolver) Names() []string {
	var out []string
	for name := range *r.specs.Load() {
		if name != DefaultName {
			out = append(out, name)
		}
	}
	return out
}

// ErrReadOnly is returned for a change to a topic the policy files declare.
var ErrReadOnly = errors.New("declared in a policy file")

// Validate checks that spec applies cleanly over what topic would otherwise
// inherit, within the Resolver's limits; the error is a policy error
// (errors.Is policy.ErrInvalid).
func (r *Resolver) Validate(topic string, spec *policy.TopicSpec) error {
	set := r.files()
	base := set.Resolve(topic, "")
	if topic == DefaultName {
		base = set.Default()
	} else if e := (*r.specs.Load())[DefaultName]; e != nil && fileDefault(set) == "" {
		base = r.apply(base, "_default (api)", e.spec)
	}
	if err := spec.CheckAPIConfig(topic == DefaultName); err != nil {
		return err
	}
	if _, err := base.ApplyWithin(r.limits, "api", spec); err != nil {
		return err
	}
	return spec.CheckTargets(r.reserved)
}

// Reserve names the topics no API config may name as its
// redelivery.target_topic (Redrive's own; Kafka's internal ones are refused
// by every policy check). Call it before the Resolver is used.
func (r *Resolver) Reserve(reserved dlq.ReservedTopics) { r.reserved = reserved }

// Marshal renders spec as stored JSON.
func Marshal(spec *policy.TopicSpec) (json.RawMessage, error) { return json.Marshal(spec) }
