package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
)

// FilterJSON is a record filter as the API takes it: the query parameters of
// GET /dead-letter, or the "filter" object of the bulk operations. Every
// field is optional; set fields are ANDed.
type FilterJSON struct {
	Queue      string `json:"queue,omitempty"`
	Type       string `json:"type,omitempty"`
	ErrorType  string `json:"error_type,omitempty"`
	State      string `json:"state,omitempty"`
	Exhaustion string `json:"exhaustion,omitempty"`
	Since      string `json:"since,omitempty"`
	Until      string `json:"until,omitempty"`
	// Key is the record key (UTF-8).
	Key *string `json:"key,omitempty"`
	// Q is a substring of the value (case-sensitive).
	Q string `json:"q,omitempty"`
	// Path is a dot-separated key path into the JSON payload; Value the value
	// there (a JSON scalar, or text compared as a string).
	Path  string          `json:"path,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	// Header lists header matches: "key" (present), "key:value" or
	// "key=value" (see parseHeaderMatch).
	Header []string `json:"header,omitempty"`
	// Incident is an incident id (fingerprint): records whose latest error has it.
	Incident string `json:"incident,omitempty"`
	// IDs are record ids: the records an operator picked (bulk operations
	// only; at most maxFilterIDs).
	IDs []string `json:"ids,omitempty"`
	// Unacknowledged keeps only records marked unacknowledged (true) or
	// only the others (false).
	Unacknowledged *bool `json:"unacknowledged,omitempty"`
}

// maxFilterIDs bounds a filter's ids: a selection on a page (the list shows
// at most 1,000 records at once), not a way to name a whole DLQ.
const maxFilterIDs = 1000

// filterParams are the query parameters that make up a filter.
var filterParams = []string{"queue", "type", "error_type", "state", "exhaustion", "since", "until", "key", "q", "path", "value", "header", "incident",
	"unacknowledged"}

// filterFromQuery reads a filter from query parameters.
func filterFromQuery(q url.Values) (*FilterJSON, error) {
	f := &FilterJSON{Queue: q.Get("queue"), Type: q.Get("type"), ErrorType: q.Get("error_type"), State: q.Get("state"),
		Exhaustion: q.Get("exhaustion"), Since: q.Get("since"), Until: q.Get("until"), Q: q.Get("q"), Path: q.Get("path"),
		Header: q["header"], Incident: q.Get("incident")}
	for _, name := range filterParams {
		if name != "header" && len(q[name]) > 1 {
			return nil, invalidParam(name, "given more than once")
		}
	}
	if q.Has("key") {
		k := q.Get("key")
		f.Key = &k
	}
	if q.Has("unacknowledged") {
		switch q.Get("unacknowledged") {
		case "true":
			f.Unacknowledged = ptr(true)
		case "false":
			f.Unacknowledged = ptr(false)
		default:
			return nil, invalidParam("unacknowledged", "must be true or false")
		}
	}
	if q.Has("value") {
		v, _ := json.Marshal(q.Get("value"))
		// A query value that is a JSON scalar (17, true, null) matches as
		// such or as a string; store.PathMatch handles both.
		f.Value = v
	}
	return f, nil
}

// toStore validates the filter and converts it; errors name the field, with
// prefix (e.g. "filter.") for body filters.
func (f *FilterJSON) toStore(prefix string) (store.Filter, error) {
	out := store.Filter{Queue: f.Queue, Type: f.Type, ErrorType: f.ErrorType, Q: f.Q, Incident: f.Incident, Unacknowledged: f.Unacknowledged}
	for name, v := range map[string]string{"queue": f.Queue, "type": f.Type, "error_type": f.ErrorType, "path": f.Path,
		"incident": f.Incident, "state": f.State, "exhaustion": f.Exhaustion, "since": f.Since, "until": f.Until} {
		if !validText(v) {
			return out, invalidParam(prefix+name, "must be valid UTF-8 without NUL characters")
		}
	}
	for _, h := range f.Header {
		if !validText(h) {
			return out, invalidParam(prefix+"header", "must be valid UTF-8 without NUL characters")
		}
	}
	// Bounds, so that no filter costs more than it is worth (a deep path
	// overflows Postgres's stack): the one rule policy files use too.
	fields := []struct{ name, value string }{{"queue", f.Queue}, {"type", f.Type}, {"error_type", f.ErrorType},
		{"state", f.State}, {"exhaustion", f.Exhaustion}, {"since", f.Since}, {"until", f.Until}, {"q", f.Q},
		{"path", f.Path}, {"value", string(f.Value)}, {"incident", f.Incident}}
	if f.Key != nil {
		fields = append(fields, struct{ name, value string }{"key", *f.Key})
	}
	for _, h := range f.Header {
		fields = append(fields, struct{ name, value string }{"header", h})
	}
	for _, fv := range fields {
		if msg := dlq.FilterFieldProblem(fv.name, fv.value); msg != "" {
			return out, invalidParam(prefix+fv.name, msg)
		}
	}
	if len(f.Header) > 20 {
		return out, invalidParam(prefix+"header", "at most 20 header matches")
	}
	if f.IDs != nil && len(f.IDs) == 0 {
		return out, invalidParam(prefix+"ids", "must list at least one record id (leave it out to select by the other fields)")
	}
	if len(f.IDs) > maxFilterIDs {
		return out, invalidParam(prefix+"ids", fmt.Sprintf("at most %d record ids, got %d", maxFilterIDs, len(f.IDs)))
	}
	for i, id := range f.IDs {
		u, err := uuid.Parse(id)
		if err != nil || len(id) != 36 {
			return out, invalidParam(prefix+"ids", fmt.Sprintf("[%d]: must be a record id (a UUID), got %s", i, jsonString(clip(id, 64))))
		}
		out.IDs = append(out.IDs, u.String())
	}
	if f.Incident != "" && !validIncidentID(f.Incident) {
		return out, invalidParam(prefix+"incident", "must be an incident id: 16 lowercase hex characters")
	}
	if f.State != "" {
		if !dlq.State(f.State).Valid() {
			return out, invalidParam(prefix+"state", "must be one of retryable, available, completed, discarded")
		}
		out.State = dlq.State(f.State)
	}
	if f.Exhaustion != "" {
		if !dlq.Exhaustion(f.Exhaustion).Valid() {
			return out, invalidParam(prefix+"exhaustion", "must be dead_letter or discard")
		}
		out.Exhaustion = dlq.Exhaustion(f.Exhaustion)
	}
	var err error
	if out.Since, err = parseTime(f.Since, prefix+"since"); err != nil {
		return out, err
	}
	if out.Until, err = parseTime(f.Until, prefix+"until"); err != nil {
		return out, err
	}
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Until.After(out.Since) {
		return out, invalidParam(prefix+"until", "must be after since")
	}
	if f.Key != nil {
		out.Key = []byte(*f.Key)
	}
	if (f.Path == "") != (len(f.Value) == 0) {
		if f.Path == "" {
			return out, invalidParam(prefix+"path", "required with value")
		}
		return out, invalidParam(prefix+"value", "required with path")
	}
	if f.Path != "" {
		segs := strings.Split(f.Path, ".")
		var v any
		if err := json.Unmarshal(f.Value, &v); err != nil {
			return out, invalidParam(prefix+"value", "must be a JSON scalar")
		}
		var text string
		switch x := v.(type) {
		case string:
			if !validText(x) {
				return out, invalidParam(prefix+"value", "must be valid UTF-8 without NUL characters")
			}
			text = x
		case float64, bool, nil:
			text = string(f.Value)
		default:
			return out, invalidParam(prefix+"value", "must be a string, number, boolean or null")
		}
		out.Paths = []store.PathMatch{{Path: segs, Value: text}}
	}
	for _, h := range f.Header {
		m := parseHeaderMatch(h)
		if m.Key == "" {
			return out, invalidParam(prefix+"header", "must be key, key:value or key=value, got "+jsonString(clip(h, 64)))
		}
		out.Headers = append(out.Headers, m)
	}
	return out, nil
}

// parseHeaderMatch reads a header match: "key" (present), "key:value" or
// "key=value" (that value). The key ends at the first ":" or "=", and the
// value is the rest, as it is (it may hold either). A key holding ":", "="
// or "\" writes them "\:", "\=" and "\\"; any other backslash is itself.
func parseHeaderMatch(h string) store.HeaderMatch {
	var key strings.Builder
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '\\' && i+1 < len(h) && strings.IndexByte(`:=\`, h[i+1]) >= 0:
			key.WriteByte(h[i+1])
			i++
		case c == ':' || c == '=':
			return store.HeaderMatch{Key: key.String(), Value: h[i+1:], ValueSet: true}
		default:
			key.WriteByte(c)
		}
	}
	return store.HeaderMatch{Key: key.String()}
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// DecodeFilter turns a stored task filter back into a store filter; the task
// runner uses it.
func DecodeFilter(raw json.RawMessage) (store.Filter, error) {
	var f FilterJSON
	if err := decodeStrict(raw, &f); err != nil {
		return store.Filter{}, err
	}
	return f.toStore("filter.")
}

// parseTime reads an RFC 3339 timestamp; empty is the zero time.
func parseTime(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidParam(name, "must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z")
	}
	return t, nil
}

func ptr[T any](v T) *T { return &v }
