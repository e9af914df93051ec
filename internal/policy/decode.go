package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// One decoder serves YAML files, JSON API bodies and JSON record headers: JSON is
// first turned into a yaml.Node tree, so both get the same strictness and the same
// error messages. The decoder is driven by the json tags of the spec structs, which
// keeps the accepted field names in one place (schema_test.go checks them against
// api/policy.schema.json).

var durationType = reflect.TypeFor[Duration]()

// decoder decodes a yaml.Node tree into spec structs, collecting every problem.
type decoder struct {
	*errorList
	budget int // nodes left to visit; aliases and merge keys can multiply a small document
}

// maxNodes bounds the work one document may cause once aliases and merge keys
// are expanded: real policy files have hundreds of nodes, an alias bomb billions.
const maxNodes = 100_000

func newDecoder(file string) *decoder {
	return &decoder{errorList: &errorList{file: file, lines: map[string]int{}}, budget: maxNodes}
}

// spend takes n nodes from the budget and reports whether decoding may go on.
func (d *decoder) spend(n int) bool {
	if d.budget < 0 {
		return false
	}
	d.budget -= n
	if d.budget < 0 {
		d.add(&FieldError{File: d.file, Msg: fmt.Sprintf(
			"document too large once aliases and merge keys are expanded (over %d nodes)", maxNodes)})
		return false
	}
	return true
}

// parseYAML parses one YAML document. An empty document yields a nil node.
func parseYAML(data []byte) (n *yaml.Node, err error) {
	// Policies are reloaded by a running processor: a parser panic on a strange
	// file must come back as an error, not take the process down.
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("cannot parse: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: only one YAML document per file is supported", extra.Line)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || isNull(doc.Content[0]) {
		return nil, nil // "---" alone, or a document that is only null: an empty file
	}
	return doc.Content[0], nil
}

// parseJSON turns one JSON value into a yaml.Node tree. It rejects duplicate keys
// and trailing data, which encoding/json would silently accept.
func parseJSON(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := jsonValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return n, nil
}

func jsonValue(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if seen[k] {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				seen[k] = true
				v, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!float"
		if !strings.ContainsAny(t.String(), ".eE") {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
}

// decodeJSON strictly decodes JSON data into v (a pointer to a spec struct),
// reporting paths under root (e.g. "retry"). The caller may add range checks to
// the returned decoder before asking it for the error.
func decodeJSON(data []byte, root string, v any) *decoder {
	d := newDecoder("")
	n, err := parseJSON(data)
	if err != nil {
		d.addf(root, "invalid JSON: %v", err)
		return d
	}
	d.value(n, reflect.ValueOf(v).Elem(), root)
	return d
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// child is the path of key under p. Keys that are not plain identifiers are
// quoted so that topics."orders.*".max_age stays unambiguous.
func child(p, key string) string {
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	if p == "" {
		return key
	}
	return p + "." + key
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func index(p string, i int) string { return fmt.Sprintf("%s[%d]", p, i) }

// value decodes n into v, which must be settable.
func (d *decoder) value(n *yaml.Node, v reflect.Value, p string) {
	if !d.spend(1) {
		return
	}
	n = resolve(n)
	if n != nil && n.Line > 0 {
		if _, ok := d.lines[p]; !ok {
			d.lines[p] = n.Line
		}
	}
	t := v.Type()
	switch {
	case t == jsonScalarType:
		d.jsonScalar(n, v, p)
	case t == durationType:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.addf(p, "must be an ISO 8601 duration string such as PT30S or P7D, got %s", describeNode(n))
			return
		}
		dur, err := ParseDuration(n.Value)
		if err != nil {
			d.addf(p, "%v", err)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.Pointer:
		if isNull(n) {
			if t.Elem().Kind() == reflect.Struct && t.Elem() != durationType {
				return // an empty section, e.g. "retry:" with nothing under it
			}
			d.addf(p, "must be %s, got null", expectedKind(t.Elem()))
			return
		}
		e := reflect.New(t.Elem())
		before := len(d.errs)
		d.value(n, e.Elem(), p)
		// Leave a bad scalar unset, so that range checks skip it rather than report
		// a zero value; a section with a bad field inside is kept for its other fields.
		if len(d.errs) == before || t.Elem().Kind() == reflect.Struct {
			v.Set(e)
		}
	case t.Kind() == reflect.Struct:
		d.structValue(n, v, p)
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface:
		if n.Kind != yaml.MappingNode {
			d.addf(p, "must be a mapping, got %s", describeNode(n))
			return
		}
		// Through JSON and back, so that a filter read from YAML holds the same
		// types as one read from JSON (timestamps become strings, numbers float64)
		// and anything JSON cannot carry (.nan, non-string keys) is refused here
		// rather than when the policy is served.
		var raw any
		if err := n.Decode(&raw); err != nil {
			d.addf(p, "%v", err)
			return
		}
		js, err := json.Marshal(raw)
		m := reflect.New(t)
		if err == nil {
			err = json.Unmarshal(js, m.Interface())
		}
		if err != nil {
			d.addf(p, "must be a mapping of JSON values: %v", strings.TrimPrefix(err.Error(), "json: "))
			return
		}
		v.Set(m.Elem())
	case t.Kind() == reflect.Map:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.addf(p, "must be a mapping, got %s", describeNode(n))
			return
		}
		m := reflect.MakeMap(t)
		for _, kv := range d.pairs(n, p) {
			e := reflect.New(t.Elem()).Elem()
			d.value(kv.val, e, child(p, kv.key))
			m.SetMapIndex(reflect.ValueOf(kv.key).Convert(t.Key()), e)
		}
		v.Set(m)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.addf(p, "must be a list, got %s", describeNode(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.value(c, s.Index(i), index(p, i))
		}
		v.Set(s)
	default:
		d.scalar(n, v, p)
	}
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, p string) {
	t := v.Type()
	tag := ""
	if n.Kind == yaml.ScalarNode {
		tag = n.ShortTag()
	}
	switch t.Kind() {
	case reflect.String:
		if tag != "!!str" {
			d.addf(p, "must be %s, got %s", expectedKind(t), describeNode(n))
			return
		}
		if canonical, ok := enumAliases(t)[n.Value]; ok {
			v.SetString(canonical)
			return
		}
		if allowed, ok := enumValues(t); ok && !slices.Contains(allowed, n.Value) {
			d.addf(p, "must be one of %s, got %q", strings.Join(allowed, ", ")+aliasNote(t), n.Value)
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		var i int64
		if tag != "!!int" || n.Decode(&i) != nil {
			d.addf(p, "must be an integer, got %s", describeNode(n))
			return
		}
		if v.OverflowInt(i) {
			d.addf(p, "integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			d.addf(p, "must be a number, got %s", describeNode(n))
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.addf(p, "must be a finite number, got %s", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		var b bool
		if tag != "!!bool" || n.Decode(&b) != nil {
			d.addf(p, "must be a boolean (true or false), got %s", describeNode(n))
			return
		}
		v.SetBool(b)
	default:
		panic(fmt.Sprintf("policy: decoder does not handle %v", t)) // a programming error in a spec struct
	}
}

func (d *decoder) structValue(n *yaml.Node, v reflect.Value, p string) {
	if n.Kind != yaml.MappingNode {
		d.addf(p, "must be a mapping, got %s", describeNode(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, kv := range d.pairs(n, p) {
		i, ok := fields.index[kv.key]
		if !ok {
			kp := child(p, kv.key)
			if d.lines[kp] == 0 {
				d.lines[kp] = kv.line
			}
			msg := "unknown field"
			if s := suggest(kv.key, fields.names); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			d.addf(kp, "%s", msg)
			continue
		}
		d.value(kv.val, v.Field(i), child(p, kv.key))
	}
}

type keyValue struct {
	key  string
	line int
	val  *yaml.Node
}

// pairs returns a mapping's entries in order, expanding YAML merge keys ("<<: *base",
// explicit keys win) and reporting duplicate and non-scalar keys.
func (d *decoder) pairs(n *yaml.Node, p string) []keyValue {
	var out, merged []keyValue
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.spend(1) {
			return nil
		}
		k, val := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergeSources(val, p)...)
			continue
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			d.add(&FieldError{File: d.file, Path: p, Line: k.Line, Msg: fmt.Sprintf("keys must be strings, got %s", describeNode(k))})
			continue
		}
		if seen[k.Value] {
			d.add(&FieldError{File: d.file, Path: child(p, k.Value), Line: k.Line, Msg: "duplicate key"})
			continue
		}
		seen[k.Value] = true
		out = append(out, keyValue{k.Value, k.Line, val})
	}
	for _, kv := range merged {
		if !seen[kv.key] {
			seen[kv.key] = true
			out = append(out, kv)
		}
	}
	return out
}

func (d *decoder) mergeSources(val *yaml.Node, p string) []keyValue {
	val = resolve(val)
	switch val.Kind {
	case yaml.MappingNode:
		return d.pairs(val, p)
	case yaml.SequenceNode:
		var out []keyValue
		for _, c := range val.Content {
			if !d.spend(1) {
				return nil
			}
			out = append(out, d.mergeSources(c, p)...)
		}
		return out
	}
	d.add(&FieldError{File: d.file, Path: p, Line: val.Line, Msg: "a merge key (<<) must refer to a mapping"})
	return nil
}

// structFields maps json tag names to field indexes.
type structFields struct {
	index map[string]int
	names []string
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{index: map[string]int{}}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		f.index[name] = i
		f.names = append(f.names, name)
	}
	fieldCache.Store(t, f)
	return f
}

// describeNode names what a node holds, for "must be X, got Y" messages.
func describeNode(n *yaml.Node) string {
	n = resolve(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return "string " + strconv.Quote(v)
		case "!!int":
			return "integer " + v
		case "!!float":
			return "number " + v
		case "!!bool":
			return "boolean " + v
		}
		return v
	}
	return "an unsupported YAML node"
}

func expectedKind(t reflect.Type) string {
	if t == durationType {
		return "an ISO 8601 duration string"
	}
	switch t.Kind() {
	case reflect.String:
		if allowed, ok := enumValues(t); ok {
			return "one of " + strings.Join(allowed, ", ") + aliasNote(t)
		}
		return "a string"
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Slice:
		return "a list"
	}
	return "a mapping"
}

// aliasNote names an enum's aliases for an error message: " (or constant, the same as none)".
func aliasNote(t reflect.Type) string {
	aliases := enumAliases(t)
	if len(aliases) == 0 {
		return ""
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(aliases)) {
		parts = append(parts, a+", the same as "+aliases[a])
	}
	return " (or " + strings.Join(parts, "; ") + ")"
}

// suggest returns the known name closest to key, if it is close enough to be a typo.
func suggest(key string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(key, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
