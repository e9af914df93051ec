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
	if f.Q != "" && r.MasksValue() {
		return true
	}
	if len(f.Path) > 0 {
		for _, p := range r.Paths {
			if len(p) <= len(f.Path) && slices.Equal(p, f.Path[:len(p)]) {
				return true
			}
		}
		if r.textMasked([]byte(f.Value)) {
			return true
		}
	}
	if f.Key != nil && r.KeyMasked(f.Key) {
		return true
	}
	for _, h := range f.Headers {
		if h.ValueSet && r.HeaderMasked(h.Key) {
			return true
		}
	}
	return false
}
