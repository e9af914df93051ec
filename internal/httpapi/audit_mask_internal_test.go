package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/mask"
	"github.com/redrive/redrive/internal/records"
)

// auditMasker sees payments masked (a header, a path, keys, emails) and
// orders whole (as a caller who may unmask orders, or whose orders are not
// masked).
func auditMasker(t *testing.T) (*masker, *mask.Rules) {
	t.Helper()
	email, ok := mask.Builtin("email")
	if !ok {
		t.Fatal("no email pattern")
	}
	payments := &mask.Rules{Paths: [][]string{{"secret", "token"}}, Headers: []string{"authorization"}, Keys: []string{"cust-*"},
		Patterns: []*mask.Pattern{email}}
	return &masker{rules: map[string]*mask.Rules{"payments": payments, "orders": nil}}, payments
}

func maskedEntry(m *masker, union *mask.Rules, e records.AuditEntry) records.AuditEntry {
	m.audit(&e, union)
	return e
}

// A filter is masked by the rules of the queue it names (it selects that
// queue's records only), by every queue's when it names none; a config by
// its queue's; what the server cannot read, or an action it does not know,
// is masked whole.
func TestAuditEntryMaskedByWhatItIsAbout(t *testing.T) {
	m, union := auditMasker(t)
	search := `"header":["authorization:Bearer S1"],"key":"cust-1","q":"S2","path":"secret.token","value":"S3"`
	for _, c := range []struct {
		what  string
		entry records.AuditEntry
		want  string // the filter, before and after shown, joined by " | "
	}{
		{"a filter of a masked queue", records.AuditEntry{Action: "dead_letter.purge", Filter: json.RawMessage(`{"queue":"payments",` + search + `}`)},
			`{"queue":"payments","key":"***","q":"***","path":"secret.token","value":"***","header":["authorization:***"]} |  | `},
		{"a filter of a queue shown whole", records.AuditEntry{Action: "dead_letter.purge", Filter: json.RawMessage(`{"queue":"orders",` + search + `}`)},
			`{"queue":"orders",` + search + `} |  | `},
		{"a filter of every queue", records.AuditEntry{Action: "dead_letter.bulk_retry", Filter: json.RawMessage(`{` + search + `}`)},
			`{"key":"***","q":"***","path":"secret.token","value":"***","header":["authorization:***"]} |  | `},
		{"a filter that does not read back", records.AuditEntry{Action: "dead_letter.export", Filter: json.RawMessage(`{"colour":"S4"}`)},
			`{"masked":"***"} |  | `},
		{"an action the server does not know", records.AuditEntry{Action: "dead_letter.new", Filter: json.RawMessage(`{"queue":"orders"}`),
			After: json.RawMessage(`{"n":1}`)}, `{"masked":"***"} |  | {"masked":"***"}`},
		{"a document an action is not listed as keeping", records.AuditEntry{Action: "dead_letter.delete", Filter: json.RawMessage(`{"q":"S5"}`)},
			`{"masked":"***"} |  | `},
		{"a config: its queue's rules", records.AuditEntry{Action: "queue.config", Target: "payments",
			Before: json.RawMessage(`{"retry":{"max_attempts":2}}`),
			After: json.RawMessage(`{"retry":{"max_attempts":2},"replay_rules":[{"name":"r","filter":{"q":"S6"}},{"name":"o","filter":{"queue":"orders","q":"shown"}}],` +
				`"types":{"t":{"replay_rules":[{"name":"x","filter":{"key":"cust-2"}}]}},"filters":[{"name":"f","match":{"key_prefix":"cust-3"}}]}`)},
			` | {"retry":{"max_attempts":2}} | {"filters":[{"match":"***","name":"f"}],"replay_rules":[{"filter":{"q":"***"},"name":"r"},` +
				`{"filter":{"q":"shown","queue":"orders"},"name":"o"}],"retry":{"max_attempts":2},"types":{"t":{"replay_rules":[{"filter":{"key":"***"},"name":"x"}]}}}`},
		{"a config of a queue shown whole", records.AuditEntry{Action: "queue.pause", Target: "orders",
			After: json.RawMessage(`{"replay_rules":[{"name":"r","filter":{"q":"shown"}}]}`)},
			` |  | {"replay_rules":[{"name":"r","filter":{"q":"shown"}}]}`},
		{"a replay rule", records.AuditEntry{Action: "replay_rule.update", Before: json.RawMessage(`{"name":"r","filter":{"q":"S7"},"delay":"PT1H"}`),
			After: json.RawMessage(`{"name":"r","filter":{"queue":"orders","q":"shown"},"delay":"PT1H"}`)},
			` | {"delay":"PT1H","filter":{"q":"***"},"name":"r"} | {"name":"r","filter":{"queue":"orders","q":"shown"},"delay":"PT1H"}`},
		{"an override", records.AuditEntry{Action: "dead_letter.retry", Filter: json.RawMessage(`{"queue":null,"headers":[{"key":"Authorization","value":"QmVhcmVyIFM4","encoding":"base64"},` +
			`{"key":"tenant","value":"acme"},null],"payload":{"secret":{"token":"S9"},"n":1.50},"meta":{"by":"ann@example.com"},"value":null}`)},
			`{"headers":[{"encoding":"base64","key":"Authorization","value":"***"},{"key":"tenant","value":"acme"},null],"meta":{"by":"***"},` +
				`"payload":{"secret":{"token":"***"},"n":1.50},"queue":null,"value":null} |  | `},
		{"an override's value, base64", records.AuditEntry{Action: "dead_letter.retry",
			Filter: json.RawMessage(`{"value":"eyJzZWNyZXQiOnsidG9rZW4iOiJTMTAifX0=","value_encoding":"base64"}`)},
			`{"value":"eyJzZWNyZXQiOnsidG9rZW4iOiIqKioifX0=","value_encoding":"base64"} |  | `},
		{"an override that does not read back", records.AuditEntry{Action: "dead_letter.retry",
			Filter: json.RawMessage(`{"headers":{"authorization":"S11"},"value":"not base64 S12","value_encoding":"base64","payload":` +
				strings.Repeat("[", mask.MaxDepth+1) + strings.Repeat("]", mask.MaxDepth+1) + `}`)},
			`{"headers":"***","payload":"***","value":"***","value_encoding":"base64"} |  | `},
		{"plain documents", records.AuditEntry{Action: "dead_letter.import", After: json.RawMessage(`{"imported":1,"by":"ann@example.com"}`)},
			` |  | {"imported":1,"by":"ann@example.com"}`},
	} {
		e := maskedEntry(m, union, c.entry)
		if got := string(e.Filter) + " | " + string(e.Before) + " | " + string(e.After); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.what, got, c.want)
		}
	}
	var whole *masker
	if whole.of("payments") != nil {
		t.Error("a nil masker masks")
	}
}
