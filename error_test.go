package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"
)

type myErr struct{ msg string }

func (e myErr) Error() string { return e.msg }

// stackErr formats itself with a stack under %+v, like github.com/pkg/errors.
type stackErr struct{}

func (stackErr) Error() string { return "with stack" }
func (e stackErr) Format(s fmt.State, verb rune) {
	if verb == 'v' && s.Flag('+') {
		fmt.Fprint(s, "with stack\nmain.f\n\tf.go:1")
		return
	}
	fmt.Fprint(s, e.Error())
}

func TestClassify(t *testing.T) {
	t.Parallel()
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name    string
		err     error
		typ     string
		code    Code
		msg     string
		details string
	}{
		{"nil", nil, ErrorTypeGeneric, CodeRetry, "", ""},
		{"plain", errors.New("boom"), ErrorTypeGeneric, CodeRetry, "boom", ""},
		{"go type", opErr, "net.OpError", CodeRetry, "dial tcp: connection refused", ""},
		{"wrapped go type", fmt.Errorf("charge: %w", opErr), "net.OpError", CodeRetry, "charge: dial tcp: connection refused", ""},
		{"value type", myErr{"mine"}, "redrive.myErr", CodeRetry, "mine", ""},
		{"fs error", &os.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}, "fs.PathError", CodeRetry, "open /x: file does not exist", ""},
		{"joined", errors.Join(errors.New("a"), opErr), "net.OpError", CodeRetry, "a\ndial tcp: connection refused", ""},
		{"canceled", fmt.Errorf("poll: %w", context.Canceled), "context.canceled", CodeRetry, "poll: context canceled", ""},
		{"deadline", context.DeadlineExceeded, "context.deadline_exceeded", CodeRetry, "context deadline exceeded", ""},
		{"typed discard", Discard("payment.card_declined", errors.New("declined")), "payment.card_declined", CodeDiscard, "declined", ""},
		{"typed dead letter wrapped", fmt.Errorf("order 17: %w", DeadLetter("payment.card_stolen", errors.New("stolen"))), "payment.card_stolen", CodeDeadLetter, "order 17: stolen", ""},
		{"typed fail without type", Fail("", opErr), "net.OpError", CodeFail, "dial tcp: connection refused", ""},
		{"typed retry without error", Retry("x.y", nil), "x.y", CodeRetry, "x.y", ""},
		{"struct with details", &Error{Type: "a.b", Code: CodeDeadLetter, Details: map[string]any{"n": 1}, Err: errors.New("m")}, "a.b", CodeDeadLetter, "m", `{"n":1}`},
		{"invalid code is retry", &Error{Type: "a.b", Code: "NOPE"}, "a.b", CodeRetry, "a.b", ""},
		{"unmarshalable details", &Error{Details: map[string]any{"f": func() {}}, Err: errors.New("m")}, ErrorTypeGeneric, CodeRetry, "m", ""},
		{"panic", &panicError{value: "oops", stack: []byte("goroutine 1\nmain.f()")}, ErrorTypePanic, CodeRetry, "panic: oops", ""},
		{"panic with typed error", &panicError{value: Discard("x.panic", errors.New("p"))}, "x.panic", CodeDiscard, "panic: p", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := classify(tt.err)
			if f.typ != tt.typ || f.code != tt.code || f.message != tt.msg {
				t.Errorf("classify = type %q code %q message %q, want %q %q %q", f.typ, f.code, f.message, tt.typ, tt.code, tt.msg)
			}
			if tt.details != "" && string(f.details) != tt.details {
				t.Errorf("details = %s, want %s", f.details, tt.details)
			}
			if f.details != nil && !json.Valid(f.details) {
				t.Errorf("details %s are not JSON", f.details)
			}
		})
	}
}

func TestClassifyBacktrace(t *testing.T) {
	t.Parallel()
	f := classify(fmt.Errorf("wrap: %w", Retry("x", errors.New("e"))))
	if len(f.backtrace) == 0 || !strings.Contains(f.backtrace[0], "TestClassifyBacktrace") {
		t.Errorf("constructor backtrace should start at its caller: %q", f.backtrace)
	}
	if f := classify(errors.New("plain")); f.backtrace != nil {
		t.Errorf("plain error has backtrace %q", f.backtrace)
	}
	if f := classify(fmt.Errorf("ctx: %w", stackErr{})); len(f.backtrace) != 3 || f.backtrace[1] != "main.f" {
		t.Errorf("%%+v stack = %q", f.backtrace)
	}
	if f := classify(&panicError{value: 1, stack: []byte("goroutine 1\nmain.f()\n")}); len(f.backtrace) != 2 {
		t.Errorf("panic stack = %q", f.backtrace)
	}
}

func TestErrorInterfaces(t *testing.T) {
	t.Parallel()
	base := errors.New("base")
	err := fmt.Errorf("ctx: %w", Discard("a.b", base))
	var re *Error
	if !errors.As(err, &re) || re.Type != "a.b" || re.Code != CodeDiscard || !errors.Is(err, base) {
		t.Fatalf("errors.As/Is through *Error failed: %v", err)
	}
	if got := (&Error{Code: CodeFail}).Error(); got != "FAIL" {
		t.Errorf("Error() without Err or Type = %q", got)
	}
	pe := &PublishError{Topic: "t", Partition: 1, Offset: 2, HandlerErr: base, Err: errors.New("down")}
	if !errors.Is(pe, base) || !strings.Contains(pe.Error(), "t[1]@2") {
		t.Errorf("PublishError: %v", pe)
	}
	for _, c := range []Code{CodeRetry, CodeDiscard, CodeDeadLetter, CodeFail} {
		if !c.Valid() {
			t.Errorf("%s not valid", c)
		}
	}
	if Code("retry").Valid() {
		t.Errorf("lower-case code is valid")
	}
}

func TestTypeName(t *testing.T) {
	t.Parallel()
	type local struct{ error }
	tests := []struct {
		v    any
		want string
	}{
		{&net.OpError{}, "net.OpError"},
		{local{}, "redrive.local"},
		{struct{ error }{}, ""},
		{errors.New("x"), "errors.errorString"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := typeName(tt.v); got != tt.want {
			t.Errorf("typeName(%T) = %q, want %q", tt.v, got, tt.want)
		}
	}
	for s, want := range map[string]bool{"v2": true, "v10": true, "v": false, "vx": false, "kgo": false} {
		if isMajorVersion(s) != want {
			t.Errorf("isMajorVersion(%q) != %v", s, want)
		}
	}
}
