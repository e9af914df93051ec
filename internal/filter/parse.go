package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Error is a problem with one field of a filter.
type Error struct {
	// Field names the field as its writer knows it: "path" in a query string,
	// "filter.path" in a body, "replay_rules[0].filter.path" in a policy file.
	Field string
	// Msg says what was expected.
	Msg string
}

func (e *Error) Error() string { return e.Field + ": " + e.Msg }

// Errors are every problem a parse found, unknown keys first, then in key
// order; errors.As finds the first *Error.
type Errors []*Error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, x := range e {
		msgs[i] = x.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns each problem, for errors.As and errors.Is.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, x := range e {
		out[i] = x
	}
	return out
}

// ParseQuery reads a filter from query parameters: the keys src takes, each
// at most once unless Repeatable (then once per value). Parameters that are
// no such key are left to the caller, whose query has others (limit, sort)
// and who refuses the rest. Errors name the parameter.
func ParseQuery(q url.Values, src Source) (Filter, error) {
	p := parser{}
	in := map[string][]string{}
	for _, k := range table {
		vs, ok := q[k.Name]
		if !ok || !k.Sources.Has(src) {
			continue
		}
		if len(vs) > 1 && !k.Repeatable {
			p.add(k.Name, "given more than once")
			continue
		}
		in[k.Name] = vs
	}
	return p.build(in)
}

// ParseJSON reads a filter from a JSON object, as ParseMap does; null, or
// nothing, is the empty filter. Numbers keep their text, as written.
func ParseJSON(data []byte, src Source, field string) (Filter, error) {
	p := parser{field: field}
	if len(bytes.TrimSpace(data)) == 0 {
		return Filter{}, nil // absent
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = fmt.Errorf("data after the object")
	}
	if err != nil {
		return Filter{}, Errors{{Field: p.self(), Msg: "must be a JSON object: " + strings.TrimPrefix(err.Error(), "json: ")}}
	}
	switch m := v.(type) {
	case nil:
		return Filter{}, nil
	case map[string]any:
		return ParseMap(m, src, field)
	}
	return Filter{}, Errors{{Field: p.self(), Msg: "must be a JSON object, got " + describe(v)}}
}

// ParseMap reads a filter from a map of JSON values (a policy file's, or a
// decoded JSON object): strings, a boolean for a Bool key, any scalar for a
// Scalar key, a list of strings for a Repeatable key; null is absent, but for
// a Scalar key (value: null matches null). Unknown keys, keys src
// does not take and values of the wrong kind are errors. Errors name the
// field under field ("filter" gives "filter.path"; "" names the key alone),
// every problem at once.
func ParseMap(m map[string]any, src Source, field string) (Filter, error) {
	p := parser{field: field}
	in := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		k, ok := byName[name]
		switch {
		case !ok:
			p.add(name, "unknown filter key (known: "+strings.Join(Names(src), ", ")+")")
			continue
		case !k.Sources.Has(src):
			p.add(name, "not a filter key of "+src.what()+" (only of "+k.Sources.what()+")")
			continue
		}
		if m[name] == nil && k.Kind != Scalar {
			continue // null is absent, but for value, where it is a JSON scalar
		}
		vs, msg := k.fromJSON(m[name])
		if msg != "" {
			p.add(name, msg)
			continue
		}
		in[name] = vs
	}
	return p.build(in)
}

// parser collects a parse's problems.
type parser struct {
	field string
	errs  Errors
	bad   map[string]bool // keys with a problem
}

func (p *parser) self() string {
	if p.field == "" {
		return "filter"
	}
	return p.field
}

func (p *parser) add(key, msg string) {
	name := key
	if p.field != "" {
		name = p.field + "." + key
	}
	p.errs = append(p.errs, &Error{Field: name, Msg: msg})
	if p.bad == nil {
		p.bad = map[string]bool{}
	}
	p.bad[key] = true
}

// build checks every key's values against the table and reads them into a
// filter: the one path every source ends in.
func (p *parser) build(in map[string][]string) (Filter, error) {
	var f Filter
	for i := range table {
		k := &table[i]
		vs, ok := in[k.Name]
		if !ok {
			continue
		}
		msg := k.check(vs)
		if msg == "" {
			msg = k.set(&f, vs)
		}
		if msg != "" {
			p.add(k.Name, msg)
		}
	}
	path, hasPath := in["path"]
	_, hasValue := in["value"]
	pathSet := hasPath && path[0] != ""
	switch {
	case p.bad["path"] || p.bad["value"]:
	case pathSet && !hasValue:
		p.add("value", "required with path")
	case !pathSet && hasValue:
		p.add("path", "required with value")
	}
	if !pathSet {
		f.Value = ""
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		p.add("until", "must be after since")
	}
	if len(p.errs) > 0 {
		return Filter{}, p.errs
	}
	return f, nil
}

// check bounds a key's values and checks their kind: what every key shares.
func (k *Key) check(vs []string) string {
	if k.MaxItems > 0 && len(vs) > k.MaxItems {
		return fmt.Sprintf("at most %d values, got %d", k.MaxItems, len(vs))
	}
	for _, v := range vs {
		if k.MaxDepth > 0 && v != "" {
			if n := strings.Count(v, ".") + 1; n > k.MaxDepth {
				return fmt.Sprintf("must have at most %d dot-separated keys, got %d", k.MaxDepth, n)
			}
		}
		if !k.Bytes && (!utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0) {
			return "must be valid UTF-8 without NUL characters"
		}
		if k.MaxBytes > 0 && len(v) > k.MaxBytes {
			return fmt.Sprintf("must be at most %d bytes, got %d", k.MaxBytes, len(v))
		}
	}
	switch k.Kind {
	case Enum:
		if vs[0] != "" && !slices.Contains(k.Enum, vs[0]) {
			if len(k.Enum) == 2 {
				return "must be " + k.Enum[0] + " or " + k.Enum[1]
			}
			return "must be one of " + strings.Join(k.Enum, ", ")
		}
	case Bool:
		if vs[0] != "true" && vs[0] != "false" {
			return "must be true or false"
		}
	}
	return ""
}

// fromJSON reads a JSON value of the key as its texts.
func (k *Key) fromJSON(v any) ([]string, string) {
	if k.Repeatable {
		var items []any
		switch x := v.(type) {
		case []any:
			items = x
		case []string:
			for _, s := range x {
				items = append(items, s)
			}
		default:
			return nil, "must be a list of strings, got " + describe(v)
		}
		out := make([]string, len(items))
		for i, it := range items {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Sprintf("[%d]: must be a string, got %s", i, describe(it))
			}
			out[i] = s
		}
		return out, ""
	}
	switch k.Kind {
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be a boolean (true or false), got " + describe(v)
		}
		if b {
			return []string{"true"}, ""
		}
		return []string{"false"}, ""
	case Scalar:
		s, ok := scalarText(v)
		if !ok {
			return nil, "must be a string, number, boolean or null, got " + describe(v)
		}
		return []string{s}, ""
	}
	s, ok := v.(string)
	if !ok {
		return nil, "must be a string, got " + describe(v)
	}
	return []string{s}, ""
}

// describe shows a JSON value in an error, briefly.
func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return clip(string(b), 64)
}
