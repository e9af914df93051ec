package policy

import (
	"slices"
	"strings"
	"sync"

	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/mask"
)

// Data masking (docs/security.md, "Data masking"): what a caller without
// the unmask permission on a queue does not see of its records. Set in
// policy files only (_default and topics entries), merged field by field
// like the other settings: a field a layer sets replaces the inherited one
// (lists replace), so `masking: {patterns: []}` in a topics entry turns
// off the patterns _default set.

// MaskingSpec is a partial masking section.
type MaskingSpec struct {
	// Paths are JSON paths into the payload, as filters write them
	// (dot-separated object keys): the value there is masked.
	Paths []string `json:"paths,omitempty"`
	// Headers are globs on header names (case aside): their values are masked.
	Headers []string `json:"headers,omitempty"`
	// Keys are globs on the record key: a matching key is masked.
	Keys []string `json:"keys,omitempty"`
	// Patterns are built-in patterns applied to the value: card_number, email.
	Patterns []string `json:"patterns,omitempty"`
	// Regexes are custom patterns applied to the value.
	Regexes []RegexSpec `json:"regexes,omitempty"`
}

// RegexSpec is a named custom pattern: a regular expression in RE2 syntax.
type RegexSpec struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
}

// Bounds of a masking section.
const (
	maxMaskEntries = 100
	maxMaskRegexes = 20
)

// maskingAcc merges masking sections across layers.
type maskingAcc struct {
	spec MaskingSpec
	set  bool
}

func (a *maskingAcc) add(s *MaskingSpec) {
	if s == nil {
		return
	}
	a.set = true
	if s.Paths != nil {
		a.spec.Paths = s.Paths
	}
	if s.Headers != nil {
		a.spec.Headers = s.Headers
	}
	if s.Keys != nil {
		a.spec.Keys = s.Keys
	}
	if s.Patterns != nil {
		a.spec.Patterns = s.Patterns
	}
	if s.Regexes != nil {
		a.spec.Regexes = s.Regexes
	}
}

// rules compiles the merged section; nil when it masks nothing. The
// section was checked when its file loaded: what does not compile here
// (a spec built in Go) is left out.
func (a *maskingAcc) rules() *mask.Rules {
	if !a.set {
		return nil
	}
	r := &mask.Rules{Headers: slices.Clone(a.spec.Headers), Keys: slices.Clone(a.spec.Keys)}
	for _, p := range a.spec.Paths {
		if segs, problem := filter.ParsePath(p); problem == "" {
			r.Paths = append(r.Paths, segs)
		}
	}
	for _, name := range a.spec.Patterns {
		if p, ok := mask.Builtin(name); ok {
			r.Patterns = append(r.Patterns, p)
		}
	}
	for _, rx := range a.spec.Regexes {
		if p, err := mask.Compile(rx.Name, rx.Pattern); err == nil {
			r.Patterns = append(r.Patterns, p)
		}
	}
	if !r.Active() {
		return nil
	}
	return r
}

// maskingSpecOf is the section of r, each field as it is written back
// (an empty list left out, as JSON leaves it out).
func maskingSpecOf(r *mask.Rules) *MaskingSpec {
	s := &MaskingSpec{}
	if r == nil {
		return s
	}
	for _, p := range r.Paths {
		s.Paths = append(s.Paths, strings.Join(p, "."))
	}
	s.Headers = append(s.Headers, r.Headers...)
	s.Keys = append(s.Keys, r.Keys...)
	for _, p := range r.Patterns {
		if slices.Contains(mask.Builtins, p.Name) {
			s.Patterns = append(s.Patterns, p.Name)
		} else {
			s.Regexes = append(s.Regexes, RegexSpec{Name: p.Name, Pattern: p.Expr})
		}
	}
	return s
}

// checkMasking checks one layer's masking section.
func (l *errorList) checkMasking(s *MaskingSpec, p string, lvl level) {
	if s == nil {
		return
	}
	mp := child(p, "masking")
	if lvl == levelType {
		l.addf(mp, "is set per topic, not per type: a caller sees a queue's records masked alike; set it in the topics entry")
		return
	}
	if lvl == levelOverride {
		return // refused by CheckAPIConfig, naming the field
	}
	list := func(name string, n int, max int) {
		if n > max {
			l.addf(child(mp, name), "must list at most %d entries, got %d", max, n)
		}
	}
	list("paths", len(s.Paths), maxMaskEntries)
	for i, path := range s.Paths {
		ip := index(child(mp, "paths"), i)
		segs, problem := filter.ParsePath(path)
		switch {
		case problem != "":
			l.addf(ip, "%s, got %q", problem, path)
		case len(path) > 1024:
			l.addf(ip, "must be at most 1024 bytes, got %d", len(path))
		case len(segs) > filter.MaxPathDepth:
			l.addf(ip, "must have at most %d dot-separated keys, got %d", filter.MaxPathDepth, len(segs))
		}
	}
	list("headers", len(s.Headers), maxMaskEntries)
	for i, g := range s.Headers {
		l.checkPattern(g, index(child(mp, "headers"), i), 1024)
	}
	list("keys", len(s.Keys), maxMaskEntries)
	for i, g := range s.Keys {
		l.checkPattern(g, index(child(mp, "keys"), i), 16<<10)
	}
	for i, name := range s.Patterns {
		if _, ok := mask.Builtin(name); !ok {
			l.addf(index(child(mp, "patterns"), i), "must be one of %s, got %q (write your own under regexes)",
				strings.Join(mask.Builtins, ", "), name)
		}
	}
	list("regexes", len(s.Regexes), maxMaskRegexes)
	seen := map[string]bool{}
	for i, rx := range s.Regexes {
		rp := index(child(mp, "regexes"), i)
		switch {
		case rx.Name == "":
			l.addf(child(rp, "name"), "required: every regex needs a name (explain shows it)")
		case !filterName.MatchString(rx.Name):
			l.addf(child(rp, "name"), "must be 1 to 64 letters, digits, '.', '_' or '-', got %q", rx.Name)
		case slices.Contains(mask.Builtins, rx.Name):
			l.addf(child(rp, "name"), "%q is a built-in pattern: list it under patterns, or name yours otherwise", rx.Name)
		case seen[rx.Name]:
			l.addf(child(rp, "name"), "duplicate regex name %q", rx.Name)
		}
		seen[rx.Name] = true
		if rx.Pattern == "" {
			l.addf(child(rp, "pattern"), "required: a regular expression (RE2 syntax)")
		} else if _, err := mask.Compile(rx.Name, rx.Pattern); err != nil {
			l.addf(child(rp, "pattern"), "%v", err)
		}
	}
}

// explainMasking writes the masking rows of explain.
func explainMasking(r *mask.Rules, row func(k string, v any)) {
	if !r.Active() {
		row("masking", "none (every caller sees records in clear)")
		return
	}
	s := maskingSpecOf(r)
	row("masking.paths", orNone(strings.Join(s.Paths, ", "), "none"))
	row("masking.headers", orNone(strings.Join(s.Headers, ", "), "none"))
	row("masking.keys", orNone(strings.Join(s.Keys, ", "), "none"))
	row("masking.patterns", orNone(strings.Join(s.Patterns, ", "), "none"))
	if len(s.Regexes) == 0 {
		row("masking.regexes", "none")
	}
	for _, rx := range s.Regexes {
		row("masking.regexes."+rx.Name, rx.Pattern)
	}
	row("masking applies to", "callers without unmask on the topic (read-only API keys, keys with unmask: false)")
}

// checkMaskingAPI refuses a masking section in a config set through the
// API: masking is set in policy files only, where redrive policy validate
// reviews it, and a caller who may configure a queue must not be able to
// unmask it.
func checkMaskingAPI(s *TopicSpec) *FieldError {
	if s == nil || s.Masking == nil {
		return nil
	}
	return &FieldError{Path: "masking",
		Msg: "masking is set in policy files only (_default or a topics entry), where redrive policy validate reviews it"}
}

// maskCache holds the masking rules of the topics asked for: they are asked
// for each record shown, each event published.
type maskCache struct {
	mu    sync.RWMutex
	rules map[string]*mask.Rules
}

// maxMaskCache bounds the topics whose rules are kept: topic names come
// from producers.
const maxMaskCache = 10_000

// Masks reports whether any file masks anything: without, no caller's
// view of any record is masked, and nothing needs resolving.
func (s *Set) Masks() bool {
	if s == nil {
		return false
	}
	for _, e := range slices.Concat([]*entry{s.def}, s.globs) {
		if e != nil && e.spec.Masking != nil {
			return true
		}
	}
	for _, e := range s.exact {
		if e.spec.Masking != nil {
			return true
		}
	}
	return false
}

// Masking is the masking rules of topic's records (Resolve(topic,
// "").Masking; a type override may not set them); nil when nothing is
// masked.
func (s *Set) Masking(topic string) *mask.Rules {
	if s == nil {
		return nil
	}
	s.masks.mu.RLock()
	r, ok := s.masks.rules[topic]
	s.masks.mu.RUnlock()
	if ok {
		return r
	}
	r = s.Resolve(topic, "").Masking
	s.masks.mu.Lock()
	if s.masks.rules == nil {
		s.masks.rules = map[string]*mask.Rules{}
	}
	if len(s.masks.rules) < maxMaskCache {
		s.masks.rules[topic] = r
	}
	s.masks.mu.Unlock()
	return r
}

// MaskingUnion is every masking rule of every file at once: the patterns
// and header globs of every entry, and each path both as it is and under
// "payload" (where an operator's edit carries it). It masks what is not
// about one queue, such as the audit log's record of an edit; nil when no
// file masks anything.
func (s *Set) MaskingUnion() *mask.Rules {
	if !s.Masks() {
		return nil
	}
	var acc MaskingSpec
	entries := slices.Concat([]*entry{s.def}, s.globs)
	for _, e := range s.exact {
		entries = append(entries, e)
	}
	for _, e := range entries {
		if e == nil || e.spec.Masking == nil {
			continue
		}
		m := e.spec.Masking
		for _, p := range m.Paths {
			acc.Paths = append(acc.Paths, p, "payload."+p)
		}
		acc.Headers = append(acc.Headers, m.Headers...)
		acc.Keys = append(acc.Keys, m.Keys...)
		for _, name := range m.Patterns {
			if !slices.Contains(acc.Patterns, name) {
				acc.Patterns = append(acc.Patterns, name)
			}
		}
		acc.Regexes = append(acc.Regexes, m.Regexes...)
	}
	a := maskingAcc{spec: acc, set: true}
	return a.rules()
}
