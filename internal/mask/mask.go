// Package mask hides the sensitive parts of a record from a caller who may
// not see them (docs/security.md, "Data masking"): JSON paths of the
// payload, header values by name, keys by pattern, and what named or custom
// patterns find in the value (card numbers, emails).
//
// A masked part is replaced by the marker "***": a masked JSON value (any
// type) by the JSON string "***", a pattern's match inside a string by ***
// in that string, a key or a header value whole. Masking edits the JSON
// text token by token: what it does not mask is copied byte for byte, so
// numbers stay exact and the members stay in their order.
//
// It imports nothing but dlq and filter (whose path syntax the rules use).
package mask

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/redrive/redrive/internal/dlq"
)

// Marker replaces what is masked.
const Marker = "***"

// markerJSON is Marker as a JSON string.
var markerJSON = []byte(`"` + Marker + `"`)

// Rules are the masking rules of one queue. A nil *Rules masks nothing.
// Build one in Go or from a policy (policy.Topic.Masking); treat it as
// immutable once in use.
type Rules struct {
	// Paths are JSON paths into the payload (object keys, outermost first):
	// the value there, whatever its type, is masked. A path goes through
	// arrays: items.card masks the card of every element of items.
	Paths [][]string
	// Headers are globs on header names ('*' any run of characters,
	// matched without regard to case): such a header's value is masked.
	Headers []string
	// Keys are globs on the record key ('*' any run of bytes): a key
	// matching one is masked whole.
	Keys []string
	// Patterns find what to mask in the value's strings and numbers (a
	// JSON value), or in the value's bytes (any other value).
	Patterns []*Pattern
}

// Active reports whether r masks anything.
func (r *Rules) Active() bool {
	return r != nil && (len(r.Paths) > 0 || len(r.Headers) > 0 || len(r.Keys) > 0 || len(r.Patterns) > 0)
}

// MasksValue reports whether r masks anything in a record's value.
func (r *Rules) MasksValue() bool { return r != nil && (len(r.Paths) > 0 || len(r.Patterns) > 0) }

// Value masks a whole value: a JSON value by its paths and patterns, any
// other value by its patterns. A value that is not JSON under rules with
// paths is masked whole: where the path's field lies in it cannot be told
// (an unparseable record, a binary encoding). nil stays nil.
func (r *Rules) Value(v []byte) []byte {
	if !r.MasksValue() || len(v) == 0 {
		return v
	}
	if json.Valid(v) {
		out, err := r.JSON(v)
		if err != nil {
			return slices.Clone(markerJSON)
		}
		return out
	}
	if len(r.Paths) > 0 {
		return []byte(Marker)
	}
	return r.Text(v)
}

// ValuePrefix masks the first bytes of a value cut to a preview. A JSON
// prefix is masked token by token up to its last whole token (a string or
// number cut at the end could be the start of something masked); any other
// prefix is masked whole under path rules (as Value), else as TextPrefix.
func (r *Rules) ValuePrefix(prefix []byte) []byte {
	if !r.MasksValue() || len(prefix) == 0 {
		return prefix
	}
	if out, ok := r.jsonPrefix(prefix); ok {
		return out
	}
	if len(r.Paths) > 0 {
		return []byte(Marker)
	}
	return r.TextPrefix(prefix)
}

// maxCutRun bounds what TextPrefix drops: more than any card number or
// email address.
const maxCutRun = 320

// TextPrefix masks text cut at its end: what the patterns find, less the
// word the text ends with (letters, digits, the punctuation of emails, at
// most 320 bytes) and the groups of digits before it separated by single
// spaces or dashes: a card number or email cut by the end could have begun
// there.
func (r *Rules) TextPrefix(b []byte) []byte {
	if r == nil || len(r.Patterns) == 0 {
		return b
	}
	out := r.Text(b)
	i := len(out)
	for i > 0 && len(out)-i < maxCutRun && inWord(out[i-1]) {
		i--
	}
	// Digit groups before it: "4111 1111 1111 11".
	for i > 1 && (out[i-1] == ' ' || out[i-1] == '-') && isDigit(out[i-2]) && len(out)-i < maxCutRun {
		i--
		for i > 0 && isDigit(out[i-1]) {
			i--
		}
	}
	return out[:i]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func inWord(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || strings.IndexByte("-._%+@", c) >= 0
}

// JSON masks a JSON document by the paths and patterns. A document that is
// not JSON, or nested deeper than MaxDepth, is an error.
func (r *Rules) JSON(doc []byte) ([]byte, error) {
	w := &walker{in: doc, rules: r, out: make([]byte, 0, len(doc))}
	if err := w.document(); err != nil {
		return nil, err
	}
	return w.out, nil
}

// jsonPrefix masks a prefix of a JSON document; ok is false when it is not
// one.
func (r *Rules) jsonPrefix(prefix []byte) ([]byte, bool) {
	w := &walker{in: prefix, rules: r, partial: true, out: make([]byte, 0, len(prefix))}
	if err := w.document(); err != nil {
		return nil, false
	}
	return w.out, true
}

// Text replaces what the patterns find in b with Marker.
func (r *Rules) Text(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, p := range r.Patterns {
		b = p.replace(b)
	}
	return b
}

// textMasked reports whether the patterns find something in s.
func (r *Rules) textMasked(s []byte) bool {
	if r == nil {
		return false
	}
	for _, p := range r.Patterns {
		if p.find(s) {
			return true
		}
	}
	return false
}

// KeyMasked reports whether a key is masked: it matches one of the Keys
// globs. A null key never is.
func (r *Rules) KeyMasked(key []byte) bool {
	if r == nil || key == nil {
		return false
	}
	return slices.ContainsFunc(r.Keys, func(g string) bool { return Glob(g, string(key)) })
}

// Key masks a whole key: Marker when it is masked, else the key.
func (r *Rules) Key(key []byte) []byte {
	if r.KeyMasked(key) {
		return []byte(Marker)
	}
	return key
}

// KeyPrefix masks the start of a key cut to a preview (truncated): a cut
// key is masked whenever any key is, as a glob may match what was cut.
func (r *Rules) KeyPrefix(prefix []byte, truncated bool) []byte {
	if r == nil || prefix == nil {
		return prefix
	}
	if truncated && len(r.Keys) > 0 {
		return []byte(Marker)
	}
	return r.Key(prefix)
}

// HeaderMasked reports whether the value of the header named name is
// masked: the name matches one of the Headers globs, case aside.
func (r *Rules) HeaderMasked(name string) bool {
	if r == nil {
		return false
	}
	name = strings.ToLower(name)
	return slices.ContainsFunc(r.Headers, func(g string) bool { return Glob(strings.ToLower(g), name) })
}

// HeaderValues masks the values of masked headers; hs is not changed.
func (r *Rules) HeaderValues(hs []dlq.Header) []dlq.Header {
	if r == nil || len(r.Headers) == 0 || hs == nil {
		return hs
	}
	out := make([]dlq.Header, len(hs))
	for i, h := range hs {
		out[i] = h
		if r.HeaderMasked(h.Key) {
			out[i].Value = []byte(Marker)
		}
	}
	return out
}

// Record returns a copy of rec with its key, value, decoded payloads,
// header values, an operator's redelivery edit and the error messages
// masked (the patterns apply to error messages and details too: a
// consumer's error often quotes the field that failed). rec is not
// changed; a nil or inactive r returns rec itself.
func (r *Rules) Record(rec *dlq.Record) *dlq.Record {
	if !r.Active() {
		return rec
	}
	out := *rec
	if r.KeyMasked(rec.Key) {
		out.Key = []byte(Marker)
		if rec.KeyPayload != nil {
			out.KeyPayload = slices.Clone(markerJSON)
		}
	}
	out.Value = r.Value(rec.Value)
	if rec.Payload != nil {
		out.Payload = r.payload(rec.Payload)
	}
	out.Headers = r.HeaderValues(rec.Headers)
	if rd := rec.Redelivery; rd != nil {
		c := *rd
		c.Headers = r.HeaderValues(rd.Headers)
		if rd.Payload != nil {
			c.Payload = r.payload(rd.Payload)
		}
		if rd.ValueSet {
			if rd.Payload != nil && rd.ValueSchema == nil {
				c.Value = c.Payload
			} else {
				c.Value = r.Value(rd.Value)
			}
		}
		out.Redelivery = &c
	}
	if len(r.Patterns) > 0 && len(rec.Errors) > 0 {
		out.Errors = make([]dlq.ErrorEntry, len(rec.Errors))
		for i, e := range rec.Errors {
			e.Message = string(r.Text([]byte(e.Message)))
			if len(e.Details) > 0 {
				e.Details = r.payload(e.Details)
			}
			out.Errors[i] = e
		}
	}
	return &out
}

// payload masks JSON that is known to be JSON (a decoded payload); JSON
// it cannot walk is masked whole.
func (r *Rules) payload(doc []byte) []byte {
	out, err := r.JSON(doc)
	if err != nil {
		return slices.Clone(markerJSON)
	}
	return out
}

// Glob reports whether s matches the glob g: '*' matches any run of
// characters (none included); every other character is itself.
func Glob(g, s string) bool {
	// The classic two-pointer match with backtracking to the last star:
	// linear in practice, never exponential.
	gi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case gi < len(g) && g[gi] == '*':
			star, mark = gi, si
			gi++
		case gi < len(g) && g[gi] == s[si]:
			gi++
			si++
		case star >= 0:
			gi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}
