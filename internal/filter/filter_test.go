package filter_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// samples holds a query value for every key of the table; a key added
// without one fails TestEveryKeyRoundTrips.
var samples = url.Values{
	"queue":          {"orders"},
	"type":           {"order.created"},
	"error_type":     {"db.timeout"},
	"state":          {"discarded"},
	"exhaustion":     {"dead_letter"},
	"since":          {"2026-02-13T11:00:00+01:00"},
	"until":          {"2026-02-13T12:00:00.5Z"},
	"key":            {"customer-17"},
	"q":              {"card_declined"},
	"path":           {"customer.id"},
	"value":          {"17"},
	"header":         {"tenant=acme", `a\:b:c=d`, `back\slash`},
	"incident":       {"e8bdf5bbe285de31"},
	"ids":            {"01936F0E-7B2A-7000-8000-000000000001", "01936f0e-7b2a-7000-8000-000000000002"},
	"unacknowledged": {"false"},
}

// Every key of the table reads from a query string, survives Canonical and
// reads back, from JSON and from a map of JSON values, to an equal filter.
func TestEveryKeyRoundTrips(t *testing.T) {
	t.Parallel()
	for _, k := range filter.Keys(0) {
		if _, ok := samples[k.Name]; !ok {
			t.Fatalf("no sample for key %s", k.Name)
		}
	}
	f, err := filter.ParseQuery(samples, filter.Bulk)
	if err != nil {
		t.Fatal(err)
	}
	canon := f.Canonical()
	var m map[string]any
	if err := json.Unmarshal(canon, &m); err != nil {
		t.Fatalf("Canonical %s: %v", canon, err)
	}
	if got, want := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}), slices.Sorted(slices.Values(filter.Names(0))); !slices.Equal(got, want) {
		t.Errorf("Canonical has keys %v, want every key %v", got, want)
	}
	want := `{"queue":"orders","type":"order.created","error_type":"db.timeout","state":"discarded","exhaustion":"dead_letter",` +
		`"since":"2026-02-13T10:00:00Z","until":"2026-02-13T12:00:00.5Z","key":"customer-17","q":"card_declined",` +
		`"path":"customer.id","value":"17","header":["tenant:acme","a\\:b:c=d","back\\\\slash"],"incident":"e8bdf5bbe285de31",` +
		`"ids":["01936f0e-7b2a-7000-8000-000000000001","01936f0e-7b2a-7000-8000-000000000002"],"unacknowledged":false}`
	if string(canon) != want {
		t.Errorf("Canonical =\n%s\nwant\n%s", canon, want)
	}
	back, err := filter.ParseJSON(canon, filter.Bulk, "filter")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, f) {
		t.Errorf("read back\n%#v\nwant\n%#v", back, f)
	}
	fromMap, err := filter.ParseMap(m, filter.Bulk, "filter")
	if err != nil || !reflect.DeepEqual(fromMap, f) {
		t.Errorf("from a map: %v\n%#v", err, fromMap)
	}
	if again := back.Canonical(); string(again) != string(canon) {
		t.Errorf("Canonical of the read-back filter = %s", again)
	}
	if f.Headers[1] != (filter.Header{Key: "a:b", Value: "c=d", ValueSet: true}) || f.Headers[2] != (filter.Header{Key: `back\slash`}) {
		t.Errorf("headers = %+v", f.Headers)
	}
	if !f.Since.Equal(time.Date(2026, 2, 13, 10, 0, 0, 0, time.UTC)) || f.Since.Location() != time.UTC {
		t.Errorf("since = %v, want it in UTC", f.Since)
	}
}

// A filter holds what its keys mean; the zero filter writes {}.
func TestParsedFields(t *testing.T) {
	t.Parallel()
	if got := string((&filter.Filter{}).Canonical()); got != "{}" {
		t.Errorf("zero filter = %s", got)
	}
	f, err := filter.ParseJSON([]byte(`{"key":"","value":1e2,"path":"a.b","header":[],"unacknowledged":true,"state":""}`), filter.Rule, "filter")
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := filter.Filter{Key: []byte{}, Path: []string{"a", "b"}, Value: "1e2", Unacknowledged: &yes}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("filter = %#v, want %#v", f, want)
	}
	if got := string(f.Canonical()); got != `{"key":"","path":"a.b","value":"1e2","unacknowledged":true}` {
		t.Errorf("Canonical = %s", got)
	}
	for _, raw := range []string{`null`, `{}`, ` { } `, ``, `{"queue":null,"key":null,"header":null,"ids":null,"unacknowledged":null}`} {
		if f, err := filter.ParseJSON([]byte(raw), filter.Bulk, "filter"); err != nil || !reflect.DeepEqual(f, filter.Filter{}) {
			t.Errorf("%s: %#v, %v", raw, f, err)
		}
	}
	// A JSON scalar value matches as text: 17, "17" and 17.0 differ only as written.
	for raw, text := range map[string]string{`17`: "17", `"17"`: "17", `true`: "true", `null`: "null", `"a b"`: "a b"} {
		f, err := filter.ParseJSON([]byte(`{"path":"n","value":`+raw+`}`), filter.Bulk, "")
		if err != nil || f.Value != text {
			t.Errorf("value %s = %q, %v; want %q", raw, f.Value, err, text)
		}
	}
	// From a policy file numbers come as float64.
	if f, err := filter.ParseMap(map[string]any{"path": "n", "value": 17.0}, filter.Rule, ""); err != nil || f.Value != "17" {
		t.Errorf("value 17.0 from a map = %q, %v", f.Value, err)
	}
}

// Every problem is an error naming the field, with the caller's prefix, and
// saying what was expected.
func TestErrorsNameTheField(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("a.", 19_999) + "a"
	cases := []struct {
		what  string
		parse func() error
		want  []string // "field: message part"
	}{
		{"policy typo and a number", func() error {
			_, err := filter.ParseMap(map[string]any{"error_typ": "X", "state": 7.0}, filter.Rule, "replay_rules[0].filter")
			return err
		}, []string{"replay_rules[0].filter.error_typ: unknown filter key (known: queue, type, error_type,",
			"replay_rules[0].filter.state: must be a string, got 7"}},
		{"ids in a rule", func() error {
			_, err := filter.ParseJSON([]byte(`{"ids":["01936f0e-7b2a-7000-8000-000000000001"]}`), filter.Rule, "filter")
			return err
		}, []string{"filter.ids: not a filter key of replay rules (only of bulk operations)"}},
		{"bad state", q("state=dead"), []string{"state: must be one of retryable, available, completed, discarded"}},
		{"bad exhaustion", q("exhaustion=x"), []string{"exhaustion: must be one of dead_letter, discard, cancelled"}},
		{"twice", q("queue=a&queue=b"), []string{"queue: given more than once"}},
		{"bool", q("unacknowledged=yes"), []string{"unacknowledged: must be true or false"}},
		{"time", q("since=yesterday"), []string{"since: must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z"}},
		{"order", q("since=2026-02-13T10:00:00Z&until=2026-02-12T10:00:00Z"), []string{"until: must be after since"}},
		{"value alone", q("value=1"), []string{"path: required with value"}},
		{"path alone", q("path=a.b"), []string{"value: required with path"}},
		{"empty segment", q("path=a..b&value=1"), []string{"path: must be dot-separated keys like customer.id, without empty segments"}},
		{"deep", q(url.Values{"path": {deep}, "value": {"1"}}.Encode()), []string{"path: must have at most 32 dot-separated keys, got 20000"}},
		{"33 keys", q(url.Values{"path": {strings.Repeat("a.", 32) + "a"}, "value": {"1"}}.Encode()), []string{"path: must have at most 32"}},
		{"long path", q(url.Values{"path": {strings.Repeat(strings.Repeat("k", 40)+".", 31) + "k"}, "value": {"1"}}.Encode()),
			[]string{"path: must be at most 1024 bytes"}},
		{"long queue", q("queue=" + strings.Repeat("o", 5000)), []string{"queue: must be at most 1024 bytes, got 5000"}},
		{"long q", q("q=" + strings.Repeat("q", 1025)), []string{"q: must be at most 1024 bytes, got 1025"}},
		{"long key", q("key=" + strings.Repeat("k", 16<<10+1)), []string{"key: must be at most 16384 bytes"}},
		{"long value", q("path=a&value=" + strings.Repeat("v", 4097)), []string{"value: must be at most 4096 bytes"}},
		{"long header", q("header=" + strings.Repeat("h", 4097)), []string{"header: must be at most 4096 bytes"}},
		{"many headers", q(strings.Repeat("header=h&", 21)), []string{"header: at most 20 values, got 21"}},
		{"bad header", q("header=:v"), []string{`header: must be key, key:value or key=value, got ":v"`}},
		{"NUL", q("queue=a%00b"), []string{"queue: must be valid UTF-8 without NUL characters"}},
		{"not UTF-8", q("header=%FF"), []string{"header: must be valid UTF-8"}},
		{"incident", q("incident=XYZ"), []string{"incident: must be an incident id"}},
		{"body type", j(`{"queue":17}`), []string{"filter.queue: must be a string, got 17"}},
		{"body value object", j(`{"path":"a","value":{"x":1}}`), []string{"filter.value: must be a string, number, boolean or null"}},
		{"body header not a list", j(`{"header":"a:b"}`), []string{`filter.header: must be a list of strings, got "a:b"`}},
		{"body header item", j(`{"header":["a",1]}`), []string{"filter.header: [1]: must be a string, got 1"}},
		{"body bool", j(`{"unacknowledged":"true"}`), []string{`filter.unacknowledged: must be a boolean (true or false), got "true"`}},
		{"body unknown", j(`{"colour":"red"}`), []string{"filter.colour: unknown filter key"}},
		{"body no ids", j(`{"ids":[]}`), []string{"filter.ids: must list at least one record id"}},
		{"body bad id", j(`{"ids":["01936f0e-7b2a-7000-8000-000000000001","nope"]}`), []string{`filter.ids: [1]: must be a record id (a UUID), got "nope"`}},
		{"body many ids", j(`{"ids":[` + strings.Repeat(`"01936f0e-7b2a-7000-8000-000000000001",`, 1000) + `"01936f0e-7b2a-7000-8000-000000000001"]}`),
			[]string{"filter.ids: at most 1000 values, got 1001"}},
		{"body NUL", j(`{"type":"a\u0000"}`), []string{"filter.type: must be valid UTF-8 without NUL characters"}},
		{"not an object", j(`[1]`), []string{"filter: must be a JSON object, got [1]"}},
		{"malformed", j(`{"queue":`), []string{"filter: must be a JSON object: unexpected EOF"}},
	}
	for _, c := range cases {
		err := c.parse()
		var got []string
		var errs filter.Errors
		if !errors.As(err, &errs) {
			t.Errorf("%s: error %v, want filter.Errors", c.what, err)
			continue
		}
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: errors %q, want %q", c.what, got, c.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("%s: error %q, want it to start %q", c.what, got[i], c.want[i])
			}
		}
		var first *filter.Error
		if !errors.As(err, &first) || first != errs[0] {
			t.Errorf("%s: errors.As finds %v, want the first", c.what, first)
		}
	}
}

func q(raw string) func() error {
	return func() error {
		v, err := url.ParseQuery(raw)
		if err != nil {
			panic(err)
		}
		_, err = filter.ParseQuery(v, filter.List)
		return err
	}
}

func j(raw string) func() error {
	return func() error {
		_, err := filter.ParseJSON([]byte(raw), filter.Bulk, "filter")
		return err
	}
}

// A query string may hold any bytes in key and q (they are matched as
// bytes); ParseQuery leaves parameters that are not keys of its source to
// the caller.
func TestQueryKeepsBytesAndLeavesOtherParameters(t *testing.T) {
	t.Parallel()
	v, _ := url.ParseQuery("key=%FF%00&q=%FE&limit=5&ids=01936f0e-7b2a-7000-8000-000000000001")
	f, err := filter.ParseQuery(v, filter.List)
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Key) != "\xff\x00" || f.Q != "\xfe" || f.IDs != nil {
		t.Errorf("filter = %#v", f)
	}
}

// A header match written by Header.String reads back as itself, whatever
// its key holds.
func TestHeaderStringRoundTrips(t *testing.T) {
	t.Parallel()
	for _, h := range []filter.Header{
		{Key: "tenant"}, {Key: "tenant", Value: "acme:eu=1", ValueSet: true}, {Key: "a:b=c", Value: "", ValueSet: true},
		{Key: `\`}, {Key: `x\:`}, {Key: `\\=`, Value: `\`, ValueSet: true},
	} {
		if got := filter.ParseHeader(h.String()); got != h {
			t.Errorf("%+v written %q reads %+v", h, h.String(), got)
		}
	}
}

// The table is the one list of keys: sources, kinds and bounds as the API
// documents them.
func TestKeyTable(t *testing.T) {
	t.Parallel()
	if got := filter.Names(filter.Rule); slices.Contains(got, "ids") {
		t.Errorf("rule keys %v include ids", got)
	}
	if got := filter.Names(filter.List); slices.Contains(got, "ids") || len(got) != len(filter.Names(0))-1 {
		t.Errorf("list keys = %v", got)
	}
	seen := map[string]bool{}
	for _, k := range filter.Keys(0) {
		if seen[k.Name] || k.Label == "" || k.Doc == "" || k.Sources == 0 {
			t.Errorf("key %+v: duplicate, or without a label, doc or source", k)
		}
		seen[k.Name] = true
		if k.Kind == filter.Enum && len(k.Enum) == 0 {
			t.Errorf("enum %s lists no values", k.Name)
		}
	}
	var states []string
	for _, s := range dlq.States {
		states = append(states, string(s))
	}
	for _, k := range filter.Keys(0) {
		if k.Name == "state" && !slices.Equal(k.Enum, states) {
			t.Errorf("state enum %v, want dlq.States %v", k.Enum, states)
		}
	}
	b, err := json.Marshal(filter.Keys(filter.Rule)[0])
	if err != nil || !strings.Contains(string(b), `"sources":["list","bulk","rule"]`) {
		t.Errorf("key as JSON = %s, %v", b, err)
	}
}
