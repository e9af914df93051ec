package mask

import (
	"reflect"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/filter"
)

// A filter shown to a caller who may not see what the rules mask (an
// audit entry's) shows the value of every condition Hides refuses as ***,
// and what the conditions are on as it is.
func TestFilterMasksTheValuesHidesRefuses(t *testing.T) {
	r := rules(t)
	f := &filter.Filter{Queue: "payments", Type: "charge", ErrorType: "db.timeout", Incident: "00c0ffee00c0ffee",
		Key: []byte("cust-42"), Q: "TOPSECRET", Path: []string{"card", "number"}, Value: "4111111111111111",
		Headers: []filter.Header{{Key: "Authorization", Value: "Bearer SECRET", ValueSet: true},
			{Key: "x-customer-id", ValueSet: true, Value: "c-7"}, {Key: "tenant", Value: "acme", ValueSet: true}, {Key: "x-customer-tag"}}}
	before := f.String()
	got := r.Filter(f)
	want := `{"queue":"payments","type":"charge","error_type":"db.timeout","key":"***","q":"***","path":"card.number","value":"***",` +
		`"header":["Authorization:***","x-customer-id:***","tenant:acme","x-customer-tag"],"incident":"00c0ffee00c0ffee"}`
	if got.String() != want {
		t.Errorf("masked filter:\n%s\nwant:\n%s", got, want)
	}
	if f.String() != before {
		t.Errorf("the filter itself changed: %s", f)
	}
	// A value masked by a pattern, at a path that is not.
	if got := r.Filter(&filter.Filter{Path: []string{"note"}, Value: "ann@example.com"}); got.Value != Marker {
		t.Errorf("a value holding an email: %q", got.Value)
	}
	// What the rules do not mask is shown: a key of another pattern, a
	// path they do not mask, q when nothing in the value is masked.
	clear := &filter.Filter{Key: []byte("order-1"), Path: []string{"card", "brand"}, Value: "visa"}
	if got := r.Filter(clear); got.String() != clear.String() {
		t.Errorf("unmasked conditions: %s", got)
	}
	if got := (&Rules{Keys: []string{"*"}}).Filter(&filter.Filter{Q: "timeout"}); got.Q != "timeout" {
		t.Errorf("q with nothing in the value masked: %q", got.Q)
	}
	var none *Rules
	if none.Filter(f) != f {
		t.Error("nil rules must return the filter itself")
	}
}

// Every field of filter.Filter is either a condition on record content,
// which Filter masks, or shown as it is: a field added to filter.Filter
// fails here until it is listed, so that a new content condition cannot be
// shown in clear in the audit log by default.
func TestFilterKnowsEveryFilterField(t *testing.T) {
	masked := map[string]bool{"Key": true, "Q": true, "Value": true, "Headers": true}
	shown := map[string]bool{"Queue": true, "Type": true, "ErrorType": true, "State": true, "Exhaustion": true,
		"Since": true, "Until": true, "Path": true, "Incident": true, "IDs": true, "Unacknowledged": true}
	var unknown []string
	for i := range reflect.TypeFor[filter.Filter]().NumField() {
		name := reflect.TypeFor[filter.Filter]().Field(i).Name
		if !masked[name] && !shown[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("filter.Filter fields %s are neither masked by Rules.Filter nor listed as shown: "+
			"mask them when they hold record content (Hides too), else list them here", strings.Join(unknown, ", "))
	}
}
