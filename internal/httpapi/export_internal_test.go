package httpapi

import (
	"errors"
	"net/http"
	"testing"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/filter"
)

// An export needs read on every queue it can select: a principal with read
// on payments.* alone may export payments.eu, and neither orders nor every
// queue (403 naming queue, saying which queues it may read); a read key
// (read on every queue) may export anything.
func TestExportNeedsReadOnEveryQueueItSelects(t *testing.T) {
	payments := auth.Principal{Kind: "oidc", Name: "alice", Grants: []auth.Grant{
		{Role: "payments-ops", Actions: []auth.Action{auth.ActionRead, auth.ActionRetry}, Queues: []string{"payments.*"}},
		{Role: "orders-retry", Actions: []auth.Action{auth.ActionRetry}, Queues: []string{"orders"}},
	}}
	readKey := auth.KeyPrincipal(auth.Key{Name: "ops-read", Scope: auth.ScopeRead})
	cases := []struct {
		who     auth.Principal
		queue   string
		allowed bool
	}{
		{payments, "payments.eu", true},
		{payments, "orders", false}, // retry, not read
		{payments, "", false},       // every queue
		{readKey, "", true},
		{readKey, "orders", true},
		{auth.Principal{Kind: "oidc", Name: "nobody"}, "payments.eu", false},
	}
	for _, c := range cases {
		err := exportAllowed(c.who, &filter.Filter{Queue: c.queue})
		if c.allowed != (err == nil) {
			t.Errorf("%s exporting queue %q: %v, want allowed=%v", c.who.Name, c.queue, err, c.allowed)
			continue
		}
		var apiErr *APIError
		if err != nil && (!errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || apiErr.Details["parameter"] != "queue") {
			t.Errorf("%s exporting queue %q: %v, want 403 naming queue", c.who.Name, c.queue, err)
		}
	}
	var apiErr *APIError
	err := exportAllowed(payments, &filter.Filter{})
	if want := "an export of every queue needs read on every queue; add queue= naming a queue you may read (payments.*)"; !errors.As(err, &apiErr) || apiErr.Message != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
