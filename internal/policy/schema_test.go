package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// These tests keep api/policy.schema.json honest in two ways: every shipped and
// good policy file validates against it (with the small draft 2020-12 validator
// below, which refuses schemas using keywords it does not implement), and its
// properties and enums are exactly the fields the Go decoder accepts.

const schemaPath = "../../api/policy.schema.json"

func loadSchema(tb testing.TB) map[string]any {
	tb.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		tb.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		tb.Fatalf("%s: %v", schemaPath, err)
	}
	return s
}

func schemaDef(s map[string]any, name string) map[string]any {
	return s["$defs"].(map[string]any)[name].(map[string]any)
}

func durationPattern(tb testing.TB) *regexp.Regexp {
	tb.Helper()
	return regexp.MustCompile(schemaDef(loadSchema(tb), "duration")["pattern"].(string))
}

// schemaValidator implements the subset of JSON Schema draft 2020-12 that the
// policy schema uses.
type schemaValidator struct {
	root map[string]any
}

// annotation keywords carry no constraint.
var schemaAnnotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "$comment": true,
	"title": true, "description": true, "default": true, "examples": true}

var schemaKeywords = map[string]bool{"$ref": true, "type": true, "properties": true, "additionalProperties": true,
	"propertyNames": true, "required": true, "enum": true, "not": true, "pattern": true, "minLength": true,
	"maxLength": true, "minimum": true, "maximum": true, "items": true}

// checkKeywords fails on any keyword the validator would silently ignore.
func checkKeywords(t *testing.T, s any, at string) {
	t.Helper()
	m, ok := s.(map[string]any)
	if !ok {
		if _, isBool := s.(bool); !isBool {
			t.Errorf("%s: a schema must be an object or a boolean", at)
		}
		return
	}
	for k, v := range m {
		switch {
		case k == "$defs" || k == "properties":
			for name, sub := range v.(map[string]any) {
				checkKeywords(t, sub, at+"/"+k+"/"+name)
			}
		case k == "additionalProperties" || k == "propertyNames" || k == "items" || k == "not":
			checkKeywords(t, v, at+"/"+k)
		case schemaAnnotations[k] || schemaKeywords[k]:
		default:
			t.Errorf("%s: keyword %q is not implemented by the test validator", at, k)
		}
	}
}

func (v *schemaValidator) validate(schema any, inst any, at string) []string {
	if b, ok := schema.(bool); ok {
		if !b {
			return []string{at + ": not allowed"}
		}
		return nil
	}
	s := schema.(map[string]any)
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	if ref, ok := s["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		if !found {
			return []string{at + ": unsupported $ref " + ref}
		}
		errs = append(errs, v.validate(schemaDef(v.root, name), inst, at)...)
	}
	if ty, ok := s["type"]; ok {
		var types []string
		switch x := ty.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, e := range x {
				types = append(types, e.(string))
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return jsonTypeIs(inst, t) }) {
			fail("want %s, got %T", strings.Join(types, " or "), inst)
			return errs
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return reflect.DeepEqual(e, inst) }) {
		fail("%v is not one of %v", inst, enum)
	}
	if not, ok := s["not"]; ok && len(v.validate(not, inst, at)) == 0 {
		fail("%v matches a schema it must not", inst)
	}
	if str, ok := inst.(string); ok {
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			fail("%q does not match %s", str, p)
		}
		if n, ok := s["minLength"].(float64); ok && utf8.RuneCountInString(str) < int(n) {
			fail("%q is shorter than %v", str, n)
		}
		if n, ok := s["maxLength"].(float64); ok && utf8.RuneCountInString(str) > int(n) {
			fail("%q is longer than %v", str, n)
		}
	}
	if num, ok := inst.(float64); ok {
		if n, ok := s["minimum"].(float64); ok && num < n {
			fail("%v is less than %v", num, n)
		}
		if n, ok := s["maximum"].(float64); ok && num > n {
			fail("%v is more than %v", num, n)
		}
	}
	if arr, ok := inst.([]any); ok {
		if items, ok := s["items"]; ok {
			for i, e := range arr {
				errs = append(errs, v.validate(items, e, fmt.Sprintf("%s/%d", at, i))...)
			}
		}
	}
	if obj, ok := inst.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, present := obj[r.(string)]; !present {
					fail("missing required property %q", r)
				}
			}
		}
		for k, val := range obj {
			if pn, ok := s["propertyNames"]; ok {
				errs = append(errs, v.validate(pn, k, at+"/"+k+" (name)")...)
			}
			if ps, ok := props[k]; ok {
				errs = append(errs, v.validate(ps, val, at+"/"+k)...)
			} else if ap, ok := s["additionalProperties"]; ok {
				errs = append(errs, v.validate(ap, val, at+"/"+k)...)
			}
		}
	}
	return errs
}

func jsonTypeIs(inst any, t string) bool {
	switch x := inst.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case float64:
		return t == "number" || (t == "integer" && x == math.Trunc(x) && !math.IsInf(x, 0))
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// yamlInstance reads a YAML file into the JSON data model (numbers as float64),
// resolving anchors and merge keys.
func yamlInstance(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out any
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSchemaUsesOnlyImplementedKeywords(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
	checkKeywords(t, s, "#")
}

// Every shipped policy file and every good test file validates against the schema.
func TestSchemaValidatesPolicyFiles(t *testing.T) {
	t.Parallel()
	v := &schemaValidator{root: loadSchema(t)}
	shipped, _ := filepath.Glob("../../policies/*.y*ml")
	examples, _ := filepath.Glob("../../policies/examples/*.y*ml")
	shipped = append(shipped, examples...)
	good, _ := filepath.Glob("testdata/*.good.y*ml")
	split, _ := filepath.Glob("testdata/dirs/split/*.y*ml")
	files := slices.Concat(shipped, good, split)
	if len(shipped) < 2 {
		t.Fatalf("shipped policies: %q", shipped)
	}
	for _, f := range files {
		inst := yamlInstance(t, f)
		if inst == nil {
			continue // an empty file declares nothing
		}
		if errs := v.validate(v.root, inst, "#"); len(errs) > 0 {
			t.Errorf("%s does not validate:\n  %s", f, strings.Join(errs, "\n  "))
		}
	}
}

// The schema rejects what the decoder rejects for shape reasons: unknown fields,
// wrong types, bad durations and enum values, values out of range.
func TestSchemaRejectsBadFiles(t *testing.T) {
	t.Parallel()
	v := &schemaValidator{root: loadSchema(t)}
	// Bad files whose problem needs the merged result, or lies in YAML itself, or
	// is a value rule the schema does not express, are exempt.
	exempt := map[string]bool{
		"merged_max_below_initial": true, "merged_type_max_below_initial": true, "merged_glob_exact": true,
		"max_below_initial": true, "zero_initial": true, "dl_age": true, "retention_zero": true,
		"rule_dup_name": true, "rule_incomplete": true, "rule_override_unknown": true,
		"duplicate_key": true, "syntax": true, "multi_doc": true, "key_not_string": true, "bad_merge_key": true, "alias_bomb": true,
		"inf_coefficient": true, "filter_nan": true, "filter_keys": true, // YAML-only values: .inf, .nan, non-string keys
		// Limits a deployment configures (REDRIVE_RETRY_*), and "0 or at
		// least 0.001", which needs anyOf.
		"attempts_ceiling": true, "interval_floor": true, "rate_tiny": true,
	}
	for name := range badFiles {
		if exempt[name] {
			continue
		}
		inst := yamlInstance(t, "testdata/"+name+".bad.yaml")
		if errs := v.validate(v.root, inst, "#"); len(errs) == 0 {
			t.Errorf("%s.bad.yaml validates against the schema, but the decoder rejects it", name)
		}
	}
}

// Effective policies written as JSON validate against the schema's definitions.
func TestSchemaValidatesMarshalledPolicies(t *testing.T) {
	t.Parallel()
	v := &schemaValidator{root: loadSchema(t)}
	set, err := LoadFiles("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, val := range map[string]any{
		"retry": Default(), "policy": set.Resolve("orders", "order.refund"), "topic": set.Resolve("x", ""),
	} {
		b, _ := json.Marshal(val)
		var inst any
		_ = json.Unmarshal(b, &inst)
		if errs := v.validate(schemaDef(v.root, name), inst, "#/$defs/"+name); len(errs) > 0 {
			t.Errorf("%s JSON does not validate:\n  %s\n%s", name, strings.Join(errs, "\n  "), b)
		}
	}
}

// The schema's properties are exactly the json tags the decoder accepts, and its
// enums are exactly the decoder's.
func TestSchemaMatchesDecoder(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	props := func(schema map[string]any) []string {
		var names []string
		for k := range schema["properties"].(map[string]any) {
			names = append(names, k)
		}
		sort.Strings(names)
		return names
	}
	tags := func(typ reflect.Type, except ...string) []string {
		var names []string
		for _, n := range fieldsOf(typ).names {
			if !slices.Contains(except, n) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return names
	}
	deadLetter := schemaDef(s, "deadLetter")
	tests := []struct {
		name   string
		schema map[string]any
		fields []string
	}{
		{"file", s, tags(reflect.TypeFor[fileSpec]())},
		{"retry", schemaDef(s, "retry"), tags(reflect.TypeFor[RetrySpec]())},
		{"policy", schemaDef(s, "policy"), tags(reflect.TypeFor[TopicSpec](), "types")},
		{"topic", schemaDef(s, "topic"), tags(reflect.TypeFor[TopicSpec]())},
		{"deadLetter", deadLetter, tags(reflect.TypeFor[DeadLetterSpec]())},
		{"deadLetter.retention", deadLetter["properties"].(map[string]any)["retention"].(map[string]any), tags(reflect.TypeFor[DeadLetterRetentionSpec]())},
		{"retention", schemaDef(s, "retention"), tags(reflect.TypeFor[RetentionSpec]())},
		{"redelivery", schemaDef(s, "redelivery"), tags(reflect.TypeFor[RedeliverySpec]())},
		{"replayRule", schemaDef(s, "replayRule"), tags(reflect.TypeFor[ReplayRuleSpec]())},
	}
	for _, tt := range tests {
		if got := props(tt.schema); !slices.Equal(got, tt.fields) {
			t.Errorf("%s: schema properties %q, decoder fields %q", tt.name, got, tt.fields)
		}
		if tt.schema["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties must be false, as the decoder rejects unknown fields", tt.name)
		}
	}
	enum := func(schema map[string]any, prop string) []string {
		var out []string
		for _, e := range schema["properties"].(map[string]any)[prop].(map[string]any)["enum"].([]any) {
			out = append(out, e.(string))
		}
		sort.Strings(out)
		return out
	}
	// An enum's aliases are values the decoder accepts too.
	goEnum := func(typ reflect.Type) []string {
		vals, _ := enumValues(typ)
		for a := range enumAliases(typ) {
			vals = append(vals, a)
		}
		return slices.Sorted(slices.Values(vals))
	}
	for _, def := range []string{"policy", "topic"} {
		if got, want := enum(schemaDef(s, def), "pruning_policy"), goEnum(reflect.TypeFor[PruningPolicy]()); !slices.Equal(got, want) {
			t.Errorf("%s.pruning_policy enum %q, decoder %q", def, got, want)
		}
		if got, want := enum(schemaDef(s, def), "state"), goEnum(reflect.TypeFor[TopicState]()); !slices.Equal(got, want) {
			t.Errorf("%s.state enum %q, decoder %q", def, got, want)
		}
	}
	if got, want := enum(map[string]any{"properties": map[string]any{"completion": schemaDef(s, "completion")}}, "completion"),
		goEnum(reflect.TypeFor[Completion]()); !slices.Equal(got, want) {
		t.Errorf("completion enum %q, decoder %q", got, want)
	}
	if got, want := enum(schemaDef(s, "retry"), "on_exhaustion"), goEnum(reflect.TypeFor[dlq.Exhaustion]()); !slices.Equal(got, want) {
		t.Errorf("on_exhaustion enum %q, decoder %q", got, want)
	}
	if got, want := enum(schemaDef(s, "retry"), "backoff_strategy"), goEnum(reflect.TypeFor[Strategy]()); !slices.Equal(got, want) {
		t.Errorf("backoff_strategy enum %q, decoder %q", got, want)
	}
	// The schema's defaults are the system defaults.
	retryProps := schemaDef(s, "retry")["properties"].(map[string]any)
	def, _ := json.Marshal(Default())
	var defMap map[string]any
	_ = json.Unmarshal(def, &defMap)
	for k, want := range defMap {
		if got := retryProps[k].(map[string]any)["default"]; !reflect.DeepEqual(got, want) {
			t.Errorf("retry.%s: schema default %v, Default() %v", k, got, want)
		}
	}
}

// The schema's replay filter lists exactly the filter keys replay rules take,
// each of its kind, with the table's enums and byte bounds.
func TestSchemaFilterIsTheKeyTable(t *testing.T) {
	t.Parallel()
	def := schemaDef(loadSchema(t), "replayFilter")
	if def["additionalProperties"] != false {
		t.Error("replayFilter: additionalProperties must be false, as the filter package refuses unknown keys")
	}
	props := def["properties"].(map[string]any)
	if got, want := slices.Sorted(maps.Keys(props)), slices.Sorted(slices.Values(filter.Names(filter.Rule))); !slices.Equal(got, want) {
		t.Errorf("replayFilter properties %q, rule keys %q", got, want)
	}
	for _, k := range filter.Keys(filter.Rule) {
		p, ok := props[k.Name].(map[string]any)
		if !ok {
			continue
		}
		if k.Repeatable {
			if p["type"] != "array" {
				t.Errorf("%s: type %v, want array", k.Name, p["type"])
				continue
			}
			p = p["items"].(map[string]any)
		}
		want := map[filter.Kind]any{filter.String: "string", filter.Enum: "string", filter.Time: "string", filter.Bool: "boolean",
			filter.Scalar: []any{"string", "number", "boolean", "null"}}[k.Kind]
		if !reflect.DeepEqual(p["type"], want) {
			t.Errorf("%s: type %v, want %v", k.Name, p["type"], want)
		}
		if k.Kind == filter.Enum {
			var got []string
			for _, e := range p["enum"].([]any) {
				got = append(got, e.(string))
			}
			if !slices.Equal(got, k.Enum) {
				t.Errorf("%s: enum %q, want %q", k.Name, got, k.Enum)
			}
		} else if n, _ := p["maxLength"].(float64); k.MaxBytes > 0 && int(n) != k.MaxBytes {
			t.Errorf("%s: maxLength %v, want %d", k.Name, p["maxLength"], k.MaxBytes)
		}
	}
}

// testdata/full.good.yaml sets every field of every spec struct, which proves the
// decoder reads each field the schema lists (a field it skipped would stay nil).
func TestFullFileSetsEveryField(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _, errs := parseFile("full.good.yaml", b)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			if v.IsNil() {
				t.Errorf("%s is not set by full.good.yaml", path)
				return
			}
		}
		switch v.Kind() {
		case reflect.Pointer:
			walk(v.Elem(), path)
		case reflect.Struct:
			if v.Type() == durationType {
				return
			}
			for name, i := range fieldsOf(v.Type()).index {
				// types may only appear in a topics entry.
				if name == "types" && (path == "file._default" || strings.Contains(path, ".types[")) {
					continue
				}
				// completion, ack_timeout and the ingest-side rules are per
				// topic, never per type; strict_queues is _default only.
				perTopic := map[string]bool{"completion": true, "ack_timeout": true, "max_size": true, "max_size_bytes": true,
					"overflow_policy": true, "allowed_job_types": true, "filters": true, "strict_queues": true, "masking": true,
					"backpressure": true}
				if perTopic[name] && strings.Contains(path, ".types[") || name == "strict_queues" && strings.Contains(path, "topics[") {
					continue
				}
				// so is redelivery.mode.
				if name == "mode" && strings.Contains(path, ".types[") {
					continue
				}
				walk(v.Field(i), path+"."+name)
			}
		case reflect.Map:
			if v.Type().Elem().Kind() == reflect.Interface {
				return
			}
			iter := v.MapRange()
			for iter.Next() {
				walk(iter.Value(), path+"["+iter.Key().String()+"]")
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(reflect.ValueOf(f), "file")
}
