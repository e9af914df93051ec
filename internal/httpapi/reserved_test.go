package httpapi_test

import (
	"net/http"
	"testing"
)

// Kafka's internal topics (__consumer_offsets, …) are reserved like
// Redrive's own: override.queue and redelivery.target_topic cannot name one
// (422), a record whose queue is one has no topic to go back to (409 unless
// override.queue), and bulk retries and the compatibility requeue skip such
// records.
func TestKafkaInternalTopicsAreNeverATarget(t *testing.T) {
	b := setup(t)
	internal := b.seed(t, rec{queue: "__consumer_offsets"})[0]
	orders := b.seed(t, rec{queue: "orders"})[0]

	for _, target := range []string{"__consumer_offsets", "__transaction_state", dlqTopic + ".events"} {
		r := b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+orders+"/retry", map[string]any{"override": map[string]any{"queue": target}}, nil)
		wantError(t, "override.queue "+target, r, http.StatusUnprocessableEntity, "validation_error", "override.queue")
	}
	r := b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+internal+"/retry", map[string]any{}, nil)
	wantError(t, "retry of a record of __consumer_offsets", r, http.StatusConflict, "conflict", "override.queue")

	for _, target := range []string{"__consumer_offsets", dlqTopic, dlqTopic + ".archive"} {
		r := b.send(t, http.MethodPut, "/ojs/v1/queues/billing/config", map[string]any{"redelivery": map[string]any{"target_topic": target}}, nil)
		wantError(t, "PUT config with target_topic "+target, r, http.StatusUnprocessableEntity, "validation_error", "redelivery.target_topic")
	}
	r = b.send(t, http.MethodPost, "/ojs/v1/queues", map[string]any{"name": "invoices", "config": map[string]any{"redelivery": map[string]any{"target_topic": "__consumer_offsets"}}}, nil)
	wantError(t, "POST queue", r, http.StatusUnprocessableEntity, "validation_error", "config.redelivery.target_topic")

	// The compatibility requeue finds nothing to requeue there.
	r = b.do(t, compatReq("POST", "/api/dlq/requeue-all/dlq:__consumer_offsets", writeKey))
	wantStatus(t, r, http.StatusOK)
	var res struct {
		Success bool `json:"success"`
	}
	r.json(t, &res)
	if res.Success {
		t.Errorf("compat requeue of __consumer_offsets: %s", r.body)
	}

	b.retryAll(t, 1, 1)
	if n := b.count(t, "state = 'discarded' AND id = $1", internal); n != 1 {
		t.Error("the bulk retry touched the record of __consumer_offsets")
	}
	if n := b.count(t, "state <> 'discarded' AND id = $1", orders); n != 1 {
		t.Error("the bulk retry left the orders record alone")
	}
	// With a real target it can go.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+internal+"/retry",
		map[string]any{"override": map[string]any{"queue": "orders.retry"}}, nil), http.StatusOK)
}
