package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// bodyLimit refuses bodies over MaxBodyBytes (or the route's own bound, an
// import's) with 413 naming "body", whether the client declared the length
// or not.
func (s *Server) bodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		limit := int64(MaxBodyBytes)
		if r, ok := s.routeOf(c); ok && r.maxBody > 0 {
			limit = r.maxBody
		}
		if req.ContentLength > limit {
			return tooLargeThan(limit)
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
		return next(c)
	}
}

func tooLarge() *APIError { return tooLargeThan(MaxBodyBytes) }

func tooLargeThan(limit int64) *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeInvalidRequest,
		Message: fmt.Sprintf("body: larger than the limit of %d bytes", limit), Details: map[string]any{"parameter": "body"}}
}

// readBody reads the request body; empty is allowed when optional. Its
// Content-Type was checked by guardWrites.
func readBody(c echo.Context, optional bool) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge()
	}
	if err != nil {
		return nil, invalidParam("body", "could not be read: "+err.Error())
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, invalidParam("body", "a JSON object is required")
	}
	return b, nil
}

// bindStrict reads the request's required JSON body into v (readBody, then
// decodeStrict): the start of every handler that takes a body.
func bindStrict(c echo.Context, v any) error {
	body, err := readBody(c, false)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields, wrong
// types and trailing data with an error naming the field.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return invalidParam("body", "must hold exactly one JSON value")
	}
	return nil
}

// jsonError turns an encoding/json error into a 400 naming the field.
func jsonError(err error) error {
	var apiErr *APIError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return invalidParam(field, "must be "+describeType(typeErr.Type.Kind().String(), typeErr.Type.String())+", got "+typeErr.Value)
	case errors.As(err, &syntaxErr):
		return invalidParam("body", fmt.Sprintf("malformed JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidParam("body", "malformed JSON: unexpected end")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidParam(name, "unknown field")
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return invalidParam(fe.field, fe.msg)
	}
	return invalidParam("body", err.Error())
}

// fieldError is returned by custom UnmarshalJSON methods to name their field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func describeType(kind, name string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return name
}

// checkParams rejects query parameters a route does not know.
func checkParams(q url.Values, known map[string]bool) error {
	for name := range q {
		if !known[name] {
			return invalidParam(name, "unknown query parameter")
		}
	}
	return nil
}

// parseLimit reads a page size (default 50, 1..1000).
func parseLimit(v string) (int, error) {
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, invalidParam("limit", "must be an integer from 1 to 1000")
	}
	return n, nil
}

func decodeCursorRaw(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return string(b), err
}
