package httpapi_test

import (
	"net/http"
	"testing"
)

// A topic config set through the API is held to the retry limits a
// deployment sets (REDRIVE_RETRY_MAX_ATTEMPTS, REDRIVE_RETRY_MIN_INTERVAL)
// and to the rate_limit minimum: 422 naming the field, the config unchanged.
func TestQueueConfigWithinRetryLimits(t *testing.T) {
	b := start(t, options{env: map[string]string{"REDRIVE_RETRY_MAX_ATTEMPTS": "50", "REDRIVE_RETRY_MIN_INTERVAL": "1s"}})
	for _, c := range []struct{ body, field string }{
		{`{"retry":{"max_attempts":2000000000}}`, "retry.max_attempts"},
		{`{"retry":{"max_attempts":51}}`, "retry.max_attempts"},
		{`{"retry":{"initial_interval":"PT0.001S","max_interval":"PT1M"}}`, "retry.initial_interval"},
		{`{"retry":{"initial_interval":"PT0.5S","max_interval":"PT1M"}}`, "retry.initial_interval"},
		{`{"redelivery":{"rate_limit":1e-300}}`, "redelivery.rate_limit"},
	} {
		r := b.do(t, req{method: http.MethodPut, path: "/ojs/v1/queues/invoices/config", key: writeKey, body: c.body})
		wantError(t, "PUT "+c.body, r, http.StatusUnprocessableEntity, "validation_error", c.field)
	}
	r := b.do(t, req{method: http.MethodPut, path: "/ojs/v1/queues/invoices/config", key: writeKey,
		body: `{"retry":{"max_attempts":50,"initial_interval":"PT1S","max_interval":"PT1M"},"redelivery":{"rate_limit":0.001}}`})
	wantStatus(t, r, http.StatusOK)
}
