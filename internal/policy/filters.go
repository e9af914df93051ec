package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/internal/dlq"
)

// Ingest filters: rules in policy files (_default and topics entries) that
// ingest applies to each new failure before the retry policy. A record a
// filter matches is stored all the same, discarded with the error type
// filtered and the filter's name (action discard), or kept as a dead letter
// that is never redelivered by itself (action skip_retry).

// FilterAction is what a matching filter does with a record.
type FilterAction string

const (
	// FilterDiscard keeps the record as a discard (retention.discarded),
	// never retried by itself.
	FilterDiscard FilterAction = "discard"
	// FilterSkipRetry keeps the record as a dead letter: never redelivered
	// automatically, an operator may still retry it.
	FilterSkipRetry FilterAction = "skip_retry"
)

// Valid reports whether a is a known action.
func (a FilterAction) Valid() bool { return a == FilterDiscard || a == FilterSkipRetry }

// FilterSpec is a partial ingest filter. Filters merge by name, as replay
// rules do: a filter in a more specific layer with the name of an inherited
// one changes only the fields it sets ({name: x, enabled: false} turns x off
// for one topic).
type FilterSpec struct {
	Name  string           `json:"name"`
	Match *FilterMatchSpec `json:"match,omitempty"`
	// Action is discard or skip_retry.
	Action *FilterAction `json:"action,omitempty"`
	// WhenEnv lists globs on REDRIVE_ENVIRONMENT: the filter applies only
	// where one matches. nil: everywhere.
	WhenEnv []string `json:"when_env,omitempty"`
	Enabled *bool    `json:"enabled,omitempty"`
}

// FilterMatchSpec is what a filter matches: every condition set must hold.
type FilterMatchSpec struct {
	// KeyPrefix: the record key starts with these bytes.
	KeyPrefix *string `json:"key_prefix,omitempty"`
	// KeyGlob: the whole key matches the glob ('*' any run of bytes).
	KeyGlob *string `json:"key_glob,omitempty"`
	// HeaderPresent: the original record has a header of this name.
	HeaderPresent *string `json:"header_present,omitempty"`
	// HeaderEquals: the original record has this header with exactly this value.
	HeaderEquals *HeaderMatchSpec `json:"header_equals,omitempty"`
	// Type: the record type matches the glob.
	Type *string `json:"type,omitempty"`
	// Payload: the JSON value at a path of the record's value.
	Payload *PayloadMatchSpec `json:"payload,omitempty"`
	// SourceTopic: the source topic matches the glob.
	SourceTopic *string `json:"source_topic,omitempty"`
}

// HeaderMatchSpec is a header name and its exact value.
type HeaderMatchSpec struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PayloadMatchSpec matches the JSON scalar at Path (dot-separated object
// keys) of the record's value: strings and booleans exactly, null, and
// numbers by their exact decimal value (1.50 matches 1.5, never through a
// float).
type PayloadMatchSpec struct {
	Path  string     `json:"path"`
	Value JSONScalar `json:"value"`
}

// JSONScalar is a JSON string, number, boolean or null, kept as its JSON
// text; the zero value is "not set".
type JSONScalar struct{ raw string }

// MarshalJSON writes the scalar's JSON text.
func (s JSONScalar) MarshalJSON() ([]byte, error) {
	if s.raw == "" {
		return []byte("null"), nil
	}
	return []byte(s.raw), nil
}

// String is the scalar's JSON text.
func (s JSONScalar) String() string { return s.raw }

var jsonScalarType = reflect.TypeFor[JSONScalar]()

// jsonScalar decodes a YAML (or JSON) scalar node into a JSONScalar.
func (d *decoder) jsonScalar(n *yaml.Node, v reflect.Value, p string) {
	const want = "must be a JSON scalar (string, number, boolean or null)"
	if n.Kind != yaml.ScalarNode {
		d.addf(p, "%s, got %s", want, describeNode(n))
		return
	}
	var raw string
	switch n.ShortTag() {
	case "!!null":
		raw = "null"
	case "!!bool":
		var b bool
		if n.Decode(&b) != nil {
			d.addf(p, "%s, got %s", want, describeNode(n))
			return
		}
		raw = fmt.Sprint(b)
	case "!!int", "!!float":
		if !jsonNumber.MatchString(n.Value) {
			d.addf(p, "must be a number as JSON writes it (e.g. 42, -1.5, 1e3), got %s", n.Value)
			return
		}
		raw = n.Value
	case "!!str":
		b, _ := json.Marshal(n.Value)
		raw = string(b)
	default:
		d.addf(p, "%s, got %s", want, describeNode(n))
		return
	}
	v.Set(reflect.ValueOf(JSONScalar{raw: raw}))
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// Filter is an effective ingest filter.
type Filter struct {
	Name    string
	Match   FilterMatchSpec
	Action  FilterAction
	WhenEnv []string // nil: every environment
	Enabled bool
	path    []string // Match.Payload.Path, split
	value   any      // Match.Payload.Value, decoded (json.Number for numbers)
}

// AppliesIn reports whether the filter is enabled and applies in
// environment env (REDRIVE_ENVIRONMENT): no when_env, or one of its globs
// matches env. An empty env matches no when_env.
func (f *Filter) AppliesIn(env string) bool {
	if !f.Enabled {
		return false
	}
	if f.WhenEnv == nil {
		return true
	}
	return env != "" && slices.ContainsFunc(f.WhenEnv, func(g string) bool { return matchGlob(g, env) })
}

// Matches reports whether a failure satisfies every condition of the
// filter. The payload is parsed only when the other conditions hold.
func (f *Filter) Matches(x *dlq.Failure) bool {
	m := &f.Match
	if m.KeyPrefix != nil && (x.Key == nil || !bytes.HasPrefix(x.Key, []byte(*m.KeyPrefix))) {
		return false
	}
	if m.KeyGlob != nil && (x.Key == nil || !matchGlob(*m.KeyGlob, string(x.Key))) {
		return false
	}
	if m.HeaderPresent != nil && !slices.ContainsFunc(x.Headers, func(h dlq.Header) bool { return h.Key == *m.HeaderPresent }) {
		return false
	}
	if h := m.HeaderEquals; h != nil && !slices.ContainsFunc(x.Headers, func(xh dlq.Header) bool {
		return xh.Key == h.Name && string(xh.Value) == h.Value
	}) {
		return false
	}
	if m.Type != nil && !matchGlob(*m.Type, x.Type) {
		return false
	}
	if m.SourceTopic != nil && !matchGlob(*m.SourceTopic, x.Source.Topic) {
		return false
	}
	if m.Payload != nil {
		got, ok := payloadAt(x.Value, f.path)
		return ok && scalarEqual(got, f.value)
	}
	return true
}

// payloadAt decodes the JSON scalar at path in value; ok is false when the
// value is not JSON, a key is missing, or what is there is not a scalar.
func payloadAt(value []byte, path []string) (any, bool) {
	raw := json.RawMessage(value)
	for _, k := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return nil, false
		}
		if raw, _ = obj[k]; raw == nil {
			return nil, false
		}
	}
	v, err := decodeScalar(raw)
	return v, err == nil
}

// decodeScalar decodes a JSON scalar, numbers as json.Number.
func decodeScalar(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil, fmt.Errorf("not a scalar")
	}
	return v, nil
}

// scalarEqual compares two decoded JSON scalars; numbers by exact value.
func scalarEqual(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok || bok {
		if !aok || !bok {
			return false
		}
		ar, ok1 := new(big.Rat).SetString(string(an))
		br, ok2 := new(big.Rat).SetString(string(bn))
		return ok1 && ok2 && ar.Cmp(br) == 0
	}
	return a == b
}

func (f Filter) spec() FilterSpec {
	m, a, e := f.Match, f.Action, f.Enabled
	var env []string
	if f.WhenEnv != nil {
		env = append([]string{}, f.WhenEnv...)
	}
	return FilterSpec{Name: f.Name, Match: &m, Action: &a, WhenEnv: env, Enabled: &e}
}

// Describe is the filter's conditions for humans: key_prefix "test-", type "test.*".
func (m *FilterMatchSpec) Describe() string {
	var parts []string
	q := func(name, v string) { parts = append(parts, fmt.Sprintf("%s %q", name, v)) }
	if m.KeyPrefix != nil {
		q("key_prefix", *m.KeyPrefix)
	}
	if m.KeyGlob != nil {
		q("key_glob", *m.KeyGlob)
	}
	if m.HeaderPresent != nil {
		q("header_present", *m.HeaderPresent)
	}
	if h := m.HeaderEquals; h != nil {
		parts = append(parts, fmt.Sprintf("header_equals %q=%q", h.Name, h.Value))
	}
	if m.Type != nil {
		q("type", *m.Type)
	}
	if pm := m.Payload; pm != nil {
		parts = append(parts, fmt.Sprintf("payload %s = %s", pm.Path, pm.Value.raw))
	}
	if m.SourceTopic != nil {
		q("source_topic", *m.SourceTopic)
	}
	return strings.Join(parts, ", ")
}

// filterAcc is a filter being merged, and the layer that touched it last.
type filterAcc struct {
	spec FilterSpec
	from *layer
	path string
}

// filterMerge merges filters by name across layers.
type filterMerge struct{ accs []*filterAcc }

func newFilterMerge(base []Filter) *filterMerge {
	m := &filterMerge{}
	for _, f := range base {
		m.accs = append(m.accs, &filterAcc{spec: f.spec()})
	}
	return m
}

func (m *filterMerge) add(specs []FilterSpec, ly *layer) {
	for j, fs := range specs {
		path := index(child(ly.name, "filters"), j)
		k := slices.IndexFunc(m.accs, func(a *filterAcc) bool { return a.spec.Name == fs.Name })
		if k < 0 {
			m.accs = append(m.accs, &filterAcc{spec: fs, from: ly, path: path})
			continue
		}
		a := m.accs[k]
		if fs.Match != nil {
			a.spec.Match = fs.Match
		}
		if fs.Action != nil {
			a.spec.Action = fs.Action
		}
		if fs.WhenEnv != nil {
			a.spec.WhenEnv = fs.WhenEnv
		}
		if fs.Enabled != nil {
			a.spec.Enabled = fs.Enabled
		}
		a.from, a.path = ly, path
	}
}

// result completes the merged filters; with l set, an incomplete one is
// reported against the layer that touched it last.
func (m *filterMerge) result(l *errorList) []Filter {
	var out []Filter
	for _, a := range m.accs {
		f, missing := filterOf(a.spec)
		if len(missing) > 0 {
			if l != nil && a.from != nil {
				l.add(&FieldError{File: a.from.file, Path: a.path, Line: a.from.lines[a.path], Msg: fmt.Sprintf(
					"filter %q is incomplete: %s required, here or in an inherited filter of the same name",
					a.spec.Name, strings.Join(missing, ", "))})
			}
			continue
		}
		out = append(out, f)
	}
	return out
}

func filterOf(s FilterSpec) (f Filter, missing []string) {
	f = Filter{Name: s.Name, Enabled: true}
	if s.Match == nil {
		missing = append(missing, "match")
	} else {
		f.Match = *s.Match
		if p := s.Match.Payload; p != nil {
			f.path = strings.Split(p.Path, ".")
			f.value, _ = decodeScalar([]byte(p.Value.raw)) // checked when decoded
		}
	}
	if s.Action == nil {
		missing = append(missing, "action")
	} else {
		f.Action = *s.Action
	}
	if s.WhenEnv != nil {
		f.WhenEnv = s.WhenEnv
	}
	if s.Enabled != nil {
		f.Enabled = *s.Enabled
	}
	return f, missing
}

// maxFilters bounds the filters of one layer.
const maxFilters = 100

var filterName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// checkFilterSpecs checks one layer's filters.
func (l *errorList) checkFilterSpecs(fs []FilterSpec, p string) {
	if len(fs) > maxFilters {
		l.addf(p, "must list at most %d filters, got %d", maxFilters, len(fs))
	}
	seen := map[string]bool{}
	for i, f := range fs {
		fp := index(p, i)
		switch {
		case f.Name == "":
			l.addf(child(fp, "name"), "required: every filter needs a name (it is the reason a record shows, and a metric label)")
		case !filterName.MatchString(f.Name):
			l.addf(child(fp, "name"), "must be 1 to 64 letters, digits, '.', '_' or '-', got %q", f.Name)
		case seen[f.Name]:
			l.addf(child(fp, "name"), "duplicate filter name %q", f.Name)
		}
		seen[f.Name] = true
		if f.Action != nil && !f.Action.Valid() {
			l.addf(child(fp, "action"), "must be one of discard, skip_retry, got %q", *f.Action)
		}
		if f.WhenEnv != nil {
			ep := child(fp, "when_env")
			if len(f.WhenEnv) == 0 {
				l.addf(ep, "must list at least one environment (leave when_env out to apply everywhere)")
			}
			for j, g := range f.WhenEnv {
				l.checkPattern(g, index(ep, j), 255)
			}
		}
		if f.Match != nil {
			l.checkFilterMatch(f.Match, child(fp, "match"))
		}
	}
}

func (l *errorList) checkFilterMatch(m *FilterMatchSpec, p string) {
	if *m == (FilterMatchSpec{}) {
		l.addf(p, "must set at least one of key_prefix, key_glob, header_present, header_equals, type, payload, source_topic")
		return
	}
	for _, c := range []struct {
		name string
		v    *string
	}{{"key_prefix", m.KeyPrefix}, {"key_glob", m.KeyGlob}, {"header_present", m.HeaderPresent}, {"type", m.Type}, {"source_topic", m.SourceTopic}} {
		if c.v != nil {
			l.checkPattern(*c.v, child(p, c.name), 16<<10)
		}
	}
	if h := m.HeaderEquals; h != nil {
		hp := child(p, "header_equals")
		if h.Name == "" {
			l.addf(child(hp, "name"), "required: the header's name")
		}
		if len(h.Value) > 16<<10 {
			l.addf(child(hp, "value"), "must be at most %d bytes, got %d", 16<<10, len(h.Value))
		}
	}
	if pm := m.Payload; pm != nil {
		pp := child(p, "payload")
		keys := strings.Split(pm.Path, ".")
		switch {
		case pm.Path == "":
			l.addf(child(pp, "path"), "required: dot-separated keys into the JSON value, e.g. meta.test")
		case len(keys) > 32:
			l.addf(child(pp, "path"), "must have at most 32 keys, got %d", len(keys))
		case slices.Contains(keys, ""):
			l.addf(child(pp, "path"), "%q has an empty key: write keys separated by single dots", pm.Path)
		}
		if pm.Value.raw == "" {
			l.addf(child(pp, "value"), "required: the JSON scalar to compare with (a string, number, boolean or null)")
		}
	}
}
