package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redrive/redrive/internal/queue"
)

// An error says it is worth trying again when the backend is unavailable
// (any 5xx, an unexpected error included) or a rate limit was hit, and not
// when the request itself is at fault.
func TestErrorsSayWhetherToTryAgain(t *testing.T) {
	s := New(Config{Queues: &queue.Resolver{}})
	for _, c := range []struct {
		err       error
		retryable bool
	}{
		{&APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError, Message: "down"}, true},
		{&APIError{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Message: "slow down"}, true},
		{errors.New("an unexpected failure"), true},
		{invalidParam("limit", "must be positive"), false},
		{notFound("no such record"), false},
		{&APIError{Status: http.StatusConflict, Code: CodeConflict, Message: "in flight"}, false},
		{&APIError{Status: http.StatusForbidden, Code: CodeForbidden, Message: "no"}, false},
	} {
		rec := httptest.NewRecorder()
		s.errorHandler(c.err, s.echo.NewContext(httptest.NewRequest(http.MethodGet, "/ojs/v1/x", nil), rec))
		var out struct {
			Error struct {
				Retryable *bool `json:"retryable"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error.Retryable == nil || *out.Error.Retryable != c.retryable {
			t.Errorf("%v: %s; want retryable %v", c.err, rec.Body, c.retryable)
		}
	}
}
