package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"github.com/redrive/redrive/internal/dlq"
)

// Code is a handler's verdict on a failure (OJS retry spec §7). It travels in
// the redrive.error.code header and decides what Redrive does with the record.
type Code string

const (
	// CodeRetry asks Redrive to retry the record per the topic's policy. It is
	// the default for any error that does not say otherwise.
	CodeRetry Code = "RETRY"
	// CodeDiscard gives up without retrying; Redrive keeps the record as a
	// discard (prunable after retention.discarded).
	CodeDiscard Code = "DISCARD"
	// CodeDeadLetter gives up without retrying; Redrive keeps the record as a
	// dead letter for operators to inspect, fix and replay.
	CodeDeadLetter Code = "DEAD_LETTER"
	// CodeFail gives up without retrying: a recognised permanent failure.
	// Redrive discards it like CodeDiscard (OJS retry spec §7.2) but records
	// the distinct code.
	CodeFail Code = "FAIL"
)

// Valid reports whether c is one of the four codes.
func (c Code) Valid() bool { return dlq.Code(c).Valid() }

// Error types the library gives failures that do not name their own.
const (
	// ErrorTypePanic is the type of a handler panic.
	ErrorTypePanic = "panic"
	// ErrorTypeGeneric is the type of an error whose Go type says nothing
	// (errors.New, fmt.Errorf without %w).
	ErrorTypeGeneric = "error"
)

// Error is a handler error that tells Redrive how to treat the failure: its
// dot-namespaced Type (e.g. "payment.card_declined", matched by policies'
// non_retryable_errors), its Code and optional Details. Return one from a
// handler, directly or wrapped (errors.As finds it):
//
//	return redrive.Discard("payment.card_declined", err)
//	return &redrive.Error{Type: "payment.card_stolen", Code: redrive.CodeDeadLetter,
//		Details: map[string]any{"card": last4}, Err: err}
//
// The constructors Retry, Discard, DeadLetter and Fail also record the stack
// of their caller, which becomes the failure's backtrace.
type Error struct {
	// Type is the dot-namespaced error type. Empty means derived from Err's
	// Go type: *net.OpError gives "net.OpError"; see Publish.
	Type string
	// Code is the verdict; empty means CodeRetry.
	Code Code
	// Details is optional structured data, written as a JSON object.
	Details map[string]any
	// Err is the underlying error; it gives the message.
	Err error

	stack []uintptr
}

// Error returns the underlying error's message, or the type without one.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	if e.Type != "" {
		return e.Type
	}
	return string(e.code())
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) code() Code {
	if e.Code.Valid() {
		return e.Code
	}
	return CodeRetry
}

// Retry marks err as retryable with the given type: Redrive retries it per
// the topic's policy. A plain error is retryable too; use Retry to name it.
func Retry(typ string, err error) error { return newError(typ, CodeRetry, err) }

// Discard marks err as not worth retrying nor keeping as a dead letter.
func Discard(typ string, err error) error { return newError(typ, CodeDiscard, err) }

// DeadLetter marks err as not retryable: Redrive keeps the record for operators.
func DeadLetter(typ string, err error) error { return newError(typ, CodeDeadLetter, err) }

// Fail marks err as a recognised permanent failure: no retry.
func Fail(typ string, err error) error { return newError(typ, CodeFail, err) }

func newError(typ string, code Code, err error) *Error {
	return &Error{Type: typ, Code: code, Err: err, stack: callers(4)}
}

// PublishError is returned when a failed record could not be written to the
// DLQ topic: the record is not done and its offset must not be committed.
// errors.Is and errors.As see both the publish error and the handler's.
type PublishError struct {
	// Topic, Partition and Offset locate the record that failed.
	Topic     string
	Partition int32
	Offset    int64
	// HandlerErr is why the handler failed the record.
	HandlerErr error
	// Err is why the record could not be dead-lettered.
	Err error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("redrive: dead-letter %s[%d]@%d: %v (handler error: %v)",
		e.Topic, e.Partition, e.Offset, e.Err, e.HandlerErr)
}

// Unwrap returns the publish error and the handler error.
func (e *PublishError) Unwrap() []error { return []error{e.Err, e.HandlerErr} }

// failure is a classified handler error, ready for the envelope.
type failure struct {
	typ       string
	message   string
	code      Code
	details   json.RawMessage
	backtrace []string
}

// panicError is a recovered handler panic.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// Unwrap returns the panic value when it was an error.
func (p *panicError) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// classify reads what Redrive needs from a handler error: type, message,
// code, details and backtrace. The outermost *Error in the chain decides type,
// code and details; the message is the whole chain's.
func classify(err error) failure {
	f := failure{code: CodeRetry}
	if err == nil {
		f.typ = ErrorTypeGeneric
		return f
	}
	f.message = err.Error()

	var pe *panicError
	isPanic := errors.As(err, &pe)

	var re *Error
	if errors.As(err, &re) {
		f.code = re.code()
		f.typ = re.Type
		if len(re.Details) > 0 {
			b, merr := json.Marshal(re.Details)
			if merr != nil {
				b, _ = json.Marshal(map[string]string{"details_error": merr.Error()})
			}
			f.details = b
		}
		f.backtrace = frames(re.stack)
	}
	if f.typ == "" {
		switch {
		case isPanic:
			f.typ = ErrorTypePanic
		case re != nil && re.Err != nil:
			f.typ = derivedType(re.Err)
		default:
			f.typ = derivedType(err)
		}
	}
	if f.backtrace == nil && isPanic {
		f.backtrace = strings.Split(strings.TrimRight(string(pe.stack), "\n"), "\n")
	}
	if f.backtrace == nil {
		f.backtrace = formattedStack(err)
	}
	return f
}

// genericTypes say nothing about a failure: derivedType looks past them.
var genericTypes = map[string]bool{
	"fmt.wrapError":        true,
	"fmt.wrapErrors":       true,
	"errors.errorString":   true,
	"errors.joinError":     true,
	"redrive.Error":        true,
	"redrive.panicError":   true,
	"redrive.PublishError": true,
}

// renamedTypes give unexported standard-library error types a readable name.
var renamedTypes = map[string]string{
	"context.deadlineExceededError": "context.deadline_exceeded",
}

// derivedType names an error after the Go type of the first error in its
// chain that is not a generic wrapper: *net.OpError is "net.OpError" (package
// name, not path). Without one it is "context.canceled" for context.Canceled,
// else ErrorTypeGeneric.
func derivedType(err error) string {
	if name := specificType(err, 0); name != "" {
		return name
	}
	if errors.Is(err, context.Canceled) {
		return "context.canceled"
	}
	return ErrorTypeGeneric
}

// specificType searches err's tree, depth first, for the first error whose
// type is not generic.
func specificType(err error, depth int) string {
	if err == nil || depth > 100 {
		return ""
	}
	if name := typeName(err); name != "" && !genericTypes[name] {
		if r, ok := renamedTypes[name]; ok {
			return r
		}
		return name
	}
	switch u := err.(type) { //nolint:errorlint // walks the Unwrap chain one level at a time, on purpose
	case interface{ Unwrap() error }:
		return specificType(u.Unwrap(), depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if name := specificType(e, depth+1); name != "" {
				return name
			}
		}
	}
	return ""
}

// typeName is "pkg.Type" for a named type (pointers dereferenced), using the
// package's name rather than its import path ("v2" major-version suffixes
// skipped); "" for unnamed types.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Name() == "" || t.PkgPath() == "" {
		return ""
	}
	pkg := path.Base(t.PkgPath())
	if isMajorVersion(pkg) {
		pkg = path.Base(path.Dir(t.PkgPath()))
	}
	return pkg + "." + t.Name()
}

func isMajorVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	_, err := strconv.Atoi(s[1:])
	return err == nil
}

// maxFrames bounds a captured stack; the envelope caps it at 4 KiB anyway.
const maxFrames = 64

// callers captures the stack above skip frames (0 is runtime.Callers, 1 is
// callers itself).
func callers(skip int) []uintptr {
	pcs := make([]uintptr, maxFrames)
	return pcs[:runtime.Callers(skip, pcs)]
}

// frames renders a captured stack, one frame per line: "function file:line".
func frames(pcs []uintptr) []string {
	if len(pcs) == 0 {
		return nil
	}
	var lines []string
	fs := runtime.CallersFrames(pcs)
	for {
		fr, more := fs.Next()
		if fr.Function != "runtime.goexit" && fr.Function != "" {
			lines = append(lines, fr.Function+" "+shortFile(fr.File)+":"+strconv.Itoa(fr.Line))
		}
		if !more {
			break
		}
	}
	return lines
}

// shortFile keeps the last directory and the file name of a path.
func shortFile(file string) string {
	dir, name := path.Split(file)
	if dir == "" {
		return name
	}
	return path.Base(dir) + "/" + name
}

// formattedStack asks errors that format themselves with a stack (%+v, as
// github.com/pkg/errors and cockroachdb/errors do) for it. It returns nil when
// %+v says nothing more than Error().
func formattedStack(err error) []string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(fmt.Formatter); ok {
			s := strings.TrimRight(fmt.Sprintf("%+v", e), "\n")
			if s == e.Error() || !strings.Contains(s, "\n") {
				return nil
			}
			return strings.Split(s, "\n")
		}
	}
	return nil
}
