package httpapi_test

import (
	"strings"
	"testing"
)

// A JSON value stored without its searchable copy says why on the record
// (GET /ojs/v1/dead-letter/{id}, validated against the OpenAPI document),
// with the value itself intact; a searchable one shows null.
func TestRecordSaysWhyItsPayloadIsOmitted(t *testing.T) {
	b := setup(t)
	deep := strings.Repeat("[", 20000) + "1" + strings.Repeat("]", 20000)
	ids := b.seed(t, rec{value: deep}, rec{value: `{"s":"\ud800"}`}, rec{value: `{"ok":1}`})
	var got struct {
		Value          string  `json:"value"`
		PayloadOmitted *string `json:"payload_omitted"`
	}
	for i, want := range []string{"nested more than 1000 levels deep", "Postgres refused it as jsonb", ""} {
		b.get(t, "/ojs/v1/dead-letter/"+ids[i], &got)
		switch {
		case want == "" && got.PayloadOmitted != nil:
			t.Errorf("record %d: payload_omitted = %q, want null", i, *got.PayloadOmitted)
		case want != "" && (got.PayloadOmitted == nil || !strings.Contains(*got.PayloadOmitted, want)):
			t.Errorf("record %d: payload_omitted = %v, want it to say %q", i, got.PayloadOmitted, want)
		}
		if i == 0 && got.Value != deep {
			t.Errorf("record %d: value not kept", i)
		}
	}
}
