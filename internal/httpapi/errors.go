package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/filter"
)

// Error codes of the OJS error envelope (docs/api.md, Conventions).
const (
	CodeInvalidRequest  = "invalid_request"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeValidationError = "validation_error"
	CodeRateLimited     = "rate_limited"
	CodeBackendError    = "backend_error"
)

// APIError is an error answered with the OJS error envelope.
type APIError struct {
	Status int    `json:"-"`
	Code   string `json:"code"`
	// Type repeats Code, as OJS clients read the error's type.
	Type    string         `json:"type,omitempty"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Retryable says whether the caller should try the same call again
	// (OJS errors §16.1): the backend being unavailable or a rate limit,
	// never the caller's own mistake. Set when the error is written.
	Retryable bool `json:"retryable"`
	// RequestID is filled in when the error is written.
	RequestID string `json:"request_id,omitempty"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// invalidParam is a 400 naming the offending query parameter or field.
func invalidParam(name, message string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidRequest,
		Message: name + ": " + message, Details: map[string]any{"parameter": name}}
}

func notFound(message string) *APIError {
	return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: message}
}

// codeForStatus maps statuses of errors raised by echo itself (unknown route,
// wrong method, body too large) onto envelope codes.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusMethodNotAllowed:
		return CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusUnprocessableEntity:
		return CodeValidationError
	case http.StatusTooManyRequests:
		return CodeRateLimited
	}
	return CodeBackendError
}

// errorHandler is the one place errors become HTTP responses: every 4xx/5xx
// leaves in the OJS envelope, and internal details of 5xx are logged, not sent.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var apiErr *APIError
	var httpErr *echo.HTTPError
	var filterErr *filter.Error
	switch {
	case errors.As(err, &apiErr):
	case errors.As(err, &filterErr):
		apiErr = invalidParam(filterErr.Field, filterErr.Msg)
	case errors.As(err, &httpErr):
		msg, _ := httpErr.Message.(string)
		if msg == "" {
			msg = http.StatusText(httpErr.Code)
		}
		apiErr = &APIError{Status: httpErr.Code, Code: codeForStatus(httpErr.Code), Message: msg}
	default:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		apiErr = &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError,
			Message: "the backend is unavailable; try again"}
	}
	out := *apiErr
	out.Type = out.Code
	out.Retryable = out.Status == http.StatusTooManyRequests || out.Status >= http.StatusInternalServerError
	out.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(out.Status)
		return
	}
	_ = c.JSON(out.Status, map[string]any{"error": out})
}
