package policy

import (
	"encoding/json"
	"slices"
	"strings"
)

// Where each field of an effective topic policy comes from: the most
// specific layer that sets it (GET /ojs/v1/queues/{name}/config's sources,
// `redrive topics show`).

// Source layers.
const (
	// SourceDefault: no layer sets the field; it is the system default.
	SourceDefault = "default"
	// SourceFile: a policy file sets it (File names it, Entry the entry).
	SourceFile = "policy file"
	// SourceAPI: the topic config set through the API does (Entry
	// "_default" for the API's default layer).
	SourceAPI = "api"
)

// Source is where an effective field's value comes from.
type Source struct {
	Layer string `json:"layer"`
	// File is the policy file of a SourceFile.
	File string `json:"file,omitempty"`
	// Entry is the entry that sets it: "_default", `topics."orders.*"`,
	// "replay_rules" (a file's top-level rules); empty for a topic's own
	// API config.
	Entry string `json:"entry,omitempty"`
}

// Sources maps every field path of an effective policy ("retry.max_attempts",
// "retention.cancelled", "replay_rules", ...: the dotted paths of its JSON
// objects, lists whole) to its Source.
type Sources map[string]Source

// DefaultSources is every field of the system defaults, each from SourceDefault.
func DefaultSources() Sources {
	b, _ := json.Marshal(DefaultTopic())
	out := Sources{}
	for _, p := range fieldPaths(b) {
		out[p] = Source{Layer: SourceDefault}
	}
	return out
}

// Apply marks the fields spec sets as coming from src (a layer over those
// already applied). Fields the effective policy does not have (types) are
// left out.
func (s Sources) Apply(src Source, spec *TopicSpec) {
	if spec == nil {
		return
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return
	}
	for _, p := range fieldPaths(b) {
		if _, ok := s[p]; ok {
			s[p] = src
		}
	}
}

// Paths lists the field paths in order.
func (s Sources) Paths() []string {
	out := make([]string, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Sources says where each field of Resolve(topic, "") comes from in the
// files: system defaults ← top-level replay rules ← _default ← the best
// glob entry ← the exact entry.
func (s *Set) Sources(topic string) Sources {
	out := DefaultSources()
	if s == nil {
		return out
	}
	var g, e *entry
	if i := slices.IndexFunc(s.globs, func(g *entry) bool { return g.key == topic }); i >= 0 {
		g = s.globs[i]
	} else {
		e, g = s.exact[topic], s.bestGlob(topic)
	}
	for _, l := range s.layersFor(g, e, "") {
		out.Apply(l.source(), l.spec)
	}
	return out
}

// DefaultSources says where each field of Default() comes from.
func (s *Set) DefaultSources() Sources {
	out := DefaultSources()
	if s == nil {
		return out
	}
	for _, l := range s.baseLayers() {
		out.Apply(l.source(), l.spec)
	}
	return out
}

func (l *layer) source() Source {
	entry := l.name
	if entry == "" {
		entry = "replay_rules"
	}
	return Source{Layer: SourceFile, File: l.file, Entry: entry}
}

// fieldPaths lists the dotted paths of the leaves of a JSON object (an
// array or a scalar is a leaf; an empty object has none).
func fieldPaths(b []byte) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	var out []string
	for k, v := range m {
		if k == "types" {
			continue
		}
		if t := strings.TrimSpace(string(v)); strings.HasPrefix(t, "{") {
			for _, sub := range fieldPaths(v) {
				out = append(out, k+"."+sub)
			}
			continue
		}
		out = append(out, k)
	}
	return out
}
