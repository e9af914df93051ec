package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/mask"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
)

// Data masking (docs/security.md, "Data masking"): every answer that shows
// a record's content shows it masked per its queue's masking rules (policy
// files), unless the caller may unmask that queue. The rules are applied
// to the record before it is rendered (toRecordJSON, toPreviewJSON, raw),
// so that no field is rendered from the unmasked record; and a filter
// that searches masked content matches none of the queue's records
// (searchScope).

// masker is what one caller sees of each queue's records: nil when the
// caller sees everything (it may unmask every queue, or no policy file
// masks anything).
type masker struct {
	p     auth.Principal
	files *policy.Set
	rules map[string]*mask.Rules
}

// maskerOf is the caller's masker.
func (s *Server) maskerOf(c echo.Context) *masker {
	files := s.queues.Files()
	if !files.Masks() {
		return nil
	}
	p := principal(c)
	if p.AllQueues(auth.ActionUnmask) {
		return nil
	}
	return &masker{p: p, files: files, rules: map[string]*mask.Rules{}}
}

// of is the rules the caller sees queue's records through; nil when it
// sees them whole.
func (m *masker) of(queue string) *mask.Rules {
	if m == nil {
		return nil
	}
	r, ok := m.rules[queue]
	if !ok {
		if !m.p.Allowed(auth.ActionUnmask, queue) {
			r = m.files.Masking(queue)
		}
		m.rules[queue] = r
	}
	return r
}

// record is r as the caller sees it (r itself when nothing is masked).
func (m *masker) record(r *dlq.Record) *dlq.Record { return m.of(r.Queue).Record(r) }

// masks reports whether the caller sees queue's records masked.
func (m *masker) masks(queue string) bool { return m.of(queue).Active() }

// preview is a listed record as the caller sees it: its key and value are
// prefixes (records.RecordPreview), masked as prefixes when they were cut.
func (m *masker) preview(p *records.RecordPreview) *records.RecordPreview {
	rules := m.of(p.Record.Queue)
	if !rules.Active() {
		return p
	}
	out := *p
	r := &p.Record
	mr := rules.Record(r)
	if r.Value != nil && len(r.Value) < p.ValueSize {
		mr.Value = rules.ValuePrefix(r.Value)
		out.ValueSize = max(p.ValueSize, len(mr.Value)+1) // still cut
	} else if r.Value != nil {
		out.ValueSize = len(mr.Value)
	}
	if p.ErrorCut && len(mr.Errors) > 0 {
		// The latest error's message was cut: a match may have been too.
		last := &mr.Errors[len(mr.Errors)-1]
		last.Message = string(rules.TextPrefix([]byte(r.Errors[len(r.Errors)-1].Message)))
	}
	if r.Key != nil && len(r.Key) < p.KeySize {
		mr.Key = rules.KeyPrefix(r.Key, true)
		out.KeySize = max(p.KeySize, len(mr.Key)+1)
	} else if r.Key != nil {
		out.KeySize = len(mr.Key)
	}
	out.Record = *mr
	return &out
}

// searchScope narrows f for the caller (filter.Scope.OnlyQueues; nil: not
// narrowed): when f searches content (q, a JSON path, a key, a header
// value) that some queue masks from the caller, f matches only the records
// of the queues where it does not. The queues
// are those with records now (and f's own queue): a queue whose first
// record comes in meanwhile is left out, never searched unmasked.
func (s *Server) searchScope(ctx context.Context, m *masker, f *filter.Filter) ([]string, error) {
	if m == nil || !mask.Searches(f) {
		return nil, nil
	}
	queues := []string{f.Queue}
	if f.Queue == "" {
		counts, err := s.rec.QueueCounts(ctx)
		if err != nil {
			return nil, err
		}
		queues = queues[:0]
		for q := range counts {
			queues = append(queues, q)
		}
	}
	only := []string{}
	for _, q := range queues {
		if !m.of(q).Hides(f) {
			only = append(only, q)
		}
	}
	return only, nil
}

// checkBulkMasking refuses a bulk operation that would act on content the
// caller may not see: a filter that searches what a queue masks from it
// (its count would answer the search; a task's filter is run again later,
// without the caller), or a patch over a queue whose values are masked
// (its dry run shows payloads, and a "test" operation asks about them).
// The caller narrows the filter (queue=...) or asks for unmask.
func (s *Server) checkBulkMasking(c echo.Context, f *filter.Filter, patch bool) error {
	m := s.maskerOf(c)
	if m == nil || !mask.Searches(f) && !patch {
		return nil
	}
	queues := []string{f.Queue}
	if f.Queue == "" {
		counts, err := s.rec.QueueCounts(c.Request().Context())
		if err != nil {
			return err
		}
		queues = queues[:0]
		for q := range counts {
			queues = append(queues, q)
		}
		slices.Sort(queues)
	}
	for _, q := range queues {
		r := m.of(q)
		if r.Hides(f) || patch && r.MasksValue() {
			what := "searches content that queue " + jsonString(q) + " masks from you"
			if !r.Hides(f) {
				what = "patches payloads that queue " + jsonString(q) + " masks from you"
			}
			return &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
				Message: "this bulk operation " + what + "; narrow the filter to queues you may unmask (queue=...), or ask for the unmask permission",
				Details: map[string]any{"queue": q, "required_action": string(auth.ActionUnmask)}}
		}
	}
	return nil
}

// incident masks an incident's sample message and signature (a consumer's
// error often quotes what failed) with the patterns of each of its queues
// the caller sees masked.
func (m *masker) incident(in incidentJSON) incidentJSON {
	for _, q := range in.Queues {
		if r := m.of(q); r != nil {
			in.Sample.Message = string(r.Text([]byte(in.Sample.Message)))
			in.Signature = string(r.Text([]byte(in.Signature)))
		}
	}
	return in
}

// maskedDoc is an audit entry's document masked whole: an object, as the
// entry's documents are.
var maskedDoc = json.RawMessage(`{"masked":"` + mask.Marker + `"}`)

// audit masks e's documents for the caller by what each holds
// (auditShapes): the filter's content conditions, an override's header
// values, payload and value, the filters of a config's or a rule's replay
// rules, as the record view masks the records they are about. The rules are
// those of the queue the document is about (a filter's queue, the queue
// whose config changed) when it names one, else every queue's at once
// (union: a retry's override does not say the record's queue). A document
// of a kind the server does not know is masked whole.
func (m *masker) audit(e *records.AuditEntry, union *mask.Rules) {
	shape, ok := auditShapes[e.Action]
	if !ok {
		shape = auditShape{filter: docUnknown, before: docUnknown, after: docUnknown}
	}
	scope := union
	if shape.byTarget && e.Target != "" {
		scope = m.of(e.Target)
	}
	e.Filter = m.maskAuditDoc(shape.filter, e.Filter, scope, union)
	e.Before = m.maskAuditDoc(shape.before, e.Before, scope, union)
	e.After = m.maskAuditDoc(shape.after, e.After, scope, union)
}

// maskAuditDoc masks one document of an entry: scope is the rules of what the
// entry is about, union every queue's.
func (m *masker) maskAuditDoc(kind auditDoc, doc json.RawMessage, scope, union *mask.Rules) json.RawMessage {
	if len(doc) == 0 || string(doc) == "null" {
		return doc
	}
	switch kind {
	case docPlain:
		return doc
	case docFilter:
		return m.auditFilter(doc, scope)
	case docOverride:
		return maskOverride(union, doc)
	case docConfig:
		return m.auditConfig(doc, scope)
	case docRule:
		return m.auditRule(doc, scope)
	}
	return maskedDoc
}

// auditFilter masks a filter (filter.Canonical) by the rules of its queue
// when it names one (it selects that queue's records only), else by scope:
// the values of the conditions the caller may not search (mask.Rules.Filter).
// A filter that does not read back is masked whole.
func (m *masker) auditFilter(doc json.RawMessage, scope *mask.Rules) json.RawMessage {
	f, err := filter.ParseJSON(doc, filter.Bulk, "filter")
	if err != nil {
		return maskedDoc
	}
	rules := scope
	if f.Queue != "" {
		rules = m.of(f.Queue)
	}
	shown := rules.Filter(&f).Canonical()
	if bytes.Equal(shown, f.Canonical()) {
		return doc // nothing masked: the entry as stored
	}
	return shown
}

// auditRule masks a replay rule's filter.
func (m *masker) auditRule(doc json.RawMessage, scope *mask.Rules) json.RawMessage {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(doc, &r); err != nil || r == nil {
		return maskedDoc
	}
	f, ok := r["filter"]
	if !ok || len(f) == 0 || string(f) == "null" {
		return doc
	}
	shown := m.auditFilter(f, scope)
	if bytes.Equal(shown, f) {
		return doc
	}
	r["filter"] = shown
	return encodeAuditDoc(r)
}

// auditConfig masks the filters of a topic config's replay rules, and of
// its types' (scope: the topic's rules). Ingest filters (policy files only:
// never in an API config) have their match masked whole.
func (m *masker) auditConfig(doc json.RawMessage, scope *mask.Rules) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil || cfg == nil {
		return maskedDoc
	}
	if !m.maskConfig(cfg, scope) {
		return doc
	}
	return encodeAuditDoc(cfg)
}

// maskConfig masks cfg in place; false when nothing was masked.
func (m *masker) maskConfig(cfg map[string]any, scope *mask.Rules) bool {
	changed := false
	if rules, ok := cfg["replay_rules"].([]any); ok {
		for _, r := range rules {
			rule, ok := r.(map[string]any)
			if !ok || rule["filter"] == nil {
				continue
			}
			raw, err := json.Marshal(rule["filter"])
			if err != nil {
				rule["filter"], changed = mask.Marker, true
				continue
			}
			shown := m.auditFilter(raw, scope)
			if bytes.Equal(shown, raw) {
				continue
			}
			var v any
			_ = json.Unmarshal(shown, &v)
			rule["filter"], changed = v, true
		}
	}
	if filters, ok := cfg["filters"].([]any); ok && scope.Active() {
		for _, f := range filters {
			if fm, ok := f.(map[string]any); ok && fm["match"] != nil {
				fm["match"], changed = mask.Marker, true
			}
		}
	}
	if types, ok := cfg["types"].(map[string]any); ok {
		for _, t := range types {
			if tc, ok := t.(map[string]any); ok && m.maskConfig(tc, scope) {
				changed = true
			}
		}
	}
	return changed
}

// maskOverride masks a retry's override (overrideJSON) by rules: the values
// of masked headers, the payload and the value as the record's (paths and
// patterns), meta by the patterns. Queue, target and retry hold no record
// data. An override that does not read back is masked whole.
func maskOverride(rules *mask.Rules, doc json.RawMessage) json.RawMessage {
	if !rules.Active() {
		return doc
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(doc, &o); err != nil || o == nil {
		return maskedDoc
	}
	changed := false
	set := func(k string, v json.RawMessage) {
		if !bytes.Equal(v, o[k]) {
			o[k], changed = v, true
		}
	}
	if raw, ok := o["headers"]; ok && string(raw) != "null" {
		var hs []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &hs); err != nil {
			set("headers", json.RawMessage(`"`+mask.Marker+`"`))
		} else {
			masked := false
			for _, h := range hs {
				if h == nil {
					continue
				}
				var name string
				if json.Unmarshal(h["key"], &name) != nil || rules.HeaderMasked(name) {
					h["value"], masked = json.RawMessage(`"`+mask.Marker+`"`), true
				}
			}
			if masked {
				set("headers", encodeAuditDoc(hs))
			}
		}
	}
	if raw, ok := o["payload"]; ok && string(raw) != "null" {
		set("payload", maskJSONDoc(rules, raw))
	}
	if raw, ok := o["value"]; ok && string(raw) != "null" {
		set("value", maskOverrideValue(rules, raw, o["value_encoding"]))
	}
	if raw, ok := o["meta"]; ok && string(raw) != "null" {
		set("meta", maskJSONDoc(&mask.Rules{Patterns: rules.Patterns}, raw))
	}
	if !changed {
		return doc
	}
	return encodeAuditDoc(o)
}

// maskOverrideValue masks an override's value (text, or base64 with
// value_encoding base64) as a record's value is masked, and writes it back
// in its encoding.
func maskOverrideValue(rules *mask.Rules, raw, encoding json.RawMessage) json.RawMessage {
	marker := json.RawMessage(`"` + mask.Marker + `"`)
	var text string
	if json.Unmarshal(raw, &text) != nil {
		return marker
	}
	enc := records.EncodingUTF8
	if len(encoding) > 0 && string(encoding) != "null" && json.Unmarshal(encoding, &enc) != nil {
		return marker
	}
	v, err := records.DecodeBytes(text, enc)
	if err != nil {
		return marker
	}
	shown := rules.Value(v)
	if bytes.Equal(shown, v) {
		return raw
	}
	out := string(shown)
	if enc == records.EncodingBase64 {
		out = base64.StdEncoding.EncodeToString(shown)
	}
	return encodeAuditDoc(out)
}

// maskJSONDoc masks JSON by rules' paths and patterns; JSON it cannot walk
// (nested too deeply) is masked whole.
func maskJSONDoc(rules *mask.Rules, doc json.RawMessage) json.RawMessage {
	out, err := rules.JSON(doc)
	if err != nil {
		return json.RawMessage(`"` + mask.Marker + `"`)
	}
	return out
}

// encodeAuditDoc is v as JSON, without HTML escaping (as the entry was
// stored); masked whole if it cannot be encoded.
func encodeAuditDoc(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return maskedDoc
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
