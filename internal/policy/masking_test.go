package policy

import (
	"bytes"
	"strings"
	"testing"
)

func TestMaskingMergesFieldByField(t *testing.T) {
	t.Parallel()
	set, err := load([]source{{"p.yaml", []byte(`
_default:
  masking: {patterns: [card_number, email], headers: [authorization]}
topics:
  "payments.*":
    masking:
      paths: [card.number]
      regexes: [{name: ssn, pattern: '[0-9]{3}-[0-9]{2}-[0-9]{4}'}]
  payments.eu:
    masking: {patterns: []}
  logs: {max_age: P1D}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	if !set.Masks() {
		t.Fatal("Masks() = false")
	}
	spec := func(topic string) string {
		s := maskingSpecOf(set.Masking(topic))
		return strings.Join(s.Paths, ",") + "|" + strings.Join(s.Headers, ",") + "|" + strings.Join(s.Patterns, ",") + "|" + func() string {
			var n []string
			for _, r := range s.Regexes {
				n = append(n, r.Name)
			}
			return strings.Join(n, ",")
		}()
	}
	for topic, want := range map[string]string{
		"logs":        "|authorization|card_number,email|",
		"payments.us": "card.number|authorization|card_number,email|ssn",
		"payments.eu": "card.number|authorization||ssn", // patterns cleared, the rest inherited
	} {
		if got := spec(topic); got != want {
			t.Errorf("%s: masking %s, want %s", topic, got, want)
		}
	}
	r := set.Masking("payments.us")
	if got := string(r.Value([]byte(`{"card":{"number":"x"},"ssn":"123-45-6789","n":4111111111111111}`))); got != `{"card":{"number":"***"},"ssn":"***","n":"***"}` {
		t.Errorf("masked: %s", got)
	}
	if none, _ := load([]source{{"p.yaml", []byte("_default: {max_age: P1D}\n")}}); none.Masks() || none.Masking("x") != nil {
		t.Error("a set without masking masks")
	}
}

func TestMaskingValidation(t *testing.T) {
	t.Parallel()
	_, err := load([]source{{"bad.yaml", []byte(`_default:
  masking:
    paths: ["card..number", "ok"]
    patterns: [credit_card]
    regexes:
      - {name: everything, pattern: '.*'}
      - {name: broken, pattern: '('}
      - {name: email, pattern: 'x'}
      - {pattern: 'y'}
    colour: red
topics:
  orders:
    types:
      order.refund:
        masking: {paths: [a]}
`)}})
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		`bad.yaml: _default.masking.paths[0]: must be dot-separated keys like customer.id, without empty segments, got "card..number" (line 3)`,
		`bad.yaml: _default.masking.patterns[0]: must be one of card_number, email, got "credit_card" (write your own under regexes) (line 4)`,
		`bad.yaml: _default.masking.regexes[0].pattern: ".*" matches the empty string: it would mask between every two characters (line 6)`,
		`bad.yaml: _default.masking.regexes[1].pattern: not a valid regular expression (RE2 syntax)`,
		`bad.yaml: _default.masking.regexes[2].name: "email" is a built-in pattern: list it under patterns, or name yours otherwise (line 8)`,
		`bad.yaml: _default.masking.regexes[3].name: required: every regex needs a name (explain shows it)`,
		`bad.yaml: _default.masking.colour: unknown field`,
		`bad.yaml: topics.orders.types."order.refund".masking: is set per topic, not per type`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}

func TestMaskingIsFilesOnly(t *testing.T) {
	t.Parallel()
	spec, err := DecodeTopicSpec([]byte(`{"masking":{"paths":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = spec.CheckAPIConfig(false)
	if err == nil || !strings.Contains(err.Error(), "masking: masking is set in policy files only") {
		t.Errorf("CheckAPIConfig = %v", err)
	}
}

func TestExplainShowsMasking(t *testing.T) {
	t.Parallel()
	set, err := load([]source{{"p.yaml", []byte(`
topics:
  payments:
    masking:
      paths: [card.number]
      keys: ["cust-*"]
      patterns: [email]
      regexes: [{name: ssn, pattern: '[0-9]{3}-[0-9]{2}-[0-9]{4}'}]
`)}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Explain(set.Resolve("payments", ""), &buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"masking.paths               card.number\n",
		"masking.headers             none\n",
		"masking.keys                cust-*\n",
		"masking.patterns            email\n",
		"masking.regexes.ssn         [0-9]{3}-[0-9]{2}-[0-9]{4}\n",
		"masking applies to          callers without unmask on the topic (read-only API keys, keys with unmask: false)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, buf.String())
		}
	}
}
