package mask

import (
	"slices"

	"github.com/redrive/redrive/internal/filter"
)

// Searches reports whether f selects records by their content: a text in
// the value (q), a JSON path, a key or a header value. Only such a filter
// can be asked whether it reveals masked content.
func Searches(f *filter.Filter) bool {
	if f.Q != "" || len(f.Path) > 0 || f.Key != nil {
		return true
	}
	return slices.ContainsFunc(f.Headers, func(h filter.Header) bool { return h.ValueSet })
}

// Hides reports whether f could find records by what r masks, so that a
// caller who may not see it must not find them that way (a search is an
// oracle: asking for 4111… one digit at a time reads a card number out of
// a listing's total). Then f matches none of the queue's records for that
// caller:
//
//   - q, a text anywhere in the value, whenever r masks anything in the
//     value (where the text lies in it cannot be told);
//   - path, when the path is masked or lies under a masked path, or when
//     the value looked for holds something a pattern masks;
//   - key, when the key looked for is masked;
//   - a header with a value, when the header's value is masked.
func (r *Rules) Hides(f *filter.Filter) bool {
	if !r.Active() {
		return false
	}
	if r.hidesQ(f) || r.hidesValue(f) || r.hidesKey(f) {
		return true
	}
	return slices.ContainsFunc(f.Headers, r.hidesHeader)
}

func (r *Rules) hidesQ(f *filter.Filter) bool { return f.Q != "" && r.MasksValue() }

func (r *Rules) hidesValue(f *filter.Filter) bool {
	if len(f.Path) == 0 {
		return false
	}
	for _, p := range r.Paths {
		if len(p) <= len(f.Path) && slices.Equal(p, f.Path[:len(p)]) {
			return true
		}
	}
	return r.textMasked([]byte(f.Value))
}

func (r *Rules) hidesKey(f *filter.Filter) bool { return f.Key != nil && r.KeyMasked(f.Key) }

func (r *Rules) hidesHeader(h filter.Header) bool { return h.ValueSet && r.HeaderMasked(h.Key) }

// Filter is f as it is shown to a caller who may not see what r masks (a
// filter an audit entry keeps, which another caller wrote): the value of
// every condition Hides refuses to search is Marker (q, the value looked
// for at a path, the key, a header's value); what the conditions are on
// (the path, the header names) and the other fields are shown as they are.
// f is not changed; a nil or inactive r returns f itself.
func (r *Rules) Filter(f *filter.Filter) *filter.Filter {
	if !r.Active() {
		return f
	}
	out := *f
	if r.hidesQ(f) {
		out.Q = Marker
	}
	if r.hidesValue(f) {
		out.Value = Marker
	}
	if r.hidesKey(f) {
		out.Key = []byte(Marker)
	}
	if slices.ContainsFunc(f.Headers, r.hidesHeader) {
		out.Headers = make([]filter.Header, len(f.Headers))
		for i, h := range f.Headers {
			if r.hidesHeader(h) {
				h.Value = Marker
			}
			out.Headers[i] = h
		}
	}
	return &out
}
