package httpapi

import (
	"context"
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

// maskAudit masks an audit entry's JSON (a filter, an override, a config)
// by rules; JSON it cannot walk is masked whole.
func maskAudit(rules *mask.Rules, doc []byte) []byte {
	if len(doc) == 0 {
		return doc
	}
	out, err := rules.JSON(doc)
	if err != nil {
		return []byte(`"` + mask.Marker + `"`)
	}
	return out
}
