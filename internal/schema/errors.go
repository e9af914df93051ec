package schema

import (
	"fmt"
	"strconv"
)

// ValidationError says a payload does not conform to its schema: Path is
// the JSON Pointer (RFC 6901) of the offending value ("/" for the whole
// payload) and Expected what the schema wants there. The API renders it
// as 422 Unprocessable Entity.
type ValidationError struct {
	Path     string
	Expected string
	// Got describes the value found, when there is one.
	Got string
}

func (e *ValidationError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("payload %s: expected %s", pathOrRoot(e.Path), e.Expected)
	}
	return fmt.Sprintf("payload %s: expected %s, got %s", pathOrRoot(e.Path), e.Expected, e.Got)
}

func mismatch(path, expected string, v *jval) *ValidationError {
	return &ValidationError{Path: pathOrRoot(path), Expected: expected, Got: describe(v)}
}

// describe names a JSON value briefly for an error message.
func describe(v *jval) string {
	if v == nil {
		return "nothing"
	}
	switch v.kind {
	case jNull:
		return "null"
	case jBool:
		return strconv.FormatBool(v.b)
	case jNumber:
		return "number " + clip(v.s)
	case jString:
		return "string " + strconv.Quote(clip(v.s))
	case jArray:
		return fmt.Sprintf("array of %d", len(v.arr))
	case jObject:
		return "object"
	}
	return "?"
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
