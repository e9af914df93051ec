package filter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/internal/dlq"
)

// Source is an operation that reads filters; a key says which sources take it.
type Source uint8

const (
	// List is the query string of GET /ojs/v1/dead-letter (and the flags of
	// redrive dlq list).
	List Source = 1 << iota
	// Bulk is the filter of a bulk retry or purge, and of the task it
	// creates (and the flags of redrive dlq retry --all and purge).
	Bulk
	// Rule is the filter of a replay rule, from the API or a policy file.
	Rule
)

var sourceNames = []struct {
	s    Source
	name string
	what string
}{{List, "list", "the record list"}, {Bulk, "bulk", "bulk operations"}, {Rule, "rule", "replay rules"}}

// Has reports whether s includes every source of o.
func (s Source) Has(o Source) bool { return s&o == o }

// Names lists the sources in s: list, bulk, rule.
func (s Source) Names() []string {
	var out []string
	for _, n := range sourceNames {
		if s.Has(n.s) {
			out = append(out, n.name)
		}
	}
	return out
}

// what says the sources in s in words, for errors.
func (s Source) what() string {
	var out []string
	for _, n := range sourceNames {
		if s.Has(n.s) {
			out = append(out, n.what)
		}
	}
	return strings.Join(out, " and ")
}

// MarshalJSON writes s as its names.
func (s Source) MarshalJSON() ([]byte, error) { return json.Marshal(s.Names()) }

// Kind is what a key's value is. In JSON every kind is a string but Bool (a
// boolean) and Scalar (any JSON scalar); a Repeatable key is a list of them.
// In a query string each value is text, repeated for a Repeatable key.
type Kind string

const (
	// String is text (UTF-8 without NUL, unless the key is Bytes).
	String Kind = "string"
	// Enum is one of the key's Enum values.
	Enum Kind = "enum"
	// Time is an RFC 3339 timestamp.
	Time Kind = "time"
	// Bool is true or false.
	Bool Kind = "bool"
	// Scalar is a JSON scalar (string, number, boolean, null) in JSON, text
	// in a query string.
	Scalar Kind = "scalar"
)

// Key is one filter key: a row of the key table.
type Key struct {
	// Name is the key in query strings, JSON filters and policy files.
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Repeatable keys take several values: repeated in a query string, a
	// list in JSON. Every value must match.
	Repeatable bool `json:"repeatable"`
	// Enum lists the values an Enum key takes.
	Enum []string `json:"enum,omitempty"`
	// MaxBytes bounds each value, in bytes (0: no bound of its own).
	MaxBytes int `json:"max_bytes,omitempty"`
	// MaxDepth bounds how many dot-separated keys a path holds: a path is
	// matched as a document nested that deep, and Postgres refuses a deep
	// enough one ("stack depth limit exceeded").
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxItems bounds how many values a Repeatable key takes.
	MaxItems int `json:"max_items,omitempty"`
	// Sources are the operations that take the key.
	Sources Source `json:"sources"`
	// Label names the key in a form (the console's).
	Label string `json:"label"`
	// Doc says what the key matches, in a line (flag usage, the API).
	Doc string `json:"doc"`
	// Example is a value, as text (a form's placeholder).
	Example string `json:"example,omitempty"`
	// Bytes keys are matched byte for byte: in a query string their value
	// may hold any bytes (NUL and invalid UTF-8 included); every other text
	// must be UTF-8 without NUL.
	Bytes bool `json:"bytes,omitempty"`

	// set reads the key's values (texts; one unless Repeatable) into f, or
	// says what is wrong with them.
	set func(f *Filter, vs []string) string
	// get is the key's canonical JSON value, when it is set in f.
	get func(f *Filter) (any, bool)
}

// table is every filter key, in canonical order. Names (topics, types) are
// far shorter than their bounds in practice: ingest caps them at 255 bytes
// and Kafka topic names at 249 characters.
var table = []Key{
	{Name: "queue", Kind: String, MaxBytes: 1024, Sources: List | Bulk | Rule, Label: "Queue", Doc: "source topic", Example: "orders",
		set: func(f *Filter, vs []string) string { f.Queue = vs[0]; return "" },
		get: func(f *Filter) (any, bool) { return f.Queue, f.Queue != "" }},
	{Name: "type", Kind: String, MaxBytes: 1024, Sources: List | Bulk | Rule, Label: "Type", Doc: "record type",
		set: func(f *Filter, vs []string) string { f.Type = vs[0]; return "" },
		get: func(f *Filter) (any, bool) { return f.Type, f.Type != "" }},
	{Name: "error_type", Kind: String, MaxBytes: 1024, Sources: List | Bulk | Rule, Label: "Error type",
		Doc: "type of the most recent error", Example: "db.timeout",
		set: func(f *Filter, vs []string) string { f.ErrorType = vs[0]; return "" },
		get: func(f *Filter) (any, bool) { return f.ErrorType, f.ErrorType != "" }},
	{Name: "state", Kind: Enum, Enum: stateNames(), MaxBytes: 64, Sources: List | Bulk | Rule, Label: "State",
		Doc: "the record's state",
		set: func(f *Filter, vs []string) string { f.State = dlq.State(vs[0]); return "" },
		get: func(f *Filter) (any, bool) { return f.State, f.State != "" }},
	{Name: "exhaustion", Kind: Enum, Enum: []string{string(dlq.ExhaustionDeadLetter), string(dlq.ExhaustionDiscard), string(dlq.ExhaustionCancelled)}, MaxBytes: 64,
		Sources: List | Bulk | Rule, Label: "Exhaustion", Doc: "how an exhausted record ended",
		set: func(f *Filter, vs []string) string { f.Exhaustion = dlq.Exhaustion(vs[0]); return "" },
		get: func(f *Filter) (any, bool) { return f.Exhaustion, f.Exhaustion != "" }},
	{Name: "since", Kind: Time, MaxBytes: 64, Sources: List | Bulk | Rule, Label: "Stored since (RFC 3339)",
		Doc: "stored at or after (RFC 3339)", Example: "2026-02-13T10:00:00Z",
		set: func(f *Filter, vs []string) string { return setTime(&f.Since, vs[0]) },
		get: func(f *Filter) (any, bool) { return timeText(f.Since), !f.Since.IsZero() }},
	{Name: "until", Kind: Time, MaxBytes: 64, Sources: List | Bulk | Rule, Label: "Stored until (RFC 3339)",
		Doc: "stored before (RFC 3339)", Example: "2026-02-13T12:00:00Z",
		set: func(f *Filter, vs []string) string { return setTime(&f.Until, vs[0]) },
		get: func(f *Filter) (any, bool) { return timeText(f.Until), !f.Until.IsZero() }},
	{Name: "key", Kind: String, MaxBytes: 16 << 10, Bytes: true, Sources: List | Bulk | Rule, Label: "Key",
		Doc: "the record key, exactly",
		set: func(f *Filter, vs []string) string { f.Key = []byte(vs[0]); return "" },
		get: func(f *Filter) (any, bool) { return string(f.Key), f.Key != nil }},
	{Name: "q", Kind: String, MaxBytes: 1024, Bytes: true, Sources: List | Bulk | Rule, Label: "Text in value",
		Doc: "a substring of the value, byte for byte, case-sensitive",
		set: func(f *Filter, vs []string) string { f.Q = vs[0]; return "" },
		get: func(f *Filter) (any, bool) { return f.Q, f.Q != "" }},
	{Name: "path", Kind: String, MaxBytes: 1024, MaxDepth: MaxPathDepth, Sources: List | Bulk | Rule, Label: "JSON path",
		Doc: "dot-separated keys into the JSON payload (with value)", Example: "customer.id",
		set: setPath,
		get: func(f *Filter) (any, bool) { return strings.Join(f.Path, "."), len(f.Path) > 0 }},
	{Name: "value", Kind: Scalar, MaxBytes: 4096, Sources: List | Bulk | Rule, Label: "JSON value at path",
		Doc: "the value at path: a JSON scalar (17 also finds \"17\") or text",
		set: func(f *Filter, vs []string) string { f.Value = vs[0]; return "" },
		get: func(f *Filter) (any, bool) { return f.Value, len(f.Path) > 0 }},
	{Name: "header", Kind: String, Repeatable: true, MaxBytes: 4096, MaxItems: 20, Sources: List | Bulk | Rule,
		Label: "Header (key, key:value or key=value)", Doc: "a header that must be present: key, key:value or key=value",
		Example: "tenant:acme",
		set:     setHeaders,
		get: func(f *Filter) (any, bool) {
			out := make([]string, len(f.Headers))
			for i, h := range f.Headers {
				out[i] = h.String()
			}
			return out, len(f.Headers) > 0
		}},
	{Name: "incident", Kind: String, MaxBytes: 64, Sources: List | Bulk | Rule, Label: "Incident",
		Doc: "an incident id: records whose latest error has this fingerprint", Example: "e8bdf5bbe285de31",
		set: func(f *Filter, vs []string) string {
			if vs[0] != "" && !ValidIncident(vs[0]) {
				return "must be an incident id: 16 lowercase hex characters"
			}
			f.Incident = vs[0]
			return ""
		},
		get: func(f *Filter) (any, bool) { return f.Incident, f.Incident != "" }},
	{Name: "ids", Kind: String, Repeatable: true, MaxItems: 1000, Sources: Bulk, Label: "Record ids",
		Doc: "record ids (UUIDs): the records an operator picked", Example: "01936f0e-7b2a-7000-8000-000000000001",
		set: setIDs,
		get: func(f *Filter) (any, bool) { return f.IDs, len(f.IDs) > 0 }},
	{Name: "unacknowledged", Kind: Bool, Sources: List | Bulk | Rule, Label: "Unacknowledged",
		Doc: "true: only records marked unacknowledged; false: only the others",
		set: func(f *Filter, vs []string) string {
			b := vs[0] == "true"
			f.Unacknowledged = &b
			return ""
		},
		get: func(f *Filter) (any, bool) {
			if f.Unacknowledged == nil {
				return nil, false
			}
			return *f.Unacknowledged, true
		}},
}

// byName indexes table.
var byName = func() map[string]*Key {
	m := make(map[string]*Key, len(table))
	for i := range table {
		m[table[i].Name] = &table[i]
	}
	return m
}()

// Keys returns the key table, in canonical order: every key src takes (with
// src 0, every key).
func Keys(src Source) []Key {
	var out []Key
	for _, k := range table {
		if src == 0 || k.Sources.Has(src) {
			k.Enum = slices.Clone(k.Enum)
			out = append(out, k)
		}
	}
	return out
}

// Names returns the names of the keys src takes, in canonical order.
func Names(src Source) []string {
	var out []string
	for _, k := range Keys(src) {
		out = append(out, k.Name)
	}
	return out
}

func stateNames() []string {
	out := make([]string, len(dlq.States))
	for i, s := range dlq.States {
		out[i] = string(s)
	}
	return out
}

func setTime(t *time.Time, v string) string {
	if v == "" {
		return ""
	}
	p, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return "must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z"
	}
	*t = p.UTC()
	return ""
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func setPath(f *Filter, vs []string) string {
	v := vs[0]
	if v == "" {
		return ""
	}
	segs, problem := ParsePath(v)
	if problem != "" {
		return problem
	}
	f.Path = segs
	return ""
}

// MaxPathDepth bounds how many keys a JSON path holds (the path key's MaxDepth).
const MaxPathDepth = 32

// ParsePath reads a JSON path as the path key takes it: dot-separated
// object keys, outermost first (customer.id). problem says what is wrong
// with it, or is empty. The depth and size bounds are the caller's: the
// key table checks them for filters, masking rules for theirs.
func ParsePath(v string) (segs []string, problem string) {
	segs = strings.Split(v, ".")
	if v == "" || slices.Contains(segs, "") {
		return nil, "must be dot-separated keys like customer.id, without empty segments"
	}
	return segs, ""
}

func setHeaders(f *Filter, vs []string) string {
	for _, v := range vs {
		h := ParseHeader(v)
		if h.Key == "" {
			return "must be key, key:value or key=value, got " + quote(clip(v, 64))
		}
		f.Headers = append(f.Headers, h)
	}
	return ""
}

func setIDs(f *Filter, vs []string) string {
	if len(vs) == 0 {
		return "must list at least one record id (leave it out to select by the other fields)"
	}
	for i, v := range vs {
		id, ok := parseUUID(v)
		if !ok {
			return fmt.Sprintf("[%d]: must be a record id (a UUID), got %s", i, quote(clip(v, 64)))
		}
		f.IDs = append(f.IDs, id)
	}
	return ""
}

// parseUUID reads a UUID in its 36-character form, any case, and returns it
// lowercase.
func parseUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return "", false
			}
		}
	}
	return string(b), true
}

// ValidIncident reports whether id looks like an incident id (a
// fingerprint: lowercase hex), so that anything else is refused before it
// reaches a query.
func ValidIncident(id string) bool {
	return id != "" && len(id) <= 64 && strings.Trim(id, "0123456789abcdef") == ""
}

// ParseHeader reads a header match: "key" (present), "key:value" or
// "key=value" (that value). The key ends at the first ":" or "=", and the
// value is the rest, as it is (it may hold either). A key holding ":", "="
// or "\" writes them "\:", "\=" and "\\"; any other backslash is itself. An
// empty Key means h is no header match.
func ParseHeader(h string) Header {
	var key strings.Builder
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '\\' && i+1 < len(h) && strings.IndexByte(`:=\`, h[i+1]) >= 0:
			key.WriteByte(h[i+1])
			i++
		case c == ':' || c == '=':
			return Header{Key: key.String(), Value: h[i+1:], ValueSet: true}
		default:
			key.WriteByte(c)
		}
	}
	return Header{Key: key.String()}
}

// String writes h as ParseHeader reads it: the key escaped, then ":" and the
// value when it is set.
func (h Header) String() string {
	k := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `=`, `\=`).Replace(h.Key)
	if h.ValueSet {
		return k + ":" + h.Value
	}
	return k
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// scalarText is a JSON scalar as a value's text: a string as it is, any
// other scalar as JSON.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case float64:
		b, err := json.Marshal(x)
		return string(b), err == nil
	case int:
		return strconv.Itoa(x), true
	case bool:
		return strconv.FormatBool(x), true
	case nil:
		return "null", true
	}
	return "", false
}
