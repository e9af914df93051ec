package policy

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Set is a loaded policy directory. It is immutable and safe for concurrent use.
// A nil *Set is valid and resolves every topic to the system defaults.
type Set struct {
	files  []string
	def    *entry
	exact  map[string]*entry // by topic name
	globs  []*entry          // most specific first
	global []layer           // top-level replay_rules, one layer per file
	types  map[string]bool   // type names with an override in some topics entry
	masks  *maskCache        // masking rules by topic (masking.go)
}

// entry is one _default or topics entry.
type entry struct {
	key   string // topic name or glob; "_default" for the default entry
	file  string
	path  string // "_default" or `topics."orders.*"`
	spec  *TopicSpec
	lines map[string]int
}

func (e *entry) glob() bool { return strings.Contains(e.key, "*") }

func (e *entry) layer() layer {
	return layer{name: e.path, label: e.path + " (" + e.file + ")", file: e.file, spec: e.spec, lines: e.lines}
}

// typeLayer is the entry's override for type typ, if it has one.
func (e *entry) typeLayer(typ string) (layer, bool) {
	ts, ok := e.spec.Types[typ]
	if !ok || typ == "" {
		return layer{}, false
	}
	if ts == nil {
		ts = &TopicSpec{}
	}
	p := child(child(e.path, "types"), typ)
	return layer{name: p, label: p + " (" + e.file + ")", file: e.file, spec: ts, lines: e.lines}, true
}

// fileSpec is the top level of a policy file.
type fileSpec struct {
	Default     *TopicSpec            `json:"_default"`
	Topics      map[string]*TopicSpec `json:"topics"`
	ReplayRules []ReplayRuleSpec      `json:"replay_rules"`
}

// LoadDir loads every *.yaml and *.yml file directly in dir (not in
// subdirectories; names starting with '.' are skipped, which also skips the
// ..data links of a Kubernetes ConfigMap mount) as one Set. See LoadFiles.
//
// Retry policies are checked against DefaultLimits; Limits.LoadDir loads
// within other limits.
func LoadDir(dir string) (*Set, error) { return DefaultLimits().LoadDir(dir) }

// policyFiles lists the policy files directly in dir.
func policyFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	var paths []string
	for _, de := range des {
		name := de.Name()
		ext := filepath.Ext(name)
		if de.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		paths = append(paths, filepath.Join(dir, name))
	}
	return paths, nil
}

// LoadFiles loads the given policy files as one Set. It is pure: it reads the
// files and returns a new Set, or an error and no Set, never half of one. Every
// problem in every file is reported at once, as an Errors naming file, field path
// and line (errors.Is(err, ErrInvalid) holds). A file that cannot be read is
// returned as a plain wrapped error.
//
// A topic, the _default entry and a top-level replay rule name may each be
// declared in one file only. Once every file is valid on its own, LoadFiles also
// merges every layer combination that Resolve can produce and checks the merged
// results (max_interval >= initial_interval, replay rules complete, retry
// policies within DefaultLimits), so that Resolve never returns an invalid
// policy.
func LoadFiles(paths ...string) (*Set, error) { return DefaultLimits().LoadFiles(paths...) }

// readSources reads the given files, each once, in name order.
func readSources(paths []string) ([]source, error) {
	var sources []source
	for _, path := range slices.Compact(slices.Sorted(slices.Values(paths))) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("load policies: %w", err)
		}
		sources = append(sources, source{path, data})
	}
	return sources, nil
}

// source is one policy file's name and content.
type source struct {
	name string
	data []byte
}

// load builds a Set from file contents, in the given order.
func load(sources []source) (*Set, error) { return loadWithin(sources, DefaultLimits()) }

// loadWithin is load with retry policies within lim.
func loadWithin(sources []source, lim Limits) (*Set, error) {
	s := &Set{exact: map[string]*entry{}, types: map[string]bool{}, masks: &maskCache{}}
	l := &errorList{limits: &lim}
	topicFile := map[string]string{}
	ruleFile := map[string]string{}
	for _, src := range sources {
		path := src.name
		f, lines, errs := parseFileWithin(path, src.data, &lim)
		for _, e := range errs {
			l.add(e)
		}
		s.files = append(s.files, path)
		if f == nil {
			continue
		}
		if f.Default != nil {
			if s.def != nil {
				l.add(&FieldError{File: path, Path: "_default", Line: lines["_default"], Msg: fmt.Sprintf(
					"_default is also declared in %s; it may be declared in one file only", s.def.file)})
			} else {
				s.def = &entry{key: "_default", file: path, path: "_default", spec: f.Default, lines: lines}
			}
		}
		for _, key := range slices.Sorted(maps.Keys(f.Topics)) {
			p := child("topics", key)
			if other, dup := topicFile[key]; dup {
				l.add(&FieldError{File: path, Path: p, Line: lines[p], Msg: fmt.Sprintf(
					"topic %q is also declared in %s; a topic may be declared in one file only", key, other)})
				continue
			}
			topicFile[key] = path
			spec := f.Topics[key]
			if spec == nil {
				spec = &TopicSpec{}
			}
			e := &entry{key: key, file: path, path: p, spec: spec, lines: lines}
			for typ := range spec.Types {
				s.types[typ] = true
			}
			if e.glob() {
				s.globs = append(s.globs, e)
			} else {
				s.exact[key] = e
			}
		}
		for i, r := range f.ReplayRules {
			p := child(index("replay_rules", i), "name")
			if other, dup := ruleFile[r.Name]; dup && r.Name != "" && other != path {
				l.add(&FieldError{File: path, Path: p, Line: lines[index("replay_rules", i)], Msg: fmt.Sprintf(
					"replay rule %q is also declared in %s; top-level rule names must be unique", r.Name, other)})
			}
			ruleFile[r.Name] = path
		}
		if len(f.ReplayRules) > 0 {
			s.global = append(s.global, layer{label: "replay_rules (" + path + ")", file: path,
				spec: &TopicSpec{ReplayRules: f.ReplayRules}, lines: lines})
		}
	}
	slices.SortFunc(s.globs, func(a, b *entry) int { return compareSpecificity(a.key, b.key) })
	if len(l.errs) == 0 {
		// Merged results are checked once every file is valid on its own: merging
		// half-decoded entries would only repeat their problems.
		s.checkMerged(l)
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// parseFile decodes and checks one policy file on its own. f is nil when the
// file holds no document or is not YAML at all.
func parseFile(path string, data []byte) (f *fileSpec, lines map[string]int, errs Errors) {
	return parseFileWithin(path, data, nil)
}

// parseFileWithin is parseFile with retry policies checked against lim, when set.
func parseFileWithin(path string, data []byte, lim *Limits) (f *fileSpec, lines map[string]int, errs Errors) {
	n, err := parseYAML(data)
	if err != nil {
		return nil, nil, Errors{{File: path, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if n == nil {
		return nil, nil, nil
	}
	d := newDecoder(path)
	d.limits = lim
	f = &fileSpec{}
	d.value(n, reflect.ValueOf(f).Elem(), "")
	d.checkTopicSpec(f.Default, "_default", levelDefault)
	for key, spec := range f.Topics {
		p := child("topics", key)
		if key == "_default" {
			d.addf(p, "the name _default is reserved; put defaults under the top-level _default key")
		} else if msg := topicNameProblem(key, true); msg != "" {
			d.addf(p, "topic %s", msg)
		}
		d.checkTopicSpec(spec, p, levelTopic)
	}
	d.checkReplayRuleSpecs(f.ReplayRules, "replay_rules")
	return f, d.lines, d.errs
}

// checkMerged builds every layer chain Resolve can produce and checks the results.
func (s *Set) checkMerged(l *errorList) {
	build(DefaultTopic(), s.baseLayers(), l)
	check := func(g, e *entry) {
		types := map[string]bool{"": true}
		for _, en := range []*entry{g, e} {
			if en != nil {
				for typ := range en.spec.Types {
					types[typ] = true
				}
			}
		}
		for typ := range types {
			build(DefaultTopic(), s.layersFor(g, e, typ), l)
		}
	}
	for _, g := range s.globs {
		check(g, nil)
	}
	for _, e := range s.exact {
		check(s.bestGlob(e.key), e)
	}
}

// layersFor is the merge chain for glob entry g and exact entry e (either may be
// nil) and type typ.
func (s *Set) layersFor(g, e *entry, typ string) []layer {
	layers := s.baseLayers()
	for _, en := range []*entry{g, e} {
		if en != nil {
			layers = append(layers, en.layer())
		}
	}
	return append(layers, s.typeLayers(g, e, typ)...)
}

// baseLayers are the layers every topic gets: top-level replay rules, then _default.
func (s *Set) baseLayers() []layer {
	layers := slices.Clone(s.global)
	if s.def != nil {
		layers = append(layers, s.def.layer())
	}
	return layers
}

func (s *Set) typeLayers(g, e *entry, typ string) []layer {
	var out []layer
	for _, en := range []*entry{g, e} {
		if en == nil {
			continue
		}
		if tl, ok := en.typeLayer(typ); ok {
			out = append(out, tl)
		}
	}
	return out
}

// Resolve returns the effective policy for records of topic (and of type typ, ""
// for none): system defaults ← top-level replay rules ← _default ← the most
// specific matching glob entry ← the exact entry ← the glob entry's types[typ] ←
// the exact entry's types[typ].
//
// Matching: an exact entry applies to that topic only. Among glob entries ('*'
// matches any run of characters, dots included) only the most specific one that
// matches applies: the one with the most literal (non-'*') characters, then the
// fewest '*', then the alphabetically first. Type overrides match exact type
// names only.
func (s *Set) Resolve(topic, typ string) Topic {
	if s == nil {
		t := DefaultTopic()
		t.Name, t.Type = topic, typ
		return t
	}
	var g, e *entry
	if i := slices.IndexFunc(s.globs, func(g *entry) bool { return g.key == topic }); i >= 0 {
		// A glob key itself (`policy explain "orders.*"`): what the topics it
		// matches get, so no other glob is layered under it.
		g = s.globs[i]
	} else {
		e = s.exact[topic]
		g = s.bestGlob(topic)
	}
	t := build(DefaultTopic(), s.layersFor(g, e, typ), nil)
	t.Name, t.Type = topic, typ
	if most := cmp.Or(e, g); most != nil {
		t.DeclaredIn, t.Pattern = most.file, most.key
	}
	return t
}

// Default returns the default layer itself, as "_default": system defaults
// ← top-level replay rules ← _default. No topics entry applies to it, not
// even a glob that would match a topic named _default: that topic's policy
// is Resolve("_default", "").
func (s *Set) Default() Topic {
	if s == nil {
		t := DefaultTopic()
		t.Name = "_default"
		return t
	}
	t := build(DefaultTopic(), s.baseLayers(), nil)
	t.Name = "_default"
	return t
}

// Files lists the policy files that were loaded, sorted.
func (s *Set) Files() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.files)
}

// Topics maps every topic key declared in the files (names and globs) to the
// file that declares it.
func (s *Set) Topics() map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	for k, e := range s.exact {
		out[k] = e.file
	}
	for _, g := range s.globs {
		out[g.key] = g.file
	}
	return out
}

// Declares reports whether a topics entry names topic exactly (a glob that
// matches it does not count).
func (s *Set) Declares(topic string) bool {
	if s == nil {
		return false
	}
	_, ok := s.exact[topic]
	return ok
}

// Known reports whether a topics entry applies to topic: its exact name or
// a glob that matches it (strict_queues turns the other topics away).
func (s *Set) Known(topic string) bool {
	return s != nil && (s.exact[topic] != nil || s.bestGlob(topic) != nil)
}

// DeclaresType reports whether some topics entry has a per-type override for
// record type typ.
func (s *Set) DeclaresType(typ string) bool { return s != nil && s.types[typ] }

// bestGlob returns the most specific glob entry matching topic. Kafka topic names
// cannot contain '*', so a name with one matches nothing.
func (s *Set) bestGlob(topic string) *entry {
	for _, g := range s.globs { // sorted most specific first
		if !strings.Contains(topic, "*") && matchGlob(g.key, topic) {
			return g
		}
	}
	return nil
}

// compareSpecificity orders glob patterns most specific first.
func compareSpecificity(a, b string) int {
	la, lb := len(a)-strings.Count(a, "*"), len(b)-strings.Count(b, "*")
	return cmp.Or(cmp.Compare(lb, la), cmp.Compare(strings.Count(a, "*"), strings.Count(b, "*")), strings.Compare(a, b))
}

// matchGlob reports whether name matches pattern, where '*' matches any run of
// characters (including none, and including dots).
func matchGlob(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
