package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/internal/filter"
)

// The OpenAPI document lists exactly the key table's keys, each of its kind:
// the list's query parameters (List), the bulk filter (Bulk, what tasks
// store) and replay rules' filter (Rule).
func TestOpenAPIFilterIsTheKeyTable(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	// The list's parameters: the filter's, in the table's order, then the
	// listing's own.
	var params []string
	kinds := map[string]*openapi3.Schema{}
	for _, p := range doc.Paths.Find("/ojs/v1/dead-letter").Get.Parameters {
		if slices.Contains([]string{"limit", "cursor", "sort", "offset"}, p.Value.Name) {
			continue
		}
		params = append(params, p.Value.Name)
		kinds[p.Value.Name] = p.Value.Schema.Value
	}
	if want := filter.Names(filter.List); !slices.Equal(params, want) {
		t.Errorf("GET /ojs/v1/dead-letter filter parameters\n%q\nwant the list keys\n%q", params, want)
	}
	for _, k := range filter.Keys(filter.List) {
		s := kinds[k.Name]
		if s == nil {
			continue
		}
		if k.Repeatable {
			if !s.Type.Is("array") {
				t.Errorf("parameter %s: type %v, want array (repeatable)", k.Name, s.Type)
				continue
			}
			s = s.Items.Value
		}
		if !s.Type.Is("string") {
			t.Errorf("parameter %s: type %v, want string (a query string holds text)", k.Name, s.Type)
		}
		want := k.Enum
		if k.Kind == filter.Bool {
			want = []string{"true", "false"}
		}
		if got := enum(s); !slices.Equal(got, want) {
			t.Errorf("parameter %s: enum %q, want %q", k.Name, got, want)
		}
	}

	for _, c := range []struct {
		schema string
		src    filter.Source
	}{{"Filter", filter.Bulk}, {"RuleFilter", filter.Rule}} {
		s := doc.Components.Schemas[c.schema].Value
		if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
			t.Errorf("%s: additionalProperties must be false: unknown keys are refused", c.schema)
		}
		var names []string
		for name := range s.Properties {
			names = append(names, name)
		}
		if got, want := slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(filter.Names(c.src))); !slices.Equal(got, want) {
			t.Errorf("%s properties\n%q\nwant the %s keys\n%q", c.schema, got, c.src.Names(), want)
		}
		for _, k := range filter.Keys(c.src) {
			p := s.Properties[k.Name]
			if p == nil {
				continue
			}
			if err := schemaIsKey(p.Value, k); err != nil {
				t.Errorf("%s.%s: %v", c.schema, k.Name, err)
			}
		}
	}
}

// schemaIsKey says how s, a JSON filter's property, differs from key k.
func schemaIsKey(s *openapi3.Schema, k filter.Key) error {
	if k.Repeatable {
		if !s.Type.Is("array") {
			return fmt.Errorf("type %v, want array (repeatable)", s.Type)
		}
		if s.MaxItems == nil || int(*s.MaxItems) != k.MaxItems {
			return fmt.Errorf("maxItems %v, want %d", s.MaxItems, k.MaxItems)
		}
		s = s.Items.Value
	}
	want := map[filter.Kind][]string{filter.String: {"string"}, filter.Enum: {"string"}, filter.Time: {"string"},
		filter.Bool: {"boolean"}, filter.Scalar: {"string", "number", "boolean", "null"}}[k.Kind]
	if got := s.Type.Slice(); !slices.Equal(got, want) {
		return fmt.Errorf("type %v, want %v", got, want)
	}
	if got := enum(s); !slices.Equal(got, k.Enum) {
		return fmt.Errorf("enum %q, want %q", got, k.Enum)
	}
	if k.Kind == filter.Time && s.Format != "date-time" {
		return fmt.Errorf("format %q, want date-time", s.Format)
	}
	if k.Kind != filter.Enum && k.MaxBytes > 0 && (s.MaxLength == nil || int(*s.MaxLength) != k.MaxBytes) {
		return fmt.Errorf("maxLength %v, want %d", s.MaxLength, k.MaxBytes)
	}
	return nil
}

func enum(s *openapi3.Schema) []string {
	var out []string
	for _, e := range s.Enum {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// GET /ojs/v1/dead-letter/filter-keys serves the key table, from which the
// console builds its filter form.
func TestFilterKeysServesTheTable(t *testing.T) {
	b := setup(t)
	var got struct {
		Items []map[string]any `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter/filter-keys", &got), http.StatusOK)
	var want struct {
		Items []map[string]any `json:"items"`
	}
	raw, _ := json.Marshal(map[string]any{"items": filter.Keys(0)})
	_ = json.Unmarshal(raw, &want)
	if len(got.Items) != len(filter.Keys(0)) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("filter keys =\n%v\nwant\n%v", got, want)
	}
	for _, it := range got.Items {
		if it["name"] == "header" && (it["repeatable"] != true || it["max_items"] != 20.0 || it["label"] == "") {
			t.Errorf("header = %v", it)
		}
	}
	wantError(t, "a parameter", b.get(t, "/ojs/v1/dead-letter/filter-keys?queue=x", nil), http.StatusBadRequest, "invalid_request", "queue")
}
