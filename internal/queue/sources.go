package queue

import "github.com/redrive/redrive/internal/policy"

// Sources says where each field of Resolve(topic, "") comes from, layer by
// layer as Resolve merges them: the system defaults, the policy files and,
// for a topic no file declares, the API's _default (when no file has one)
// and the topic's own API config — each API layer only when it applies, as
// in Resolve. For DefaultName it is the default layer's (Default).
func (r *Resolver) Sources(topic string) policy.Sources {
	set := r.files()
	specs := *r.specs.Load()
	var out policy.Sources
	var base policy.Topic
	if topic == DefaultName {
		out, base = set.DefaultSources(), set.Default()
	} else {
		out, base = set.Sources(topic), set.Resolve(topic, "")
		if base.DeclaredIn != "" {
			return out
		}
	}
	if e := specs[DefaultName]; e != nil && fileDefault(set) == "" {
		if nt, err := base.Apply("_default (api)", e.spec); err == nil {
			out.Apply(policy.Source{Layer: policy.SourceAPI, Entry: DefaultName}, e.spec)
			base = nt
		}
	}
	if e := specs[topic]; e != nil && topic != DefaultName {
		if _, err := base.Apply("api", e.spec); err == nil {
			out.Apply(policy.Source{Layer: policy.SourceAPI}, e.spec)
		}
	}
	return out
}
