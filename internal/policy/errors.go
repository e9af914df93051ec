package policy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is matched (with errors.Is) by every error that reports a bad policy,
// as opposed to a failure to read one. The HTTP layer maps it to 422.
var ErrInvalid = errors.New("invalid policy")

// FieldError is one problem in a policy: where it is and what is wrong.
type FieldError struct {
	// File is the policy file, or empty when the policy came from elsewhere
	// (an API request, a record header).
	File string
	// Path is the field's path in the document, e.g. topics.orders.retry.max_attempts.
	// Keys that are not plain identifiers are quoted: topics."orders.*".max_age.
	Path string
	// Line is the 1-based line in File, or 0 when unknown.
	Line int
	// Msg says what was expected.
	Msg string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Errors is every problem found in one policy source, in file and line order.
// Validation reports all of them at once so that an operator fixes a file in one go.
type Errors []*FieldError

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Is makes errors.Is(err, ErrInvalid) match a non-empty Errors.
func (es Errors) Is(target error) bool { return target == ErrInvalid && len(es) > 0 }

// errorList collects FieldErrors while a document is decoded and validated.
type errorList struct {
	file  string
	lines map[string]int // path → line, filled by the decoder
	errs  Errors
	seen  map[string]bool // drops exact repeats, e.g. one bad _default seen through many topics
	// limits, when set, bound retry policies (policy files, API configs).
	limits *Limits
}

func (l *errorList) addf(path, format string, args ...any) {
	l.add(&FieldError{File: l.file, Path: path, Line: l.lines[path], Msg: fmt.Sprintf(format, args...)})
}

func (l *errorList) add(e *FieldError) {
	key := e.Error()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	l.errs = append(l.errs, e)
}

// err returns the collected errors sorted by file and line (then path and message,
// so that the order never depends on map iteration), or nil.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return sortErrors(l.errs)
}

func sortErrors(es Errors) Errors {
	slices.SortStableFunc(es, func(a, b *FieldError) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Msg, b.Msg))
	})
	return es
}
